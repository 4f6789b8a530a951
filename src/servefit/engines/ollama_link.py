"""Join a Modelfile with the Ollama server that serves it, so both are estimated as one server:
the server's environment (OLLAMA_NUM_PARALLEL, OLLAMA_KV_CACHE_TYPE, ...) with the Modelfile's FROM
and PARAMETERs (num_ctx, num_gpu, ...).

A server site says which Modelfiles it uses through:
- site.inputs.file_refs: paths the sources layer found (build context, volume mounts,
  `ollama create NAME -f PATH` in a command), relative to the server's file or absolute, possibly
  container paths mapped by site.workload.path_map ({container_dir: host_dir});
- `ollama create ... -f PATH` words in its own argv;
- site.inputs.inline: InlineFile(text, line: first line in the file, indent: columns) for a
  Modelfile written inside the file (compose `configs: {x: {content: |...}}`).
The merged server carries the parsed Modelfile as site.inputs.definition.
Failing those, a lone Modelfile in the directory of a file with exactly one Ollama server is
taken as that server's. The Modelfile's own site is dropped once merged."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace

from servefit.core import LaunchSite, Span
from servefit.engines.ollama_modelfile import ModelfileDoc, modelfile_of, parse_modelfile


def _norm(p: str) -> str:
    return os.path.normpath(os.path.abspath(p))


def _refs(site: LaunchSite) -> list[str]:
    refs = [str(r) for r in site.inputs.file_refs]
    words = [t.text for t in site.argv]
    for i, w in enumerate(words):
        if w == "create":
            for j in range(i + 1, len(words) - 1):
                if words[j] in ("-f", "--file"):
                    refs.append(words[j + 1])
                    break
    base = os.path.dirname(site.file) if site.file else "."
    out = []
    pmap: Mapping[str, str] = site.workload.path_map
    for r in refs:
        for cdir, hdir in pmap.items():
            if r == cdir or r.startswith(cdir.rstrip("/") + "/"):
                r = os.path.join(hdir, r[len(cdir):].lstrip("/"))
                break
        out.append(_norm(r if os.path.isabs(r) else os.path.join(base, r)))
        if os.path.basename(r).lower() != "modelfile" and not os.path.splitext(r)[1]:
            out.append(_norm(os.path.join(base, r, "Modelfile")))  # a build context directory
    return out


def _shift(doc: ModelfileDoc, line0: int, indent: int, file: str) -> ModelfileDoc:
    def sh(sp: Span | None) -> Span | None:
        if sp is None:
            return None
        return Span(file, sp.line + line0 - 1, sp.col + indent, sp.end_line + line0 - 1, sp.end_col + indent)

    for ins in doc.instructions:
        ins.keyword = replace(ins.keyword, span=sh(ins.keyword.span))
        ins.value = replace(ins.value, span=sh(ins.value.span))
        if ins.param is not None:
            ins.param = replace(ins.param, span=sh(ins.param.span))
    for f in doc.findings:
        f.span = sh(f.span)
    doc.file = file
    return doc


def _merge(server: LaunchSite, doc: ModelfileDoc) -> LaunchSite:
    return replace(server, inputs=replace(server.inputs, definition=doc), engine="ollama")


def link_modelfiles(sites: list[LaunchSite], repo_files: Iterable[str] | Mapping[str, str] | None = None
                    ) -> list[LaunchSite]:
    """Sites with each Ollama server merged with its Modelfile(s); unmatched Modelfiles stay as
    they are (estimated with the default server environment)."""
    mf_sites = {_norm(s.file): s for s in sites if modelfile_of(s) is not None
                and [t.text for t in s.argv] == ["ollama", "serve"] and not s.env}
    servers = [s for s in sites if _norm(s.file) not in mf_sites or s is not mf_sites.get(_norm(s.file))]
    servers = [s for s in servers if (s.engine == "ollama" or any(t.text.endswith("ollama") for t in s.argv[:1]))]
    texts: dict[str, str] = {}
    if isinstance(repo_files, Mapping):
        texts = {_norm(k): v for k, v in repo_files.items()}
    used: set[str] = set()
    merged: dict[int, LaunchSite] = {}
    for srv in servers:
        if modelfile_of(srv) is not None:
            continue
        doc: ModelfileDoc | None = None
        for item in srv.inputs.inline:
            doc = _shift(parse_modelfile(item.text, srv.file), item.line, item.indent, srv.file)
            break
        if doc is None:
            for ref in _refs(srv):
                if ref in mf_sites:
                    doc = modelfile_of(mf_sites[ref])
                    used.add(ref)
                    break
                if ref in texts or os.path.isfile(ref):
                    text = texts.get(ref)
                    if text is None:
                        from servefit.safe_io import open_regular

                        with open_regular(ref) as fh:
                            text = fh.read(1 << 20).decode("utf-8", errors="replace")
                    doc = parse_modelfile(text, ref)
                    used.add(ref)
                    break
        if doc is None:
            d = _norm(os.path.dirname(srv.file))
            local = [p for p in mf_sites if os.path.dirname(p) == d]
            same_file = [s for s in servers if _norm(s.file) == _norm(srv.file)]
            if len(local) == 1 and len(same_file) == 1:
                doc = modelfile_of(mf_sites[local[0]])
                used.add(local[0])
        if doc is not None:
            merged[id(srv)] = _merge(srv, doc)
    out = []
    for s in sites:
        if id(s) in merged:
            out.append(merged[id(s)])
        elif _norm(s.file) in used and s is mf_sites.get(_norm(s.file)):
            continue
        else:
            out.append(s)
    return out


def _is_lone_modelfile(site: LaunchSite) -> bool:
    doc = modelfile_of(site)
    return doc is not None and doc.file == site.file and not site.env \
        and [t.text for t in site.argv] == ["ollama", "serve"]


def link_all(sites: list[LaunchSite], scanned: set[str]) -> list[LaunchSite]:
    """link_modelfiles, then each Modelfile given on its own is joined with the server beside it
    that uses it (a compose file or manifest in the same directory, not read in this run), so
    its slots and KV type are the deployment's rather than Ollama's defaults."""
    sites = link_modelfiles(sites)
    lone = [s for s in sites if _is_lone_modelfile(s)]
    if not lone:
        return sites
    from servefit.sources import file_kind, scan_file

    seen = {os.path.abspath(p) for p in scanned}
    by_dir: dict[str, list[LaunchSite]] = {}
    out = list(sites)
    for mf in lone:
        d = os.path.dirname(os.path.abspath(mf.file))
        if d not in by_dir:
            found: list[LaunchSite] = []
            try:
                names = sorted(os.listdir(d))
            except OSError:
                names = []
            for name in names:
                p = os.path.join(d, name)
                if p in seen or not os.path.isfile(p) or file_kind(p) in (None, "modelfile"):
                    continue
                found.extend(s for s in scan_file(p).sites if s.engine == "ollama")
            by_dir[d] = found
        if not by_dir[d]:
            continue
        for merged in link_modelfiles([mf, *by_dir[d]]):
            doc = modelfile_of(merged)
            if merged is not mf and doc is not None and doc.file == mf.file:
                out[out.index(mf)] = merged
                break
    return out
