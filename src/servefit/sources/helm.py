"""Helm values of the charts users run.

- An engine's own chart (vLLM production-stack, otwld ollama-helm): its plugin reads it
  (Engine.scan_chart, engines/<name>/charts.py), with the helpers below.
- Any other chart: a mapping whose `image` is an engine image or whose `command`/`args`/
  `extraArgs` start an engine, with `env`/`extraEnv` beside it (list or map).
Flux HelmRelease `spec.values` is read the same way. Commented-out items are YAML comments and
never settings. A flag servefit writes for a values key has the span of that key; its value
has the span of the value.
"""

from __future__ import annotations

import re

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import Finding, GpuHint, Severity, Token
from servefit.sources import detect
from servefit.sources.base import FileCtx, give_names
from servefit.sources.container import container
from servefit.sources.hints import NameHint, best_label, label_hint, merge, to_int
from servefit.sources.problems import unread_server
from servefit.sources.shell import Vars, Word, expand_word, split_words
from servefit.sources.yamlpos import Y


def true(y: Y, node: Node | None) -> bool:
    return (y.str(node) or "").lower() in ("true", "yes", "on", "1")


def flag(y: Y, parent: Node | None, key: str, text: str) -> Token:
    """`text` (a flag servefit writes for a values key) with the span of that key."""
    kn = y.key_node(parent, key)
    return Token(text, y.span(kn) if kn is not None else None)


def env_vars(y: Y, *nodes: Node | None) -> Vars:
    """env given as a k8s-style list (name/value) or a plain map."""
    env = Vars()
    for node in nodes:
        if isinstance(node, SequenceNode):
            for e in node.value:
                n, val = y.str(y.get(e, "name")), y.tok(y.get(e, "value"))
                if n and val is not None:
                    env.set(n, val)
        elif isinstance(node, MappingNode):
            for k, _, v in y.items(node):
                t = y.tok(v)
                if t is not None:
                    env.set(k, t)
    env.exported = set(env.values)
    return env


def arg_words(y: Y, node: Node | None, env: Vars | None = None) -> list[Word] | None:
    """`args` / `extraArgs`: list items (an item holding `--flag value` is split), or a string."""
    if isinstance(node, SequenceNode):
        out: list[Word] = []
        for item in node.value:
            if not isinstance(item, ScalarNode):
                continue
            text = str(item.value)
            if text.startswith("-") and " " in text.strip() and "=" not in text.split(" ", 1)[0]:
                out.extend(split_words(y.scalar_src(item), None, k8s=env))
            else:
                out.append(expand_word(y.scalar_src(item), None, k8s=env))
        return out or None
    if isinstance(node, ScalarNode) and str(node.value).strip():
        return split_words(y.scalar_src(node), None, k8s=env)
    return None


def hint_of(y: Y, *scopes: Node | None, count: tuple[int | None, Token | None, str] | None = None) -> GpuHint | None:
    names: list[NameHint] = []
    for scope in scopes:
        for k, _, v in y.items(y.get(scope, "nodeSelector")):
            t = y.tok(v)
            if t is not None and (h := label_hint(k, t, "nodeSelector")):
                names.append(h)
        terms = y.seq(y.get(scope, "nodeSelectorTerms")) or y.seq(y.get(
            scope, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"))
        for term in terms:
            for expr in y.seq(y.get(term, "matchExpressions")):
                vals = y.seq(y.get(expr, "values"))
                t = y.tok(vals[0]) if vals else None
                if t is not None and (h := label_hint(y.str(y.get(expr, "key")) or "", t, "node affinity", len(vals))):
                    names.append(h)
    if count is None:
        count = (None, None, "")
        for scope in scopes:
            for part in ("limits", "requests"):
                t = y.tok(y.get(scope, "resources", part, "nvidia.com/gpu"))
                if t is not None:
                    count = (to_int(t.text), t, f"resources.{part}.nvidia.com/gpu")
                    break
            if count[1] is not None:
                break
    n, tok, src = count
    return merge(best_label(names), n, src, tok.span if tok is not None else None)


def _image_text(y: Y, node: Node | None) -> Token | None:
    if isinstance(node, ScalarNode):
        return y.tok(node)
    repo = y.tok(y.get(node, "repository")) or y.tok(y.get(node, "name"))
    if repo is None:
        return None
    reg = y.str(y.get(node, "registry"))
    tag = y.str(y.get(node, "tag"))
    text = (f"{reg}/" if reg else "") + repo.text + (f":{tag}" if tag else "")
    return Token(text, repo.span)


def generic(y: Y, root: Node, fc: FileCtx, label: str, owned: frozenset[str] = frozenset()) -> None:
    """Any mapping (up to 4 levels down, list items included: `containers: [...]`) that runs an
    engine by image or by command; the keys of the engines' own charts (`owned`) are theirs. An
    engine image where no server was found is SF116: the chart's templates write its command."""
    queue: list[tuple[Node, str, int, str]] = [(root, "", 0, "")]
    seen: set[int] = set()
    before = len(fc.sites)
    unread: list[Token] = []
    while queue:
        node, path, depth, key = queue.pop(0)
        if id(node) in seen or not isinstance(node, MappingNode):
            continue
        seen.add(id(node))
        if _generic_one(y, node, root, fc, f"{label}/{path}" if path else label, key):
            continue
        image = _image_text(y, y.get(node, "image"))
        if image is not None and detect.engine_of_image(image.text) is not None:
            unread.append(image)
        if depth < 4:
            for k, _, v in y.items(node):
                if k in owned and depth == 0:  # an engine chart's own top-level key, not a name (`controllers.ollama`)
                    continue
                at = f"{path}.{k}" if path else k
                if isinstance(v, MappingNode):
                    queue.append((v, at, depth + 1, k))
                elif isinstance(v, SequenceNode):
                    queue.extend((item, f"{at}[{i}]", depth + 1, k) for i, item in enumerate(v.value)
                                 if isinstance(item, MappingNode))
    if len(fc.sites) == before:
        helm_values = label != "helm" or _values_like(fc.path)
        for image in unread:
            fc.findings.append(image_not_read(image) if helm_values else image_not_read(image, NOT_VALUES, severity="info"))
        if not unread and label == "helm" and helm_values:
            _engine_section_not_read(y, root, fc)


def _engine_section_not_read(y: Y, root: Node, fc: FileCtx) -> None:
    """SF116 on a values file whose top-level section is named after an engine (`vllm:` with its
    env, freechat-fun/freechat-vllm) but that names no image or command: the chart it is for (a
    remote one, `helm install -f values.yaml repo/vllm`) writes the server, so it was not read."""
    from servefit.engines import get

    for key, knode, vnode in y.items(root):
        eng = next((name for name, t in detect.engine_tables()
                    if any(re.fullmatch(m, key, re.I) for m in t.get("markers") or ())), None)
        if eng is not None and _switched_off(y, vnode):
            continue  # open-webui's `ollama: {enabled: false}`: the chart's dependency condition leaves it out
        if eng is not None:
            fc.findings.append(unread_server(f"this values file configures {get(eng).title} (its `{key}:` "
                                             f"section), but {NO_CHART}", span=y.span(knode)))
            return


def _switched_off(y: Y, node: Node) -> bool:
    """A section `enabled: false` turns off: a subchart whose Chart.yaml dependency has `condition: NAME.enabled`
    (helm.sh/docs/topics/charts/#tags-and-condition-fields-in-dependencies) is not rendered at all."""
    flag = y.get(node, "enabled") if isinstance(node, MappingNode) else None
    return isinstance(flag, ScalarNode) and str(flag.value).strip().lower() in ("false", "no", "off")


NO_CHART = ("the command it runs comes from the templates of a chart servefit does not read, so this server's "
            "settings were not checked: put the chart in the repository (servefit renders it with helm) or lint the "
            "output of `helm template`")


NOT_VALUES = ("this file is not a manifest, compose file or Helm values file (no chart is beside it): the program that "
              "reads it builds the command, so this server's settings were not checked")


def _values_like(path: str) -> bool:
    """A file Helm may take as values: named like one (values.yaml, prod-values.yaml, values/prod.yaml) or in a
    chart's folder (or up to two below it)."""
    import os
    import re

    if re.search(r"values", os.path.basename(path), re.I) or os.path.basename(os.path.dirname(path)) == "values":
        return True
    d = os.path.dirname(os.path.abspath(path))
    for _ in range(3):
        if os.path.isfile(os.path.join(d, "Chart.yaml")):
            return True
        d = os.path.dirname(d)
    return False


def chart_here(charts: list[str], values: str, helm: bool, passed: bool = False) -> str:
    """NO_CHART's advice where the repository does hold a chart, but this values file is not one servefit pairs
    with it (it renders a chart with the values files in or beside its directory). A file given with --values
    was rendered with the chart, and the render failed (SF104 says how): no advice to pass it again."""
    which = f"chart {charts[0]}" if len(charts) == 1 else f"one of the charts {', '.join(charts)}"
    if passed:
        return (f"the command it runs comes from the templates of {which}, which helm could not render with this "
                "file (SF104 on the chart says why), so this server's settings were not checked")
    how = f"`servefit lint --values {values}`" + ("" if helm else " with helm 3 on PATH")
    return (f"the command it runs comes from the templates of {which}, and servefit renders a chart only with "
            f"the values files in or beside its directory, so this server's settings were not checked: run {how}")


def image_not_read(image: Token, why: str = "", what: str = "", severity: Severity | None = None) -> Finding:
    """SF116 on an engine image whose command servefit cannot know from the values (`what` it
    runs, when the image alone does not say)."""
    from servefit.engines import get

    eng = detect.engine_of_image(image.text)
    title = what or (get(eng).title if eng else "an engine")
    why = why or NO_CHART
    return unread_server(f"{image.text} runs {title}, but {why}", span=image.span, severity=severity)


def _generic_one(y: Y, m: Node, root: Node, fc: FileCtx, label: str, key: str = "") -> bool:
    image = _image_text(y, y.get(m, "image"))
    eng = detect.engine_of_image(image.text if image else None)
    env = env_vars(y, y.get(m, "env"), y.get(m, "extraEnv"), y.get(m, "envVars"), y.get(m, "extraEnvVars"))
    cmd = arg_words(y, y.get(m, "command"), env)
    args = (arg_words(y, y.get(m, "args"), env) or []) + (arg_words(y, y.get(m, "extraArgs"), env) or [])
    texts = [w.text for w in (cmd or []) + args]
    if eng is None and detect.find_engine(texts) is None:
        return False
    if cmd is None and not args and eng is not None and not (detect.trait(eng, "image_serves") and env.values):
        # an image alone (a router, a cache server) is not a configured server; nor is the image of an engine that
        # reads its settings from the environment (TGI's MODEL_ID) when the values give it none: the chart's
        # templates write them (SF116, or SF104 for a chart in the repository that was not rendered)
        return False
    ctx = fc.ctx()
    launches = container(image, cmd, args or None, ctx, env)
    if not launches:
        return False
    before = len(fc.sites)
    fc.add(launches, label, hint_of(y, m, root), {"chart": "values"}, ctx.ollama_models)
    give_names(fc.sites[before:], value_names(y, m, root, key))
    return True


# values keys that name the model a chart serves, then the chart's own name overrides
_NAME_KEYS = ("modelName", "servedModelName", "model_name", "served_model_name", "name")
_CHART_NAME_KEYS = ("fullnameOverride", "nameOverride")


def value_names(y: Y, m: Node, root: Node, key: str) -> list[tuple[str | None, str]]:
    """The names a values file gives the server defined at `m`: its model-name keys, the key it
    sits under (`models: {llama-3-8b: {image: ...}}`), the chart's name overrides."""
    out: list[tuple[str | None, str]] = [(y.str(y.get(m, k)), f"its values key {k}") for k in _NAME_KEYS]
    if key:
        out.append((key, "the values key it is defined under"))
    out += [(y.str(y.get(root, k)), f"the values key {k}") for k in _CHART_NAME_KEYS]
    return out


def scan_values(y: Y, root: Node | None, fc: FileCtx, label: str = "helm", chart: str | None = None) -> None:
    """A values file (or a HelmRelease's values): an engine's own chart when its keys are there
    (Engine.scan_chart; the keys are the engines' `chart_keys`), else any mapping that runs one."""
    if not isinstance(root, MappingNode):
        return
    owned: set[str] = set()
    claimed = False
    for name, keys in detect.owners("chart_keys"):
        owned.update(keys)
        if any(y.get(root, k) is not None for k in keys):
            from servefit import engines

            claimed = engines.get(name).scan_chart(y, root, fc, label) or claimed
    if not claimed:
        generic(y, root, fc, label, frozenset(owned))
