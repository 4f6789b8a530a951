"""The library's gpt-oss blobs are Ollama's own conversion (convert/convert_gptoss.go): the experts as MXFP4 blocks,
every other tensor by convert/reader.go tensorBase.Kind(): F32 when 1-D or ffn_gate_inp, F16 otherwise, the expert
biases included (llama.cpp's convert_hf_to_gguf.py keeps those F32; llama-quantize's MXFP4_MOE makes the rest Q8_0).
ollama/ollama#11711 (0.11.2): memory.weights.total 11.7 GiB, repeating 10.7, nonrepeating 1.1."""

from __future__ import annotations

from servefit.engines.llamacpp import model as M
from servefit.engines.ollama.tags import lookup as tag
from servefit.models.catalog import lookup

GIB = 2**30


def test_library_tag_is_ollamas_conversion():
    assert tag("gpt-oss:20b").quant == tag("gpt-oss:120b").quant == "OLLAMA_MXFP4"


def test_tensor_types_of_ollamas_gpt_oss():
    lm = M.load({"model": None, "gguf_quant": "OLLAMA_MXFP4"}, lookup("openai/gpt-oss-20b"), [])
    types = {t.name: t.type for t in lm.tensors}
    assert types["blk.0.ffn_gate_exps.weight"] == "MXFP4"
    assert types["blk.0.ffn_gate_exps.bias"] == types["blk.0.ffn_down_exps.bias"] == "F16"
    assert types["blk.0.attn_q.weight"] == types["token_embd.weight"] == types["output.weight"] == "F16"
    assert types["blk.0.ffn_gate_inp.weight"] == types["blk.0.attn_q.bias"] == "F32"
    f16 = M.load({"model": None, "gguf_quant": "F16"}, lookup("openai/gpt-oss-20b"), [])
    # 24 layers x 32 experts x (2880 gate + 2880 up + 2880 down) bias values at 2 bytes instead of 4
    assert f16.weight_bytes - lm.weight_bytes == 24 * 32 * (2880 + 2880 + 2880) * 2


def test_classic_estimate_weights_as_logged():
    from servefit.core import LaunchSite, ModelInputs, Token
    from servefit.engines.ollama import ENGINE
    from servefit.hardware.spec import GpuSpec

    site = LaunchSite(file="compose.yaml", line=1, argv=[Token(w) for w in "ollama run gpt-oss:20b".split()],
                      env={}, name="ollama", inputs=ModelInputs(request_options={"num_ctx": "8192"}))
    gpu = GpuSpec(key="rtx-4060-ti-16gb", name="NVIDIA GeForce RTX 4060 Ti", vendor="nvidia",
                  memory_bytes=16380 * 2**20, compute_capability=89)
    x = ENGINE.plan(ENGINE.parse(site, "0.11.2"), lookup("openai/gpt-oss-20b"), gpu, 1).detail.as_dict()
    # llm/memory.go EstimateGPULayers: nonrepeating = the output layer, F16 201088 x 2880 plus the F32 output_norm
    assert x["memory_weights_nonrepeating_gib"] == round((201088 * 2880 * 2 + 2880 * 4) / GIB, 3)
    assert f"{x['memory_weights_total_gib']:.1f}" == "11.7" and f"{x['memory_weights_repeating_gib']:.1f}" == "10.7"
