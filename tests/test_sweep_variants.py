"""Every explain / sweep variant sets only options the engine has, to values its parser accepts: a
variant the engine would refuse (SGLang has no `fp8` KV dtype) shows the configured numbers again."""

import pathlib

import pytest
import yaml

DATA = pathlib.Path(__file__).resolve().parent.parent / "src" / "servefit" / "data" / "engines"
ENGINES = ("vllm", "sglang", "tgi", "llamacpp", "ollama")


def _variants() -> list[tuple[str, str, str, object]]:
    out = []
    for engine in ENGINES:
        table = yaml.safe_load((DATA / f"{engine}.yaml").read_text())
        for v in (table.get("sweep") or {}).get("variants") or ():
            for name, value in v["settings"].items():
                out.append((engine, v["name"], name, value))
    return out


@pytest.mark.parametrize("engine,variant,name,value", _variants())
def test_variant_setting_is_accepted_by_the_engine(engine: str, variant: str, name: str, value: object) -> None:
    options = {o["name"]: o for o in yaml.safe_load((DATA / f"{engine}.yaml").read_text())["options"]}
    assert name in options, f"{engine} variant {variant!r} sets {name}, which is not an option"
    choices = options[name].get("choices")
    if choices:
        assert value in choices, f"{engine} variant {variant!r}: {name}={value} is not one of {choices}"


def test_sglang_kv_fp8_column_holds_twice_the_users() -> None:
    from servefit import sweep
    from servefit.pipeline import Target, evaluate, site_from_argv

    argv = "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --context-length 32768".split()
    new = evaluate(site_from_argv(argv), Target(gpu="H100", engine_version="0.5.6"))
    assert sweep.variants(new) == {"as configured": {}, "kv fp8": {"kv_cache_dtype": "fp8_e4m3"}}
    users = sweep.max_users(new, sweep.variants(new), upto=8192)
    base, fp8 = dict(users["as configured"]), dict(users["kv fp8"])
    assert base[8192] == 44  # 366,511 tokens of 147,456 bytes on one H100 (explain's own table)
    assert fp8[8192] >= 2 * base[8192] - 1  # one byte per element instead of two
    old = evaluate(site_from_argv(argv), Target(gpu="H100", engine_version="0.3.6"))
    assert list(sweep.variants(old)) == ["as configured"]
