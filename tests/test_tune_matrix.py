"""`tune --write` for every engine in every file format servefit reads.

Each case writes a small, realistic file that over-asks an L4 (131,072 tokens of context, or four
Ollama slots of it; or, for an Ollama with no environment, under-asks it at the 4,096-token default), runs `servefit tune --write` through the CLI's main() and asserts:

- the exact bytes written: the value in place, in the file's own idiom (a flag's value, the
  environment variable or shell/Make/.env variable that sets it, a values key), a new flag among
  the command's other flags, a new variable in the environment block the file already uses;
- a second `tune --write` writes nothing;
- `lint` afterwards reports none of the memory findings tune addressed (the findings left are
  named: a missing API key, no authentication);
- `estimate` on the written file gives what tune promised (outcome, context, KV cache tokens).

Combinations tune cannot write say so in one clear line and leave the files as they were.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from servefit.cli import main

M8 = "meta-llama/Llama-3.1-8B-Instruct"
GGUF = "/models/Qwen2.5-14B-Instruct-Q4_K_M.gguf"
OLLAMA_SH = "ollama serve & sleep 5 && ollama pull qwen2.5:14b && wait"

# prog: the program's words; args: its flags; image_args: the flags when the image's entrypoint is
# the server; env: the same settings as environment variables; var: a variable that sets the context
ENGINES: dict[str, dict[str, Any]] = {
    "vllm": dict(image="vllm/vllm-openai:v0.11.0", prog=["vllm", "serve"],
                 args=[M8, "--max-model-len", "131072", "--gpu-memory-utilization", "0.92"],
                 image_args=["--model", M8, "--max-model-len", "131072", "--gpu-memory-utilization", "0.92"],
                 env=None, var=("MAX_MODEL_LEN", "--max-model-len")),
    "sglang": dict(image="lmsysorg/sglang:v0.5.3-cu126", prog=["python3", "-m", "sglang.launch_server"],
                   args=["--model-path", M8, "--context-length", "131072", "--mem-fraction-static", "0.95"],
                   image_args=None, env=None, var=("CONTEXT_LENGTH", "--context-length")),
    "tgi": dict(image="ghcr.io/huggingface/text-generation-inference:3.3.4", prog=["text-generation-launcher"],
                args=["--model-id", M8, "--max-total-tokens", "131072", "--max-input-tokens", "131000"],
                image_args=["--model-id", M8, "--max-total-tokens", "131072", "--max-input-tokens", "131000"],
                env={"MODEL_ID": M8, "MAX_TOTAL_TOKENS": "131072", "MAX_INPUT_TOKENS": "131000"},
                var=("MAX_TOTAL", "--max-total-tokens")),
    "llamacpp": dict(image="ghcr.io/ggml-org/llama.cpp:server-cuda-b6800", prog=["llama-server"],
                     args=["-m", GGUF, "-c", "131072", "-ngl", "99"],
                     image_args=["-m", GGUF, "-c", "131072", "-ngl", "99"],
                     env={"LLAMA_ARG_MODEL": GGUF, "LLAMA_ARG_CTX_SIZE": "131072", "LLAMA_ARG_N_GPU_LAYERS": "99"},
                     var=("CTX", "-c")),
    "ollama": dict(image="ollama/ollama:0.12.3", prog=["ollama", "serve"], args=[], image_args=None,
                   env={"OLLAMA_CONTEXT_LENGTH": "131072", "OLLAMA_NUM_PARALLEL": "4"}, var=None),
}
L4 = ["--gpu", "L4"]

Files = dict[str, str]


def _full(e: dict[str, Any]) -> list[str]:
    return [*e["prog"], *e["args"]]


def _line(e: dict[str, Any]) -> str:
    return " ".join(shlex.quote(w) for w in _full(e))


def _flow(words: list[str]) -> str:
    return "[" + ", ".join(json.dumps(w) for w in words) + "]"


def _pairs(args: list[str]) -> list[str]:
    """The flags as `--flag value` groups, one per continuation line (a leading positional stays
    on the program's line)."""
    out: list[str] = []
    i = 1 if args and not args[0].startswith("-") else 0
    while i < len(args):
        if i + 1 < len(args) and not args[i + 1].startswith("-"):
            out.append(f"{args[i]} {args[i + 1]}")
            i += 2
        else:
            out.append(args[i])
            i += 1
    return out


def _head(e: dict[str, Any], prefix: str = "") -> str:
    first = [e["args"][0]] if e["args"] and not e["args"][0].startswith("-") else []
    return " ".join([prefix + e["prog"][0], *e["prog"][1:], *first])


def _k8s(container: str, gpu: str = "nvidia-l4") -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  replicas: 1
  selector:
    matchLabels:
      app: llm
  template:
    metadata:
      labels:
        app: llm
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: {gpu}
      containers:
        - name: server
{container}          resources:
            limits:
              nvidia.com/gpu: "1"
"""


def _k8s_env(env: dict[str, str]) -> str:
    return "          env:\n" + "".join(f'            - name: {k}\n              value: "{v}"\n' for k, v in env.items())


def _with_var(args: list[str], flag: str, ref: str) -> tuple[list[str], str]:
    args = list(args)
    i = args.index(flag)
    value, args[i + 1] = args[i + 1], ref
    return args, value


def _last(words: list[str], flag: str, value: str) -> list[str]:
    """The words with `flag value` moved to the end."""
    i = words.index(flag)
    return [*words[:i], *words[i + 2:], flag, value]


COMPOSE_GPU = """    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
"""
LWS = """apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: llm
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 1
    leaderTemplate:
      spec:
        nodeSelector:
          cloud.google.com/gke-accelerator: nvidia-l4
        containers:
          - name: leader
            image: {img}
            command: ["sh", "-c", {cmd}]
            resources:
              limits:
                nvidia.com/gpu: "1"
"""
RAY = """apiVersion: ray.io/v1
kind: RayService
metadata:
  name: llm
spec:
  rayClusterConfig:
    workerGroupSpecs:
      - groupName: gpu
        replicas: 1
        template:
          spec:
            nodeSelector:
              cloud.google.com/gke-accelerator: nvidia-l4
            containers:
              - name: llm
                image: {img}
                command: {cmd}
                resources:
                  limits:
                    nvidia.com/gpu: 1
"""
KSERVE = """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: vllm-runtime
spec:
  supportedModelFormats:
    - name: vLLM
  containers:
    - name: kserve-container
      image: vllm/vllm-openai:v0.11.0
      command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
      args: ["--port", "8080", "--model", "/mnt/models"]
---
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llama
spec:
  predictor:
    nodeSelector:
      cloud.google.com/gke-accelerator: nvidia-l4
    model:
      modelFormat: {name: vLLM}
      runtime: vllm-runtime
      storageUri: hf://meta-llama/Llama-3.1-8B-Instruct
      args: ["--max-model-len", "131072", "--dtype", "bfloat16"]
      resources:
        limits:
          nvidia.com/gpu: "1"
"""
KSERVE_CONTAINER = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llm
spec:
  predictor:
    nodeSelector:
      cloud.google.com/gke-accelerator: nvidia-l4
    containers:
      - name: kserve-container
        image: {img}
        command: {cmd}
        args: {args}
        resources:
          limits:
            nvidia.com/gpu: "1"
"""
HELM_VALUES = """image:
  repository: {repo}
  tag: "{tag}"
args:
{args}resources:
  limits:
    nvidia.com/gpu: 1
nodeSelector:
  cloud.google.com/gke-accelerator: nvidia-l4
"""


def _chart(name: str, e: dict[str, Any]) -> Files:
    """A chart whose template takes the context (and Ollama's slots) from values keys."""
    values = f"image: {e['image']}\ngpu: nvidia-l4\ncontextLength: 131072\n"
    if name == "ollama":
        c = (f"          image: {{{{ .Values.image }}}}\n          command: [\"sh\", \"-c\", {json.dumps(OLLAMA_SH)}]\n"
             "          env:\n            - name: OLLAMA_CONTEXT_LENGTH\n              value: {{ .Values.contextLength | quote }}\n"
             "            - name: OLLAMA_NUM_PARALLEL\n              value: {{ .Values.numParallel | quote }}\n")
        values += "numParallel: 4\n"
    else:
        args, _ = _with_var(e["args"], e["var"][1], "{{ .Values.contextLength | quote }}")
        c = f"          image: {{{{ .Values.image }}}}\n          command: {_flow(e['prog'])}\n          args:\n" + "".join(
            f"            - {w if w.startswith('{{') else json.dumps(w)}\n" for w in args)
    return {"llm/Chart.yaml": "apiVersion: v2\nname: llm\nversion: 0.1.0\n",
            "llm/templates/deployment.yaml": _k8s(c, "{{ .Values.gpu }}"), "llm/values.yaml": values}


def forms(name: str) -> dict[str, tuple[Files, list[str]]]:  # noqa: C901 - one branch per format
    """Every format this engine is written in: {format: (files, extra CLI args)}."""
    e = ENGINES[name]
    img = e["image"]
    out: dict[str, tuple[Files, list[str]]] = {}
    sh = OLLAMA_SH if name == "ollama" else "exec " + _line(e)
    server = name != "ollama"  # Ollama's settings are its environment (or a Modelfile), not flags
    # --- Kubernetes: an args array, `sh -c "..."`, env vars, `$(VAR)` in args
    if server:
        c = f"          image: {img}\n          command: {_flow(e['prog'])}\n          args:\n" + "".join(
            f"            - {json.dumps(w)}\n" for w in e["args"])
        out["k8s-args"] = ({"deploy.yaml": _k8s(c)}, [])
    c = f"          image: {img}\n          command: [\"sh\", \"-c\", {json.dumps(sh)}]\n"
    if name == "ollama":
        c += _k8s_env(e["env"])
    out["k8s-sh-c"] = ({"deploy.yaml": _k8s(c)}, [])
    if e["env"] and server:
        out["k8s-env"] = ({"deploy.yaml": _k8s(f"          image: {img}\n" + _k8s_env(e["env"]))}, [])
    if e["var"]:
        args, value = _with_var(e["args"], e["var"][1], f"$({e['var'][0]})")
        c = f"          image: {img}\n          command: {_flow(e['prog'])}\n          args:\n" + "".join(
            f"            - {json.dumps(w)}\n" for w in args) + _k8s_env({e["var"][0]: value})
        out["k8s-env-ref"] = ({"deploy.yaml": _k8s(c)}, [])
    # --- docker compose: list and string commands, environment map and list, env_file, .env
    words = e["image_args"] or (_full(e) if server else None)
    head = f"services:\n  llm:\n    image: {img}\n"
    if words:
        out["compose-list"] = ({"compose.yaml": f"{head}    command: {_flow(words)}\n{COMPOSE_GPU}"}, L4)
        out["compose-string"] = ({"compose.yaml": f"{head}    command: {' '.join(words)}\n{COMPOSE_GPU}"}, L4)
    if e["env"]:
        ent = f"    entrypoint: [\"/bin/sh\", \"-c\", {json.dumps(OLLAMA_SH)}]\n" if name == "ollama" else ""
        mapping = "".join(f'      {k}: "{v}"\n' for k, v in e["env"].items())
        listing = "".join(f"      - {k}={v}\n" for k, v in e["env"].items())
        out["compose-env-map"] = ({"compose.yaml": f"{head}{ent}    environment:\n{mapping}{COMPOSE_GPU}"}, L4)
        out["compose-env-list"] = ({"compose.yaml": f"{head}{ent}    environment:\n{listing}{COMPOSE_GPU}"}, L4)
        out["compose-env-file"] = ({"compose.yaml": f"{head}{ent}    env_file:\n      - llm.env\n{COMPOSE_GPU}",
                                    "llm.env": "".join(f"{k}={v}\n" for k, v in e["env"].items())}, L4)
    if e["var"] and e["image_args"]:
        args, value = _with_var(e["image_args"], e["var"][1], "${" + e["var"][0] + "}")
        out["compose-dotenv"] = ({"compose.yaml": f"{head}    command: {_flow(args)}\n{COMPOSE_GPU}",
                                  ".env": f"{e['var'][0]}={value}\n"}, L4)
    if e["var"] and words:
        # the context last, as the default of a variable nothing sets: `${CTX:-131072}`
        last = _last(words, e["var"][1], "${" + e["var"][0] + ":-131072}")
        out["compose-default"] = ({"compose.yaml": f"{head}    command: {_flow(last)}\n{COMPOSE_GPU}"}, L4)
    # --- Dockerfile: exec-form ENTRYPOINT, exec-form CMD for the image's entrypoint, shell form, ENV
    if server:
        out["docker-entrypoint-exec"] = ({"Dockerfile": f"FROM {img}\nENTRYPOINT {_flow(_full(e))}\n"}, L4)
        out["docker-shell"] = ({"Dockerfile": f"FROM {img}\nENTRYPOINT {_line(e)}\n"}, L4)
    if e["image_args"]:
        out["docker-cmd-exec"] = ({"Dockerfile": f"FROM {img}\nCMD {_flow(e['image_args'])}\n"}, L4)
    if e["env"]:
        tail = f"ENTRYPOINT [\"/bin/sh\", \"-c\", {json.dumps(OLLAMA_SH)}]\n" if name == "ollama" else ""
        out["docker-env"] = ({"Dockerfile": f"FROM {img}\n" + "".join(f"ENV {k}={v}\n" for k, v in e["env"].items())
                              + tail}, L4)
    # --- shell scripts (line continuations, variables, a unit written from a heredoc), Slurm, Make
    if server:
        cont = " \\\n  ".join([_head(e), *_pairs(e["args"])])
        out["sh-continuation"] = ({"serve.sh": f"#!/usr/bin/env bash\nset -euo pipefail\nexec {cont}\n"}, L4)
        var, flag = e["var"]
        cont_v = cont.replace(f"{flag} 131072", f'{flag} "${var}"')
        out["sh-variables"] = ({"serve.sh": f"#!/usr/bin/env bash\nset -euo pipefail\n{var}=131072\nexec {cont_v}\n"}, L4)
        last = " ".join(_last(_full(e), flag, "${" + var + ":-131072}"))
        out["sh-default"] = ({"serve.sh": f"#!/bin/sh\nexec {last}\n"}, L4)
        out["sh-heredoc"] = ({"setup.sh": f"#!/bin/sh\ncat > /etc/systemd/system/llm.service <<EOF\n[Service]\n"
                                          f"ExecStart=/usr/local/bin/{_line(e)}\nEOF\nsystemctl enable --now llm\n"}, L4)
        # a script written from a quoted heredoc (the setup script of a VM image)
        out["sh-heredoc-script"] = ({"setup.sh": f"#!/bin/sh\nset -e\ncat > /opt/serve.sh <<'EOF'\n#!/bin/sh\n"
                                                 f"exec {_line(e)}\nEOF\nchmod +x /opt/serve.sh\n"}, L4)
        out["makefile"] = ({"Makefile": f"{var} ?= 131072\n\n.PHONY: serve\nserve:\n\t"
                                        f"{_line(e).replace(f'{flag} 131072', f'{flag} $({var})')}\n"}, L4)
        out["slurm"] = ({"serve.sbatch": "#!/bin/bash\n#SBATCH --job-name=llm\n#SBATCH --gres=gpu:l4:1\n"
                                         f"#SBATCH --time=04:00:00\n\nmodule load cuda\nsrun {_line(e)}\n"}, [])
        out["skypilot"] = ({"sky.yaml": f"resources:\n  accelerators: L4:1\n  image_id: docker:{img}\nrun: |\n"
                                        f"  {_line(e)}\n"}, [])
        # the context from the task's envs, last on the run script's second line
        last = _last(_full(e), flag, f"${var}")
        cut = len(_head(e).split())
        out["skypilot-envs"] = ({"sky.yaml": f"resources:\n  accelerators: L4:1\n  image_id: docker:{img}\nenvs:\n"
                                             f"  {var}: 131072\nrun: |\n  {' '.join(last[:cut])} \\\n"
                                             f"    {' '.join(last[cut:])}\n"}, [])
        out["kserve-container"] = ({"isvc.yaml": KSERVE_CONTAINER.format(img=img, cmd=_flow(e["prog"]),
                                                                           args=_flow(e["args"]))}, [])
        out["lws"] = ({"lws.yaml": LWS.format(img=img, cmd=json.dumps(_line(e)))}, [])
        out["kuberay"] = ({"ray.yaml": RAY.format(img=img, cmd=_flow(_full(e)))}, [])
    else:
        exports = "".join(f"export {k}={v}\n" for k, v in e["env"].items())
        out["sh-variables"] = ({"serve.sh": f"#!/usr/bin/env bash\n{exports}ollama serve &\nsleep 5\n"
                                            "ollama run qwen2.5:14b\n"}, L4)
        out["slurm"] = ({"serve.sbatch": "#!/bin/bash\n#SBATCH --job-name=llm\n#SBATCH --gres=gpu:l4:1\n\n"
                                         f"{exports}ollama serve &\nsleep 5\nollama run qwen2.5:14b\n"}, [])
        envs = "".join(f"  {k}: {v}\n" for k, v in e["env"].items())
        out["skypilot"] = ({"sky.yaml": f"resources:\n  accelerators: L4:1\nenvs:\n{envs}run: |\n  ollama serve &\n"
                                        "  sleep 5\n  ollama run qwen2.5:14b\n"}, [])
        # qwen2.5:32b at its full 32,768 tokens spills 14 of 65 layers to the CPU on an L4
        # no environment at all: Ollama 0.12.3's default 4,096 tokens for one user (OLLM008) under-asks
        # the L4; the first variables start the file's own block just before the command
        out["compose-no-env"] = ({"compose.yaml": f"{head}    entrypoint: [\"/bin/sh\", \"-c\", {json.dumps(OLLAMA_SH)}]\n"
                                                  f"{COMPOSE_GPU}"}, L4)
        out["k8s-no-env"] = ({"deploy.yaml": _k8s(f"          image: {img}\n          command: [\"sh\", \"-c\", "
                                                  f"{json.dumps(OLLAMA_SH)}]\n")}, [])
        out["docker-no-env"] = ({"Dockerfile": f"FROM {img}\nENTRYPOINT [\"/bin/sh\", \"-c\", {json.dumps(OLLAMA_SH)}]\n"},
                                L4)
        out["modelfile"] = ({"Modelfile": "FROM qwen2.5:32b\nPARAMETER num_ctx 32768\nPARAMETER temperature 0.7\n"}, L4)
    # --- `docker run` in a script: the server's words after the image, or its `-e` variables
    if words:
        out["docker-run"] = ({"run.sh": f"#!/bin/sh\ndocker run -d --gpus all --ipc=host -p 8000:8000 \\\n  {img} \\\n"
                                        f"  {' '.join(words)}\n"}, L4)
    if e["env"]:
        opts = " ".join(f"-e {k}={v}" for k, v in e["env"].items())
        pull = "docker exec llm ollama pull qwen2.5:14b\n" if name == "ollama" else ""
        out["docker-run-env"] = ({"run.sh": f"#!/bin/sh\ndocker run -d --gpus all --name llm {opts} {img}\n{pull}"}, L4)
    # --- systemd: ExecStart with continuations, Environment=, EnvironmentFile=
    if server:
        cont = " \\\n    ".join([_head(e, "/usr/local/bin/"), *_pairs(e["args"])])
        out["systemd-execstart"] = ({"llm.service": f"[Unit]\nDescription=LLM server\n\n[Service]\nExecStart={cont}\n"
                                                    "Restart=always\n"}, L4)
    if e["env"]:
        pairs = " ".join(f"{k}={v}" for k, v in e["env"].items())
        start = "/usr/local/bin/" + " ".join(e["prog"])
        model = "# servefit: model=qwen2.5:14b\n" if name == "ollama" else ""
        out["systemd-environment"] = ({"llm.service": f"[Service]\n{model}Environment={pairs}\nExecStart={start}\n"}, L4)
        out["systemd-environmentfile"] = (
            {"llm.service": f"[Service]\n{model}EnvironmentFile=/etc/default/llm.env\nExecStart={start}\n",
             "llm.env": "".join(f"{k}={v}\n" for k, v in e["env"].items())}, L4)
    # --- llama-swap, KServe, Helm
    if name == "llamacpp":
        out["llama-swap"] = ({"config.yaml": f'models:\n  "qwen14":\n    cmd: |\n      /app/llama-server --port ${{PORT}}\n'
                                             f"      -m {GGUF}\n      -c 131072 -ngl 99\n"}, L4)
    if name == "vllm":
        out["llama-swap"] = ({"config.yaml": 'models:\n  "llama8":\n    cmd: >\n      docker run --rm --gpus all -p ${PORT}:8000\n'
                                             f"      {img} --model {M8} --max-model-len 131072\n"
                                             "    proxy: http://127.0.0.1:${PORT}\n"}, L4)
        out["kserve"] = ({"isvc.yaml": KSERVE}, [])
    if words:
        repo, tag = img.split(":")
        out["helm-values"] = ({"values.yaml": HELM_VALUES.format(repo=repo, tag=tag, args="".join(
            f"    - {json.dumps(w)}\n" for w in words))}, [])
    out["helm-chart"] = (_chart(name, e), [])
    return out


# --- what each combination must write ------------------------------------------------------
# (old, new) replacements; each `old` occurs exactly once in exactly one of the case's files
CONTEXT = {"vllm": [("131072", "32768")], "sglang": [("131072", "32768")],
           "tgi": [("131072", "16384"), ("131000", "16383")], "llamacpp": [("131072", "65536")]}
# llama.cpp splits -c over its slots: 32,768 tokens for each of 2 users is -c 65536 --parallel 2,
# the new flag among the command's flags, or LLAMA_ARG_N_PARALLEL beside the other LLAMA_ARG_*
PAR_YAML_LIST = ('"99"]', '"99", "--parallel", "2"]')
PAR_INLINE = ("-ngl 99", "-ngl 99 --parallel 2")
LLAMACPP: dict[str, list[tuple[str, str]]] = {
    "k8s-args": [('            - "99"\n', '            - "99"\n            - "--parallel"\n            - "2"\n')],
    "k8s-sh-c": [PAR_INLINE],
    "k8s-env": [('              value: "99"\n',
                 '              value: "99"\n            - name: LLAMA_ARG_N_PARALLEL\n              value: "2"\n')],
    "k8s-env-ref": [('            - "99"\n', '            - "99"\n            - "--parallel"\n            - "2"\n')],
    "compose-list": [PAR_YAML_LIST], "compose-string": [PAR_INLINE],
    "compose-env-map": [('LLAMA_ARG_N_GPU_LAYERS: "99"\n', 'LLAMA_ARG_N_GPU_LAYERS: "99"\n      LLAMA_ARG_N_PARALLEL: "2"\n')],
    "compose-env-list": [("- LLAMA_ARG_N_GPU_LAYERS=99\n", "- LLAMA_ARG_N_GPU_LAYERS=99\n      - LLAMA_ARG_N_PARALLEL=2\n")],
    "compose-env-file": [("LLAMA_ARG_N_GPU_LAYERS=99\n", "LLAMA_ARG_N_GPU_LAYERS=99\nLLAMA_ARG_N_PARALLEL=2\n")],
    "compose-dotenv": [PAR_YAML_LIST],
    "docker-entrypoint-exec": [PAR_YAML_LIST], "docker-cmd-exec": [PAR_YAML_LIST], "docker-shell": [PAR_INLINE],
    "docker-env": [("ENV LLAMA_ARG_N_GPU_LAYERS=99\n", "ENV LLAMA_ARG_N_GPU_LAYERS=99\nENV LLAMA_ARG_N_PARALLEL=2\n")],
    "sh-continuation": [("  -ngl 99\n", "  -ngl 99 \\\n  --parallel 2\n")],
    "sh-variables": [("  -ngl 99\n", "  -ngl 99 \\\n  --parallel 2\n")],
    "docker-run": [("-ngl 99\n", "-ngl 99 \\\n  --parallel 2\n")], "docker-run-env": [("-e LLAMA_ARG_N_GPU_LAYERS=99", "-e LLAMA_ARG_N_GPU_LAYERS=99 "
                                                                                 "-e LLAMA_ARG_N_PARALLEL=2")],
    # the default is the value; the new flag goes before the `-c ${CTX:-...}` pair, not into it
    "compose-default": [('"99", "-c"', '"99", "--parallel", "2", "-c"')], "sh-default": [("99 -c", "99 --parallel 2 -c")],
    # words follow the anchor on its line: the new flag joins them there, not on a line of its own
    "skypilot-envs": [("99 -c", "99 --parallel 2 -c")],
    "sh-heredoc": [PAR_INLINE], "sh-heredoc-script": [PAR_INLINE], "makefile": [PAR_INLINE], "slurm": [PAR_INLINE], "skypilot": [PAR_INLINE],
    "lws": [PAR_INLINE], "kuberay": [PAR_YAML_LIST], "kserve-container": [PAR_YAML_LIST],
    "systemd-execstart": [("    -ngl 99\n", "    -ngl 99 \\\n    --parallel 2\n")],
    # the unit's settings are its environment: the new one is an Environment= line beside them
    "systemd-environment": [("LLAMA_ARG_N_GPU_LAYERS=99\n", "LLAMA_ARG_N_GPU_LAYERS=99\nEnvironment=LLAMA_ARG_N_PARALLEL=2\n")],
    "systemd-environmentfile": [("LLAMA_ARG_N_GPU_LAYERS=99\n", "LLAMA_ARG_N_GPU_LAYERS=99\nLLAMA_ARG_N_PARALLEL=2\n")],
    "helm-values": [('    - "99"\n', '    - "99"\n    - "--parallel"\n    - "2"\n')],
}
# Ollama 0.12.3 (the image's tag) keeps 32,768 x 1 on the L4; the newest Ollama (no tag: scripts,
# units) fits 32,768 x 2. Both serve qwen2.5's trained 32,768 of the 131,072 asked (OLLM009), and
# tune writes that 32,768 where the 131,072 was (OLLAMA_CONTEXT_LENGTH here, as in a Modelfile)
OLLAMA: dict[str, list[tuple[str, str]]] = {
    "k8s-sh-c": [('value: "4"', 'value: "1"')], "compose-env-map": [('NUM_PARALLEL: "4"', 'NUM_PARALLEL: "1"')],
    "compose-env-list": [("NUM_PARALLEL=4", "NUM_PARALLEL=1")], "compose-env-file": [("NUM_PARALLEL=4", "NUM_PARALLEL=1")],
    "docker-env": [("NUM_PARALLEL=4", "NUM_PARALLEL=1")], "docker-run-env": [("NUM_PARALLEL=4", "NUM_PARALLEL=1")], "helm-chart": [("numParallel: 4", "numParallel: 1")],
    "sh-variables": [("NUM_PARALLEL=4", "NUM_PARALLEL=2")], "slurm": [("NUM_PARALLEL=4", "NUM_PARALLEL=2")],
    "skypilot": [("NUM_PARALLEL: 4", "NUM_PARALLEL: 2")],
    "systemd-environment": [("NUM_PARALLEL=4", "NUM_PARALLEL=2")],
    "systemd-environmentfile": [("NUM_PARALLEL=4", "NUM_PARALLEL=2")],
    "modelfile": [("num_ctx 32768", "num_ctx 8192")],
    "compose-no-env": [("    entrypoint:", "    environment:\n      - OLLAMA_CONTEXT_LENGTH=8192\n"
                                         "      - OLLAMA_NUM_PARALLEL=4\n    entrypoint:")],
    "k8s-no-env": [("          command:", '          env:\n            - name: OLLAMA_CONTEXT_LENGTH\n'
                                         '              value: "8192"\n            - name: OLLAMA_NUM_PARALLEL\n'
                                         '              value: "4"\n          command:')],
    "docker-no-env": [("ENTRYPOINT", "ENV OLLAMA_CONTEXT_LENGTH=8192\nENV OLLAMA_NUM_PARALLEL=4\nENTRYPOINT")],
}
SPECIAL: dict[tuple[str, str], list[tuple[str, str]]] = {
    # vLLM's llama-swap entry and KServe model args: the batch cap joins the flags
    ("vllm", "llama-swap"): [("--max-model-len 131072", "--max-model-len 32768 --max-num-seqs 10")],
    # llama-swap's cmd block: a new line for the new flag
    ("llamacpp", "llama-swap"): [("      -c 131072 -ngl 99\n", "      -c 65536 -ngl 99\n      --parallel 2\n")],
    ("vllm", "kserve"): [('"131072", "--dtype", "bfloat16"]', '"32768", "--dtype", "bfloat16", "--max-num-seqs", "128"]')],
    # the values key the template reads for the context
    **{(n, "helm-chart"): [("contextLength: 131072", "contextLength: 32768")] for n in ("vllm", "sglang")},
}
# a chart's template is every values file's: a literal written there is shown, not edited, and
# the rest of the change is held back with it (TGI's --max-input-tokens must stay below the
# --max-total-tokens in values.yaml; llama.cpp's -c 65536 means 32,768 only with --parallel 2)
BY_HAND: dict[tuple[str, str], list[str]] = {
    ("tgi", "helm-chart"): ["by hand: --max-total-tokens 16384", "by hand: --max-input-tokens 16383 (the chart's "
                            "template deployment.yaml writes this command for every values file)"],
    ("llamacpp", "helm-chart"): ["by hand: --ctx-size 65536", "by hand: --parallel 2 (the chart's template "
                                 "deployment.yaml writes this command for every values file)"],
}
# findings tune does not address (none of them about memory): no API key (SEC002, SEC003), no
# authentication (SEC004)
NOT_MEMORY = {"SEC002", "SEC003", "SEC004"}


def _expected(engine: str, form: str) -> list[tuple[str, str]]:
    if (engine, form) in SPECIAL:
        return SPECIAL[engine, form]
    if engine == "ollama":
        return OLLAMA[form] + ([("131072", "32768")] if form != "modelfile" and "no-env" not in form else [])
    return CONTEXT[engine] + (LLAMACPP[form] if engine == "llamacpp" else [])


def _apply(files: Files, edits: list[tuple[str, str]]) -> Files:
    out = dict(files)
    for old, new in edits:
        holders = [n for n, t in out.items() if old in t]
        assert len(holders) == 1 and out[holders[0]].count(old) == 1, (old, holders)
        out[holders[0]] = out[holders[0]].replace(old, new)
    return out


CASES = [(engine, form) for engine in ENGINES for form in forms(engine)]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    return rc, capsys.readouterr().out


def _write(d: Path, files: Files) -> None:
    for n, t in files.items():
        (d / n).parent.mkdir(parents=True, exist_ok=True)
        (d / n).write_text(t)


def _read(d: Path, files: Files) -> Files:
    return {n: (d / n).read_text() for n in files}


def _flagged(capsys: pytest.CaptureFixture[str], d: Path, extra: list[str]) -> set[str]:
    rc, out = _run(capsys, "lint", str(d), *extra, "--format", "json", "--fail-on", "never")
    assert rc == 0
    return {f["code"] for f in json.loads(out) if f["severity"] in ("error", "warning")}


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import k8stools

    where, why = k8stools.tools_dir()
    if where is None:
        pytest.skip(f"no helm 3 here: {why}")
    monkeypatch.setenv("PATH", f"{where}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.mark.parametrize(("engine", "form"), CASES, ids=[f"{e}-{f}" for e, f in CASES])
def test_tune_writes_each_format_in_its_own_idiom(engine: str, form: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> None:
    if form == "helm-chart":
        request.getfixturevalue("on_path")
    files, extra = forms(engine)[form]
    d = tmp_path / "repo"
    (d / ".git").mkdir(parents=True)
    _write(d, files)
    before = _flagged(capsys, d, extra)
    assert before - NOT_MEMORY, "the case must over-ask the GPU"
    rc, out = _run(capsys, "tune", str(d), *extra, "--write", "--format", "json")
    promised = json.loads(out)["sites"]
    assert len(promised) == 1 and "error" not in promised[0], promised
    if (engine, form) in BY_HAND:
        assert rc == 1 and _read(d, files) == files  # nothing written
        rc, out = _run(capsys, "tune", str(d), *extra, "--write")
        assert "not applied: some changes cannot be placed in the file: make them by hand (shown below)" in out
        assert [ln.strip() for ln in out.splitlines() if "by hand:" in ln] == BY_HAND[engine, form]
        return
    assert rc == 0
    expected = _apply(files, _expected(engine, form))
    assert _read(d, files) == expected
    # --diff on the original shows the same change, file by file, and writes nothing
    _write(d, files)
    rc, out = _run(capsys, "tune", str(d), *extra, "--diff")
    lines = out.splitlines()
    assert rc == 0 and _read(d, files) == files
    assert sorted(ln.rsplit("/", 1)[-1] for ln in lines if ln.startswith("+++ b/")) == sorted(
        n.rsplit("/", 1)[-1] for n in files if expected[n] != files[n])
    assert {ln[1:] for ln in lines if ln.startswith("+") and not ln.startswith("+++")} <= {
        x for t in expected.values() for x in t.splitlines()}
    assert {ln[1:] for ln in lines if ln.startswith("-") and not ln.startswith("---")} <= {
        x for t in files.values() for x in t.splitlines()}
    _write(d, expected)
    # a second --write writes nothing
    rc, out = _run(capsys, "tune", str(d), *extra, "--write")
    assert rc == 0 and "change  none: the config is already the best one" in out and "wrote" not in out
    assert _read(d, files) == expected
    # lint no longer reports what tune addressed
    assert _flagged(capsys, d, extra) == before & NOT_MEMORY
    # estimate on the written file: what tune promised
    best = promised[0]["best"]
    rc, out = _run(capsys, "estimate", str(d), *extra, "--format", "json")
    [est] = json.loads(out)
    assert rc == 0 and est["outcome"] == best["outcome"] == "started"
    assert (est["max_model_len"], est["kv_cache_tokens"]) == (best["context"], best["kv_cache_tokens"])


def test_ollama_unit_without_a_model_says_so_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An Ollama unit names no model (requests do): tune cannot size it and says so; nothing written."""
    d = tmp_path / "repo"
    (d / ".git").mkdir(parents=True)
    unit = "[Service]\nEnvironment=OLLAMA_CONTEXT_LENGTH=131072 OLLAMA_NUM_PARALLEL=4\nExecStart=/usr/local/bin/ollama serve\n"
    (d / "llm.service").write_text(unit)
    rc, out = _run(capsys, "tune", str(d), "--gpu", "L4", "--write", "--format", "json")
    assert rc == 2 and json.loads(out)["sites"][0]["error"] == (
        "Ollama loads the models requests name, and none is named here: add `# servefit: model=REF` above the "
        "server (or pass --model REF)")
    assert (d / "llm.service").read_text() == unit
