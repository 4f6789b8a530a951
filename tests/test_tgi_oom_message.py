"""What TGI says last when the weights do not fit a shard."""

from __future__ import annotations

from servefit.sources import scan_file


def test_weights_over_the_shard_end_with_the_shards_out_of_memory_error() -> None:
    """The engine's last word on a 70B on one L4 is the shard's OOM, not the launcher's
    `Default max_batch_prefill_tokens` line (tune shows it as why nothing fits)."""
    from servefit.engines.tgi import ENGINE
    from servefit.hardware.catalog import lookup
    from servefit.models import resolve_model
    from servefit.tune.space import _why_not

    site = scan_file("job.sh", "#!/bin/bash\n#SBATCH --gres=gpu:l4:1\n"
                     "text-generation-launcher --model-id meta-llama/Llama-2-70b-hf\n").sites[0]
    l4 = lookup("l4")
    assert l4 is not None
    plan = ENGINE.plan(ENGINE.parse(site), resolve_model("meta-llama/Llama-2-70b-hf"), l4, 1)
    assert plan.outcome == "oom_at_load"
    assert plan.messages[-1].startswith("torch.cuda.OutOfMemoryError: CUDA out of memory while loading the weights (")
    assert _why_not(plan, plan.outcome) == plan.messages[-1]
