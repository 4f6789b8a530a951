"""A lint run finds each folder's model lock and mapping once (models/lock.one_context_per_folder)
and every server still gets its own folder's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from servefit.models import lock

SCRIPT = "# servefit: gpu=L4\nvllm serve /models/m --max-model-len 4096\n"


def _repo(tmp_path):
    root = tmp_path / "r"
    (root / ".git").mkdir(parents=True)
    for d, ref in (("a", "Qwen/Qwen3-8B"), ("b", "meta-llama/Llama-3.1-8B-Instruct")):
        (root / d).mkdir()
        (root / d / "servefit.toml").write_text(f'[models]\n"/models/m" = "{ref}"\n')
        for i in (1, 2):
            (root / d / f"s{i}.sh").write_text(SCRIPT)
    (root / "c").mkdir()
    (root / "c" / "own.sh").write_text(SCRIPT)
    return root


def test_each_server_gets_its_folders_mapping(tmp_path):
    root = _repo(tmp_path)
    out = subprocess.run([sys.executable, "-m", "servefit", "estimate", "--format", "json", str(root)],
                         capture_output=True, text=True)
    got = {os.path.relpath(x["server"]["file"], root): x["model"]["resolved"] for x in json.loads(out.stdout)}
    assert got == {"a/s1.sh": "Qwen/Qwen3-8B", "a/s2.sh": "Qwen/Qwen3-8B",
                   "b/s1.sh": "meta-llama/Llama-3.1-8B-Instruct", "b/s2.sh": "meta-llama/Llama-3.1-8B-Instruct"}
    assert "c/own.sh:2 (script:2) not estimated: unknown model '/models/m'" in out.stderr


def test_one_context_per_folder_within_a_run(tmp_path):
    root = _repo(tmp_path)
    os.symlink(root / "a" / "s1.sh", root / "c" / "link.sh")
    a1, a2, b1, c, link = (str(root / p) for p in ("a/s1.sh", "a/s2.sh", "b/s1.sh", "c/own.sh", "c/link.sh"))
    assert lock.context_for(a1) is not lock.context_for(a2)  # outside a run: found each time
    with lock.one_context_per_folder():
        first = lock.context_for(a1)
        assert lock.context_for(a2) is first and first.mapping == {"/models/m": "Qwen/Qwen3-8B"}
        assert lock.context_for(b1).mapping == {"/models/m": "meta-llama/Llama-3.1-8B-Instruct"}
        assert lock.context_for(c).mapping == {}
        # the configuration is found from where a link points (as find_config resolves it)
        assert lock.context_for(link).mapping == {"/models/m": "Qwen/Qwen3-8B"}
        assert lock.context_for(a1, online=True) is not first
    assert lock._shared is None


def test_find_config_searches_each_folder_once_within_a_run(tmp_path):
    from servefit import config

    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # no [tool.servefit]: the search goes on
    (root / "a" / "deep").mkdir(parents=True)
    (root / "a" / "servefit.toml").write_text('gpu = "L4"\n')
    (root / "b").mkdir()
    (tmp_path / "servefit.toml").write_text('gpu = "H100"\n')  # above the repository root: never read
    starts = [root / "a" / "deep", root / "a", root / "b", root]
    outside = [config.find_config(str(s)) for s in starts]
    assert outside == [(str(root / "a" / "servefit.toml"), {"gpu": "L4"})] * 2 + [None, None]
    with config.searching_each_folder_once():
        assert [config.find_config(str(s)) for s in starts] == outside
        (root / "b" / "servefit.toml").write_text('gpu = "A100"\n')  # written during the run: not seen
        assert config.find_config(str(root / "b")) is None
        with config.searching_each_folder_once():  # nested: the same run
            assert config.find_config(str(root / "b")) is None
    assert config.find_config(str(root / "b")) == (str(root / "b" / "servefit.toml"), {"gpu": "A100"})
    assert config._folders is None
