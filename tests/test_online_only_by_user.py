"""Only the user turns the network on (issue 18 item 6): a repository's own servefit.toml or
pyproject.toml may ask for `online = true` (SF130 says so), but a plain `servefit lint .` stays
offline; --online, --config online=true, SERVEFIT_ONLINE=1 and the user's own config do turn it on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.config import user_online

SCRIPT = "# servefit: gpu=L4\nvllm serve acme/private-model-7B-xyz --max-model-len 4096\n"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "userconf"))
    monkeypatch.delenv("SERVEFIT_ONLINE", raising=False)
    r = tmp_path / "repo"
    r.mkdir()
    (r / ".git").mkdir()
    (r / "servefit.toml").write_text('gpu = "L4"\nonline = true\n')
    (r / "serve.sh").write_text(SCRIPT)
    return r


def _no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    import servefit.models.hub as hub

    def refuse(*a, **k):  # the one network path: never reached unless the user asked
        calls.append("hub")
        return None

    for name in dir(hub):
        if name.startswith(("fetch", "resolve", "model_info", "download")) and callable(getattr(hub, name)):
            monkeypatch.setattr(hub, name, refuse)
    return calls


def test_repo_config_asks_but_does_not_turn_the_network_on(repo, capsys, monkeypatch):
    calls = _no_network(monkeypatch)
    rc = main(["lint", str(repo), "--format", "json"])
    findings = json.loads(capsys.readouterr().out)
    codes = {f["code"]: f for f in findings}
    assert "SF002" in codes and calls == []  # the model stayed unknown: nothing was fetched
    sf130 = codes["SF130"]
    assert sf130["location"]["file"].endswith("servefit.toml")
    assert (sf130["location"]["line"], sf130["location"]["column"]) == (2, 1)
    assert "1 server(s) name a model servefit could not size offline" in sf130["message"]
    assert rc == 0  # SF002 is a warning and SF130 information: nothing at the default fail-on


@pytest.mark.parametrize("how", ["flag", "override", "env", "userconfig"])
def test_the_user_turns_it_on(repo, monkeypatch, how):
    class Args:
        online = how == "flag"
        config = ["online=true"] if how == "override" else []

    if how == "env":
        monkeypatch.setenv("SERVEFIT_ONLINE", "1")
    if how == "userconfig":
        conf = Path(str(repo.parent / "userconf" / "servefit"))
        conf.mkdir(parents=True)
        (conf / "config.toml").write_text("online = true\n")
    assert user_online(Args()) is True


def test_off_by_default_and_a_broken_user_config_is_off(repo, monkeypatch):
    class Args:
        online = False
        config = ["online=false", "gpu=L4"]

    assert user_online(Args()) is False
    conf = repo.parent / "userconf" / "servefit"
    conf.mkdir(parents=True)
    (conf / "config.toml").write_text("online = [[[\n")
    assert user_online(Args()) is False
    (conf / "config.toml").write_text('online = "yes"\n')  # only the boolean true counts
    assert user_online(Args()) is False


def test_with_online_no_sf130(repo, capsys, monkeypatch):
    _no_network(monkeypatch)
    main(["lint", str(repo), "--format", "json", "--online"])
    assert "SF130" not in {f["code"] for f in json.loads(capsys.readouterr().out)}
