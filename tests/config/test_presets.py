"""Tuned per-env presets: valid, and in their place in the precedence order."""

from __future__ import annotations

import dataclasses

import pytest

from rltui.config import presets
from rltui.config.build import RunConfig, build_config, resume_config
from trainers import suites
from trainers.algorithms import ALGORITHMS
from trainers.envs import SUPPORTED_ENVS


def tuned_envs():
    """(algo, env, preset) of every preset that sets something."""
    return [(algo, env, table) for algo in ALGORITHMS for env, table in presets.presets(algo).items() if table]


def test_every_preset_is_a_valid_config_for_a_supported_env():
    for algo in ALGORITHMS:
        for env, table in presets.presets(algo).items():
            assert env in SUPPORTED_ENVS or suites.suite_of(env) is not None, (algo, env)
            config = build_config({}, {"env": env, "algo": algo})
            for key, value in table.items():
                expected = tuple(value) if isinstance(value, list) else value
                assert getattr(config, key) == pytest.approx(expected), (algo, env, key)


def test_every_result_names_its_budget_and_seeds():
    for algo in ALGORITHMS:
        for env in presets.presets(algo):
            result = presets.result(algo, env)
            if result is not None:
                assert result.seeds >= 3 and result.steps > 0 and result.wall_seconds > 0
                assert result.min <= result.mean
                # no policy beats the optimum on the same evaluation episodes
                assert result.optimum is None or result.mean <= result.optimum


def test_precedence_defaults_preset_file_set():
    algo, env, table = tuned_envs()[0]
    key = next(k for k in table if k not in ("env", "algo"))
    preset_value = build_config({}, {"env": env, "algo": algo})
    assert getattr(preset_value, key) == pytest.approx(table[key])
    default = getattr(build_config({}, {"env": env, "algo": algo}, use_preset=False), key)
    assert default == getattr(RunConfig(), key) or algo != "ppo"
    file_value = _another(default, table[key])
    from_file = build_config({key: file_value}, {"env": env, "algo": algo})
    assert getattr(from_file, key) == pytest.approx(file_value)
    set_value = _another(file_value, table[key])
    from_set = build_config({key: file_value}, {"env": env, "algo": algo, key: set_value})
    assert getattr(from_set, key) == pytest.approx(set_value)


def test_env_from_the_config_file_picks_its_preset():
    algo, env, table = tuned_envs()[0]
    key = next(iter(table))
    assert getattr(build_config({"env": env, "algo": algo}), key) == pytest.approx(table[key])


def test_resuming_takes_the_checkpoint_config_not_a_newer_preset():
    algo, env, table = tuned_envs()[0]
    key = next(iter(table))
    saved = build_config({}, {"env": env, "algo": algo}, use_preset=False).to_toml_dict()
    resumed = resume_config(saved, {}, {})
    assert getattr(resumed, key) == saved[key] if not isinstance(saved[key], list) else tuple(saved[key])


def _another(*avoid):
    """A valid value different from those in `avoid` (numbers only)."""
    for candidate in (2, 3, 5, 7, 11):
        value = type(avoid[0])(candidate) if not isinstance(avoid[0], bool) else not avoid[0]
        if all(value != a for a in avoid):
            return value
    raise AssertionError("no candidate")


def test_envs_listing_says_whether_each_preset_reaches_its_reference():
    from rltui.commands.envs import _preset_summary

    reached = presets.PresetResult(reference=500.0, mean=500.0, min=500.0, seeds=3, steps=499_712, wall_seconds=48)
    on_average = presets.PresetResult(reference=-80.0, mean=-75.5, min=-80.4, seeds=3, steps=999_424, wall_seconds=98)
    short = presets.PresetResult(reference=-130.0, mean=-160.6, min=-162.2, seeds=3, steps=999_936, wall_seconds=38)
    assert _preset_summary(True, reached).endswith("in 0.5M steps (every seed reaches the reference 500)")
    assert "(the mean reaches the reference -80)" in _preset_summary(True, on_average)
    assert "(short of the reference -130)" in _preset_summary(True, short)
    beyond_optimum = dataclasses.replace(short, optimum=-147.1)
    assert _preset_summary(True, beyond_optimum).endswith(
        "(short of the reference -130, which no policy reaches on these episodes: the best possible is -147.1)")
    assert "(short of the reference -130)" in _preset_summary(True, dataclasses.replace(short, optimum=-120.0))
    assert _preset_summary(True, None) == "preset (not measured here)"
    assert _preset_summary(False, None) == "-"


def _launch_notice(monkeypatch, *argv):
    """What `rltui launch ARGV` says on stderr before training, and the preset record it keeps."""
    import rltui.commands.launch
    from rltui.cli import main

    seen = {}

    def fake_launch(args, spec=None):
        plan = rltui.commands.launch._config_and_resume(args)
        rltui.commands.launch.say(plan.notices)  # as launch says them, once its checks have passed
        seen["config"], seen["preset"] = plan.config, plan.preset
        return 0

    monkeypatch.setattr(rltui.commands.launch, "launch", fake_launch)
    assert main(["launch", "--no-ui", *argv]) == 0
    return seen["preset"]


def test_launch_says_in_one_line_what_the_preset_and_family_set(monkeypatch, capsys):
    record = _launch_notice(monkeypatch, "--set", "env=Breakout-MinAtar")
    assert capsys.readouterr().err == (
        "rltui: Breakout-MinAtar preset (on the minatar family): num_envs 64, num_minibatches 8, lr 0.005, "
        "activation relu, total_timesteps 10000000, ent_coef 0.03 (--no-preset to train without)\n")
    assert record["preset"] == "Breakout-MinAtar" and record["family"] == "minatar"
    # a key given on the command line or swept is not the preset's, and the family alone is named as such
    _launch_notice(monkeypatch, "--set", "env=SpaceInvaders-MinAtar", "--set", "activation=tanh", "--set", "num_envs=8",
                   "--sweep", "lr=[1e-3,3e-3]")
    assert capsys.readouterr().err == (
        "rltui: minatar family settings for SpaceInvaders-MinAtar: num_minibatches 8, total_timesteps 10000000 "
        "(--no-preset to train without)\n")
    # the defaults (CartPole), and --no-preset: nothing to say, nothing recorded
    assert _launch_notice(monkeypatch) is None
    assert _launch_notice(monkeypatch, "--set", "env=Breakout-MinAtar", "--no-preset") is None
    assert capsys.readouterr().err == ""


def test_info_names_the_preset_the_run_recorded(tmp_path):
    from rltui.commands.info import render_info
    from rltui.session.checkpoints import checkpoint_metadata
    from trainers.checkpoint import _parse_metadata

    record = presets.applied("ppo", "Acrobot-v1", {"env": "Acrobot-v1"})
    metadata = checkpoint_metadata(run={"config": {"env": "Acrobot-v1"}, "preset": record}, backend={}, hparams={},
                                   update=3, env_steps=3, elapsed=1.0, edits=[], reason="final")
    metadata = _parse_metadata(__import__("json").dumps(metadata))  # as a checkpoint file holds it
    info = {"checkpoint": "c", "checksum": "ok", "parameters_finite": True, "elapsed_seconds": 1.0,
            "hparams": {}, "config": {}, "edits": [], "versions": {}, "population": None,
            **{k: metadata.get(k) for k in ("trainer", "update", "env_steps", "reason", "created", "device_kind",
                                             "device_count", "preset")}}
    assert "preset       Acrobot-v1 preset: num_envs 16, lr 0.001, ent_coef 0, total_timesteps 1000000" in (
        render_info(info).splitlines())
    assert "preset" not in checkpoint_metadata(run={"config": {}}, backend={}, hparams={}, update=0, env_steps=0,
                                               elapsed=0.0, edits=[], reason="final")
