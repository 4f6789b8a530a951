"""A Slurm batch script's `#SBATCH` GPU request is the hardware of the servers it starts."""

from __future__ import annotations

import pytest

from servefit.core import GpuHint
from servefit.sources import scan_file
from servefit.sources.slurm import gpu_request
from servefit.sources.text import LineIndex

HEADER = "#!/bin/bash\n#SBATCH --job-name=serve\n#SBATCH --nodes=1\n{opts}#SBATCH --time=1:00:00\n\n"
SERVE = "text-generation-launcher --model-id meta-llama/Llama-2-7b-hf --port 8080\n"


def request(opts: str) -> GpuHint | None:
    text = HEADER.format(opts=opts) + SERVE
    return gpu_request(text, LineIndex(text, "job.sh").span)


def test_gres_with_a_type_names_the_gpu_and_its_count_with_the_span() -> None:
    text = "#!/bin/bash\n#SBATCH --partition=long\n#SBATCH --gres=gpu:A6000:4\n#SBATCH --mem=100GB\n\n" + SERVE
    site = scan_file("job.sh", text).sites[0]
    assert (site.gpu.name, site.gpu.count, site.gpu.source) == ("A6000", 4, "Slurm #SBATCH --gres=gpu:A6000:4")
    assert site.gpu.scheduler_visible is True
    sp = site.gpu.span
    assert (sp.line, sp.col, sp.end_col) == (3, 16, 27)
    assert text[sp.start:sp.end] == "gpu:A6000:4"


@pytest.mark.parametrize("opts, want", [
    ("#SBATCH --gres=gpu:2\n", (None, 2)),
    ("#SBATCH --gres=gpu:a100\n", ("a100", 1)),
    ("#SBATCH --gres=gpu:h100:8(S:0-1),shard:2\n", ("h100", 8)),
    ("#SBATCH --gres=shard:2,gpu:l40s:2\n", ("l40s", 2)),
    ("#SBATCH --gpus=h100:8 --nodes=2\n", ("h100", 4)),  # --gpus is the job's total
    ("#SBATCH -G 2\n", (None, 2)),
    ("#SBATCH --gpus-per-node=a100:4\n#SBATCH --gpus=8\n", ("a100", 4)),
    ("#SBATCH --mem=10G\n", None),
    ("#SBATCH --gres=nvme:1\n", None),
])
def test_gpu_request_forms(opts: str, want: tuple[str | None, int] | None) -> None:
    got = request(opts)
    assert (None if got is None else (got.name, got.count)) == want


def test_sbatch_lines_after_the_first_command_are_not_read() -> None:
    text = "#!/bin/bash\n#SBATCH --job-name=x\necho start\n#SBATCH --gres=gpu:a100:4\n" + SERVE
    assert gpu_request(text, LineIndex(text, "job.sh").span) is None
    assert scan_file("job.sh", text).sites[0].gpu is None


def test_cuda_visible_devices_in_the_script_narrows_the_allocation() -> None:
    text = "#!/bin/bash\n#SBATCH --gres=gpu:a100:4\nexport CUDA_VISIBLE_DEVICES=0,1\n" + SERVE
    gpu = scan_file("job.sh", text).sites[0].gpu
    assert (gpu.name, gpu.count) == ("a100", 2)
    assert gpu.source == "Slurm #SBATCH --gres=gpu:a100:4; count from CUDA_VISIBLE_DEVICES"


def test_tgi_shards_over_the_gpus_slurm_gives_the_job() -> None:
    """find_num_shards: no --num-shard, so the launcher counts CUDA_VISIBLE_DEVICES, which Slurm sets."""
    from servefit.engines.tgi import ENGINE
    from tests.test_tgi_engine import H100, LLAMA8B

    text = "#!/bin/bash\n#SBATCH --gres=gpu:h100:2\n" + SERVE
    site = scan_file("job.sh", text).sites[0]
    assert ENGINE.plan(ENGINE.parse(site), LLAMA8B, H100, 2).parallel["tensor"] == 2
    bare = scan_file("run.sh", SERVE).sites[0]  # no scheduler: one shard
    assert ENGINE.plan(ENGINE.parse(bare), LLAMA8B, H100, 2).parallel["tensor"] == 1


