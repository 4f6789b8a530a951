"""The hostile-repository benchmark: every attack of issue 18, one case each, built at run time
in a temporary directory; prints per case the wall time and peak RSS of the servefit process
(start-up included), its exit code and whether the expected outcome was seen.

    python benchmarks/hostile.py [--only NAME] [--keep DIR] [--limit-s 5] [--limit-mb 300]

Each servefit run is a child process with an address-space cap (4 GiB) and a 60 s timeout, so a
regression cannot take the machine down; the bounds asserted are --limit-s and --limit-mb (issue
18: 5 s and 300 MB on a 2-core machine). Exit code 1 when a case is over a bound or misses its
expected outcome. tests/test_adversarial.py runs the same builders (a cheaper subset) in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECRET = "hf_PlantedSecretValue0123456789abcdef"


# ---------------------------------------------------------------- GGUF / safetensors writers

def _s(text: str | bytes) -> bytes:
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key: str, vtype: int, payload: bytes) -> bytes:
    return _s(key) + struct.pack("<I", vtype) + payload


def gguf(kvs: list[bytes], tensors: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, tensors, len(kvs)) + b"".join(kvs)


def u32(key: str, v: int) -> bytes:
    return gguf_kv(key, 4, struct.pack("<I", v))


def u64(key: str, v: int) -> bytes:
    return gguf_kv(key, 10, struct.pack("<Q", v))


def f32(key: str, v: float) -> bytes:
    return gguf_kv(key, 6, struct.pack("<f", v))


def gstr(key: str, v: str) -> bytes:
    return gguf_kv(key, 8, _s(v))


def llama_kvs(**over: bytes) -> list[bytes]:
    base = {"general.architecture": gstr("general.architecture", "llama"),
            "llama.block_count": u32("llama.block_count", 2), "llama.embedding_length": u32("llama.embedding_length", 64),
            "llama.attention.head_count": u32("llama.attention.head_count", 4),
            "llama.context_length": u32("llama.context_length", 4096)}
    base.update(over)
    return list(base.values())


# ---------------------------------------------------------------- cases

Case = tuple[str, Callable[[Path], list[str]], Callable[[int, str, str], bool]]


def _script(root: Path, body: str) -> None:
    (root / "run.sh").write_text("#!/bin/sh\n" + body)


def shell_doubling(root: Path) -> list[str]:
    _script(root, "A=x\n" + 'A="$A$A"\n' * 40 + "vllm serve Qwen/Qwen3-8B --max-model-len $A\n")
    return ["lint", "--gpu", "H100", "run.sh"]


def dockerfile_env(root: Path) -> list[str]:
    (root / "Dockerfile").write_text("FROM vllm/vllm-openai:v0.11.0\nENV A=x\n" + "ENV A=$A$A\n" * 40
                                     + 'CMD vllm serve Qwen/Qwen3-8B --served-model-name "$A"\n')
    return ["lint", "--gpu", "H100", "Dockerfile"]


def dockerfile_arg(root: Path) -> list[str]:
    (root / "Dockerfile").write_text("ARG A=x\n" + "ARG A=$A$A\n" * 40 + "FROM vllm/vllm-openai:v0.11.0\nARG A\n"
                                     + 'CMD vllm serve Qwen/Qwen3-8B --served-model-name "$A"\n')
    return ["lint", "--gpu", "H100", "Dockerfile"]


def compose_refs(root: Path) -> list[str]:
    (root / ".env").write_text("A=" + "x" * 60_000 + "\n")
    (root / "compose.yaml").write_text(
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.11.0\n    command: "
        + '"Qwen/Qwen3-8B --served-model-name ' + "${A}" * 2000 + '"\n')
    return ["lint", "--gpu", "H100", "compose.yaml"]


def llamaswap_macros(root: Path) -> list[str]:
    names = [f"m{i}" for i in range(41)]
    macros = [f'  {names[0]}: "x"'] + [f'  {names[i]}: "${{{names[i - 1]}}}${{{names[i - 1]}}}"' for i in range(1, 41)]
    (root / "llama-swap.yaml").write_text("macros:\n" + "\n".join(macros) + "\nmodels:\n  q:\n    cmd: llama-server "
                                          "-hf Qwen/Qwen3-8B-GGUF:Q4_K_M --alias ${m40}\n")
    return ["lint", "--gpu", "H100", "llama-swap.yaml"]


def llamaswap_models_x_macros(root: Path) -> list[str]:
    macros = "\n".join(f'  m{i}: "v{i}"' for i in range(3000))
    models = "\n".join(f"  q{i}:\n    cmd: llama-server -hf Qwen/Qwen3-8B-GGUF:Q4_K_M --alias ${{m{i}}}" for i in range(300))
    (root / "llama-swap.yaml").write_text("macros:\n" + macros + "\nmodels:\n" + models + "\n")
    return ["lint", "--list-sites", "llama-swap.yaml"]


def compose_shared_env_file(root: Path) -> list[str]:
    (root / ".env").write_text("".join(f"V{i}={'x' * 50}\n" for i in range(15000)))
    svcs = "".join(f"  s{i}:\n    image: vllm/vllm-openai\n    env_file: .env\n    command: Qwen/Qwen3-8B\n"
                   for i in range(2000))
    (root / "compose.yaml").write_text("services:\n" + svcs)
    return ["lint", "--gpu", "H100", "compose.yaml"]


def compose_env_file_outside(root: Path) -> list[str]:
    (root.parent / "outside.env").write_text(f"HF_TOKEN={SECRET}\nLEN=999\n")
    (root / ".git").mkdir()
    (root / "compose.yaml").write_text("services:\n  v:\n    image: vllm/vllm-openai:v0.11.0\n    env_file: "
                                       f"{root.parent / 'outside.env'}\n    command: Qwen/Qwen3-8B --max-model-len ${{LEN}}\n")
    return ["lint", "--gpu", "H100", "compose.yaml"]


def k8s_configmap_x_containers(root: Path) -> list[str]:
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n" + "".join(f"  K{i}: v\n" for i in range(40000))
    dep = ("---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n"
           "      containers:\n" + "".join(f"      - name: c{i}\n        image: vllm/vllm-openai\n        args: [m]\n"
                                         "        envFrom: [{configMapRef: {name: big}}]\n" for i in range(5000)))
    (root / "k.yaml").write_text(cm + dep)
    return ["lint", "--gpu", "H100", "k.yaml"]


def shell_vars_x_commands(root: Path) -> list[str]:
    _script(root, "".join(f"V{i}=x\n" for i in range(30000)) + "vllm serve Qwen/Qwen3-8B\n" * 20000)
    return ["lint", "--gpu", "H100", "run.sh"]


def many_servers(root: Path) -> list[str]:
    _script(root, "vllm serve Qwen/Qwen3-8B --max-model-len 4096\n" * 20000)  # 0.9 MB
    return ["lint", "--gpu", "H100", "run.sh"]


def _model_dir(root: Path, cfg: dict | str) -> None:
    (root / "m").mkdir()
    (root / "m" / "config.json").write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    _script(root, "vllm serve ./m --max-model-len 4096\n")


LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
         "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}


def config_layers(root: Path) -> list[str]:
    _model_dir(root, dict(LLAMA, num_hidden_layers=100_000_000))
    return ["lint", "--gpu", "H100", "run.sh"]


def config_infinity(root: Path) -> list[str]:
    _model_dir(root, json.dumps(LLAMA)[:-1] + ', "num_key_value_heads": Infinity, "rope_theta": NaN}')
    return ["lint", "--gpu", "H100", "run.sh"]


def config_strings(root: Path) -> list[str]:
    _model_dir(root, dict(LLAMA, num_attention_heads="32", vocab_size=[1], torch_dtype=["bf16"]))
    return ["lint", "--gpu", "H100", "run.sh"]


def config_divisors(root: Path) -> list[str]:
    cfg = dict(LLAMA, model_type="jamba", architectures=["JambaForCausalLM"], attn_layer_period=-0.5, mamba_d_state=16,
               vision_config={"patch_size": 0, "hidden_size": 1024, "image_size": 336})
    _model_dir(root, cfg)
    return ["lint", "--gpu", "H100", "run.sh"]


def config_deep(root: Path) -> list[str]:
    _model_dir(root, json.dumps(LLAMA)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return ["lint", "--gpu", "H100", "run.sh"]


def safetensors_shape(root: Path) -> list[str]:
    _model_dir(root, LLAMA)
    head = json.dumps({"w": {"dtype": "BF16", "shape": [2] * 2_000_000, "data_offsets": [0, 0]}}).encode()
    (root / "m" / "model.safetensors").write_bytes(struct.pack("<Q", len(head)) + head)
    return ["lint", "--gpu", "H100", "run.sh"]


def safetensors_fifo(root: Path) -> list[str]:
    _model_dir(root, LLAMA)
    os.mkfifo(root / "m" / "model.safetensors")
    return ["lint", "--gpu", "H100", "run.sh"]


def config_fifo(root: Path) -> list[str]:
    (root / "m").mkdir()
    os.mkfifo(root / "m" / "config.json")
    _script(root, "vllm serve ./m --max-model-len 4096\n")
    return ["lint", "--gpu", "H100", "run.sh"]


def systemd_dropin_fifo(root: Path) -> list[str]:
    (root / "vllm.service").write_text("[Service]\nExecStart=/usr/bin/vllm serve Qwen/Qwen3-8B\n")
    (root / "vllm.service.d").mkdir()
    os.mkfifo(root / "vllm.service.d" / "override.conf")
    return ["lint", "--gpu", "H100", "."]


def envfile_fifo(root: Path) -> list[str]:
    (root / "vllm.service").write_text("[Service]\nEnvironmentFile=./vllm.env\n"
                                       "ExecStart=/usr/bin/vllm serve Qwen/Qwen3-8B --max-model-len $LEN\n")
    os.mkfifo(root / "vllm.env")
    return ["lint", "--gpu", "H100", "vllm.service"]


def _gguf_case(root: Path, data: bytes, sparse: int = 0) -> list[str]:
    with open(root / "model.gguf", "wb") as fh:
        fh.write(data)
        if sparse:
            fh.truncate(sparse)
    _script(root, "llama-server -m ./model.gguf -c 4096\n")
    return ["lint", "--gpu", "H100", "run.sh"]


def gguf_block_count(root: Path) -> list[str]:
    return _gguf_case(root, gguf(llama_kvs(**{"llama.block_count": u32("llama.block_count", 10_000_000)})))


def gguf_block_count_inf(root: Path) -> list[str]:
    return _gguf_case(root, gguf(llama_kvs(**{"llama.block_count": f32("llama.block_count", float("inf"))})))


def gguf_block_count_str(root: Path) -> list[str]:
    return _gguf_case(root, gguf(llama_kvs(**{"llama.block_count": gstr("llama.block_count", "32")})))


def gguf_block_count_2_63(root: Path) -> list[str]:
    return _gguf_case(root, gguf(llama_kvs(**{"llama.block_count": u64("llama.block_count", 2 ** 63)})))


def gguf_alignment_nan(root: Path) -> list[str]:
    return _gguf_case(root, gguf(llama_kvs() + [f32("general.alignment", float("nan"))]))


def gguf_sparse_array(root: Path) -> list[str]:
    arr = gguf_kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 4, 1 << 40))  # 2^40 u32 entries
    return _gguf_case(root, gguf(llama_kvs() + [arr]), sparse=10 << 30)


def gguf_empty_tokens(root: Path) -> list[str]:
    n = 4_000_000
    arr = gguf_kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, n) + b"\0" * (8 * n))
    return _gguf_case(root, gguf(llama_kvs() + [arr]))


def gguf_fifo(root: Path) -> list[str]:
    os.mkfifo(root / "model.gguf")
    _script(root, "llama-server -m ./model.gguf -c 4096\n")
    return ["lint", "--gpu", "H100", "run.sh"]


def pyproject_deep(root: Path) -> list[str]:
    (root / "pyproject.toml").write_text("[tool.servefit]\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    _script(root, "vllm serve Qwen/Qwen3-8B --max-model-len 4096\n")
    return ["lint", "--gpu", "H100", "run.sh"]


def baseline_deep(root: Path) -> list[str]:
    (root / "base.json").write_text('{"version": 1, "findings": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _script(root, "vllm serve Qwen/Qwen3-8B --max-model-len 4096\n")
    return ["lint", "--gpu", "H100", "--baseline", "base.json", "run.sh"]


def baseline_fifo(root: Path) -> list[str]:
    os.mkfifo(root / "base.json")
    _script(root, "vllm serve Qwen/Qwen3-8B --max-model-len 4096\n")
    return ["lint", "--gpu", "H100", "--baseline", "base.json", "run.sh"]


def cpu_offload_huge(root: Path) -> list[str]:
    _script(root, "vllm serve Qwen/Qwen3-8B --cpu-offload-gb 1e308 --max-model-len 4096\n")
    return ["estimate", "--gpu", "H100", "run.sh"]


def tune_one_bad_server(root: Path) -> list[str]:
    _model_dir(root, json.dumps(LLAMA)[:-1] + ', "num_hidden_layers": Infinity}')
    (root / "good.sh").write_text("#!/bin/sh\nvllm serve Qwen/Qwen3-8B --max-model-len 4096\n")
    return ["tune", "--gpu", "H100", "--diff", "run.sh", "good.sh"]


def gz_bomb(root: Path) -> list[str]:
    line = b"INFO 11-25 12:00:00 [engine.py:123] Avg prompt throughput: 0.0 tokens/s\n"
    block = line * ((1 << 20) // len(line))
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = co.compress(block) + co.flush(zlib.Z_FULL_FLUSH)
    n = (4 << 30) // len(block)
    crc = zlib.crc32(block)  # the trailer is only checked at the end, which a bounded reader never reaches
    with open(root / "server.log.gz", "wb") as fh:
        fh.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")
        for _ in range(n):
            fh.write(chunk)
        fh.write(co.flush(zlib.Z_FINISH))
        fh.write(struct.pack("<II", crc, (n * len(block)) & 0xFFFFFFFF))
    return ["diagnose", "server.log.gz"]


def diagnose_fifo(root: Path) -> list[str]:
    (root / "server.log").write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    return ["diagnose", "/dev/stdin", "<", "server.log"]


def control_chars(root: Path) -> list[str]:
    name = "evil\x1b]0;pwned\x07\x1b[2J\n::set-output name=x::1\rX"
    _script(root, f"vllm serve '{name}' --max-model-len 4096 --api-key {SECRET}\n")
    return ["lint", "--gpu", "H100", "run.sh"]


def _no_ctrl(rc: int, out: str, err: str) -> bool:
    text = out + err
    return "\x1b" not in text and "\x07" not in text and "\r" not in text and not any(
        ln.startswith("::") for ln in text.splitlines()) and SECRET not in text and rc in (0, 1)


def _finding(code: str, *words: str) -> Callable[[int, str, str], bool]:
    def check(rc: int, out: str, err: str) -> bool:
        return rc in (0, 1) and code in out and all(w in out for w in words) and "internal error" not in err \
            and "Traceback" not in err
    return check


def _clean(rc: int, out: str, err: str) -> bool:
    return rc in (0, 1) and "internal error" not in err and "Traceback" not in err


CASES: list[Case] = [
    ("shell-doubling", shell_doubling, _finding("SF108", "KiB")),
    ("dockerfile-env-doubling", dockerfile_env, _finding("SF108", "KiB")),
    ("dockerfile-arg-doubling", dockerfile_arg, _finding("SF108", "KiB")),
    ("compose-many-refs", compose_refs, _finding("SF108", "MiB")),
    ("shell-20000-servers", many_servers, _finding("SF108", "1,000")),
    ("shell-30k-vars-x-20k-commands", shell_vars_x_commands, _finding("SF108", "250,000")),
    ("llama-swap-macro-doubling", llamaswap_macros, _finding("SF108", "KiB")),
    ("llama-swap-300-models-x-3000-macros", llamaswap_models_x_macros, lambda rc, out, err: rc == 0
     and out.count(" llamacpp ") == 300),
    ("compose-2000-services-shared-env", compose_shared_env_file, _finding("SF108", "250,000")),
    ("k8s-configmap-x-5000-containers", k8s_configmap_x_containers, _finding("SF108", "ConfigMaps")),
    ("compose-env-file-outside-repo", compose_env_file_outside, _finding("SF113", "outside.env")),
    ("config-100M-layers", config_layers, _finding("SF002", "num_hidden_layers")),
    ("config-infinity-nan", config_infinity, _finding("SF002", "num_key_value_heads")),
    ("config-strings-lists", config_strings, _finding("SF002", "num_attention_heads")),
    ("config-zero-divisors", config_divisors, _finding("SF002", "attn_layer_period")),
    ("config-deep-nesting", config_deep, _finding("SF002", "nested")),
    ("safetensors-2M-shape", safetensors_shape, _clean),
    ("safetensors-fifo", safetensors_fifo, _clean),
    ("config-json-fifo", config_fifo, _clean),
    ("systemd-dropin-fifo", systemd_dropin_fifo, _clean),
    ("envfile-fifo", envfile_fifo, _clean),
    ("gguf-block-count-1e7", gguf_block_count, _finding("SF002", "block_count")),
    ("gguf-block-count-inf", gguf_block_count_inf, _finding("SF002", "block_count")),
    ("gguf-block-count-string", gguf_block_count_str, _finding("SF002", "block_count")),
    ("gguf-block-count-2^63", gguf_block_count_2_63, _finding("SF002", "block_count")),
    ("gguf-alignment-nan", gguf_alignment_nan, _finding("SF002", "alignment")),
    ("gguf-10GiB-sparse-2^40-array", gguf_sparse_array, _finding("SF002", "array")),
    ("gguf-4M-empty-tokens", gguf_empty_tokens, _clean),
    ("gguf-fifo", gguf_fifo, _clean),
    ("pyproject-5000-deep", pyproject_deep, _clean),
    ("baseline-100k-deep", baseline_deep, lambda rc, out, err: rc == 2 and err.count("\n") == 1
     and "internal" not in err),
    ("baseline-fifo", baseline_fifo, lambda rc, out, err: rc == 2 and "FIFO" in err),
    ("cpu-offload-gb-1e308", cpu_offload_huge, lambda rc, out, err: rc in (0, 1, 2) and "internal" not in err
     and "Traceback" not in err),
    ("tune-one-bad-server", tune_one_bad_server, lambda rc, out, err: "good.sh" in out + err
     and "internal error" not in err),
    ("diagnose-gz-bomb-4GiB", gz_bomb, lambda rc, out, err: rc in (0, 1) and "100x" in err),
    ("diagnose-stdin-redirect", diagnose_fifo, lambda rc, out, err: rc in (0, 1) and "model_too_large" in out),
    ("control-chars-and-secret", control_chars, _no_ctrl),
]


def run_case(name: str, build: Callable[[Path], list[str]], root: Path, timeout: float) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    argv = build(root)
    stdin = None
    if "<" in argv:
        i = argv.index("<")
        stdin = open(root / argv[i + 1], "rb")  # noqa: SIM115
        argv = argv[:i]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), NO_COLOR="1")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "servefit", *argv], cwd=root, env=env, stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=cap)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        timed_out = True
    wall = time.monotonic() - t0
    # peak RSS of this child alone: wait4 via the returncode path is gone, so use the max over
    # children (each case runs alone, one after the other, and RUSAGE_CHILDREN only grows)
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if stdin is not None:
        stdin.close()
    return {"case": name, "wall_s": wall, "rss_mb": rss_mb, "rc": proc.returncode, "timed_out": timed_out,
            "out": out.decode("utf-8", "replace"), "err": err.decode("utf-8", "replace")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="run the cases whose name contains this")
    ap.add_argument("--keep", help="build the cases in this directory and keep them")
    ap.add_argument("--limit-s", type=float, default=5.0)
    ap.add_argument("--limit-mb", type=float, default=300.0)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("-v", "--verbose", action="store_true", help="print each case's output")
    args = ap.parse_args()
    base = Path(args.keep or tempfile.mkdtemp(prefix="servefit-hostile-"))
    bad = 0
    print(f"{'case':32} {'wall s':>7} {'peak MB':>8} {'rc':>3}  ok")
    for name, _build, check in CASES:
        if args.only and args.only not in name:
            continue
        # one process per case, so RUSAGE_CHILDREN is that case's peak: run each in a fresh child
        res = _isolated(name, base / name, args.timeout)
        ok = (not res["timed_out"] and res["wall_s"] < args.limit_s and res["rss_mb"] < args.limit_mb
              and check(res["rc"], res["out"], res["err"]))
        bad += not ok
        print(f"{name:32} {res['wall_s']:7.2f} {res['rss_mb']:8.1f} {res['rc']:>3}  {'ok' if ok else 'FAIL'}")
        if args.verbose or not ok:
            for ln in (res["out"] + res["err"]).splitlines()[:12]:
                print("    | " + ascii(ln)[1:-1][:160])
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if bad else 0


def _isolated(name: str, root: Path, timeout: float) -> dict:
    """Run one case in a fresh Python child so that its RUSAGE_CHILDREN peak is its own."""
    code = (f"import sys, json; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); import hostile as h; "
            f"from pathlib import Path; b = dict((n, f) for n, f, _ in h.CASES)[{name!r}]; "
            f"print(json.dumps(h.run_case({name!r}, b, Path({str(root)!r}), {timeout})))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"case": name, "wall_s": 0.0, "rss_mb": 0.0, "rc": -1, "timed_out": False, "out": p.stdout,
                "err": p.stderr}


if __name__ == "__main__":
    sys.exit(main())
