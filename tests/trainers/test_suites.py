"""The optional suites (`pip install "rltui[navix]"`...): each adapter passes check-env and
trains two updates; a suite that is not installed is skipped, saying which extra brings
it. Ids, listing and the not-installed message hold without any suite."""

from __future__ import annotations

import importlib.util

import pytest

from rltui.check_env import run_checks
from trainers.suites import SUITES

SUITE_ENVS = {"navix": "navix:Navix-Empty-5x5-v0", "craftax": "craftax:Craftax-Classic-Symbolic-v1"}


def needs(suite: str):
    missing = importlib.util.find_spec(SUITES[suite].package) is None
    return pytest.mark.skipif(missing, reason=f'{suite} is not installed (pip install "rltui[{suite}]")')


@pytest.mark.parametrize("suite", [pytest.param(s, marks=needs(s)) for s in SUITE_ENVS])
def test_each_installed_suites_adapter_passes_check_env(suite):
    checks = run_checks(SUITE_ENVS[suite])
    failed = [c for c in checks if c.status == "fail"]
    assert not failed, failed
    assert any(c.name == "one policy update runs" and c.status == "pass" for c in checks)


@pytest.mark.parametrize("suite", [pytest.param(s, marks=needs(s)) for s in SUITE_ENVS])
def test_each_installed_suite_trains_two_updates(suite, tmp_path):
    from rltui.api import train

    result = train(env=SUITE_ENVS[suite], num_envs=4, num_steps=16, total_timesteps=128, run_dir=str(tmp_path / "run"))
    assert result.updates == 2


def test_suite_ids_are_accepted_by_the_env_key():
    from rltui.config import build_config

    for env_id in SUITE_ENVS.values():
        assert build_config({"env": env_id}, use_preset=False).env == env_id


def test_a_suite_that_is_not_installed_names_its_extra(monkeypatch):
    from trainers import suites
    from trainers.env_import import EnvImportError

    monkeypatch.setattr(suites, "installed", lambda suite: False)
    with pytest.raises(EnvImportError, match=r'^env: navix is not installed; pip install "rltui\[navix\]"$'):
        suites.load("navix:Navix-Empty-5x5-v0")


def test_rltui_envs_lists_each_suite_or_its_extra(capsys, monkeypatch):
    from rltui.cli import main
    from trainers import suites

    monkeypatch.setattr(suites, "installed", lambda suite: False)
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    for name in SUITES:
        assert f'{name}: not installed; pip install "rltui[{name}]"' in out
