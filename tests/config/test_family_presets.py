"""Family defaults: every gymnax env without a preset of its own starts from its family's
settings (MinAtar, continuous control, bsuite, misc), below its own preset and above the
built-in defaults."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from rltui.config import presets
from rltui.config.build import RunConfig, build_config
from rltui.config.toml_text import dump_toml, parse_overrides
from rltui.runfiles.rundir import write_config
from trainers.envs import BSUITE, MASKED_ENVS, MINATAR, MISC, SUPPORTED_ENVS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def config_for(env: str, *items: str, use_preset: bool = True) -> RunConfig:
    return build_config({}, parse_overrides([f"env={env}", *items]), use_preset=use_preset)


def as_config_value(value):
    return tuple(value) if isinstance(value, list) else value


@pytest.fixture
def toml_presets(monkeypatch):
    """Replace the presets (every algorithm's presets.toml, as tables by algorithm) with the given
    TOML text for one test."""

    def install(text: str) -> None:
        monkeypatch.setattr(presets, "_load", lambda: tomllib.loads(text))

    return install


def test_a_minatar_game_trains_on_the_minatar_settings(tmp_path):
    config = config_for("SpaceInvaders-MinAtar")  # its preset is the family as it is
    assert (config.num_envs, config.num_steps, config.num_minibatches) == (64, 128, 8)
    assert config.lr == pytest.approx(5e-3) and config.anneal_lr is True
    assert config.activation == "relu" and config.hidden_sizes == (64, 64)
    assert config.total_timesteps == 10_000_000
    # the run's config.toml says so
    write_config(tmp_path, config)
    written = tomllib.loads((tmp_path / "config.toml").read_text(encoding="utf-8"))
    assert written["num_envs"] == 64 and written["total_timesteps"] == 10_000_000 and written["activation"] == "relu"


@pytest.mark.parametrize("env", [env for env in SUPPORTED_ENVS if not presets.has_preset("ppo", env)])
def test_every_env_without_a_preset_gets_each_of_its_familys_values(env):
    config = config_for(env)
    family = presets.family("ppo", env)
    for key, value in family.items():
        assert getattr(config, key) == pytest.approx(as_config_value(value)), (env, key)
    assert family, f"{env} would train on CartPole's settings"


def test_continuous_control_envs_share_the_continuous_settings():
    for env in ("Reacher-misc", "Swimmer-misc", "PointRobot-misc"):
        config = config_for(env)
        assert presets.family_of(env) == "continuous"
        assert config.log_std == "param" and config.activation == "tanh", env
        assert config.normalize_obs is True and config.num_envs == 32, env


def test_an_env_preset_beats_its_family(toml_presets):
    toml_presets(
        '[ppo.family.minatar]\nnum_envs = 64\nlr = 5e-3\n'
        '[ppo."Asterix-MinAtar"]\nnum_envs = 8\n'
    )
    config = config_for("Asterix-MinAtar")
    assert config.num_envs == 8  # the preset's
    assert config.lr == pytest.approx(5e-3)  # the family's, which the preset leaves alone
    assert config_for("Freeway-MinAtar").num_envs == 64  # a game without a preset: the family's


def test_the_shipped_presets_sit_on_their_family():
    breakout = config_for("Breakout-MinAtar")
    assert breakout.ent_coef == pytest.approx(0.03)  # the preset's own
    assert breakout.num_envs == 64 and breakout.lr == pytest.approx(5e-3)  # from the family
    pendulum = config_for("Pendulum-v1")
    assert pendulum.num_minibatches == 16 and pendulum.normalize_rewards is True  # the preset's own
    assert pendulum.num_envs == 32 and pendulum.log_std == "state"  # from the family


# The settings each preset's result was measured with: moving keys between an env preset and
# its family must leave them as they are.
MEASURED_WITH = {
    "Pendulum-v1": dict(num_envs=32, num_steps=64, num_minibatches=16, lr=1e-3, anneal_lr=True, max_grad_norm=1.0,
                        activation="relu", log_std="state", normalize_obs=True, normalize_rewards=True,
                        total_timesteps=1_000_000),
    "MountainCarContinuous-v0": dict(num_envs=32, num_steps=64, num_minibatches=4, lr=5e-4, anneal_lr=False,
                                     max_grad_norm=1.0, activation="relu", log_std="state", normalize_obs=True,
                                     normalize_rewards=False, noise_hold=32, total_timesteps=1_000_000),
    "Breakout-MinAtar": dict(num_envs=64, num_steps=128, num_minibatches=8, lr=5e-3, anneal_lr=True, gamma=0.99,
                             ent_coef=0.03, activation="relu", hidden_sizes=(64, 64), total_timesteps=10_000_000),
    "MountainCar-v0": dict(num_envs=16, num_steps=32, num_minibatches=4, update_epochs=64, lr=5e-3, anneal_lr=True,
                           ent_coef=0.003, max_grad_norm=1.0, normalize_obs=True, noise_hold=16, gamma=0.99,
                           hidden_sizes=(64, 64), total_timesteps=500_000),
    "Asterix-MinAtar": dict(num_envs=64, num_steps=128, num_minibatches=8, lr=5e-3, anneal_lr=True, gamma=0.99,
                            ent_coef=0.01, activation="relu", hidden_sizes=(64, 64), total_timesteps=30_000_000),
    "SpaceInvaders-MinAtar": dict(num_envs=64, num_steps=128, num_minibatches=8, lr=5e-3, anneal_lr=True, gamma=0.99,
                                  ent_coef=0.01, activation="relu", hidden_sizes=(64, 64),
                                  total_timesteps=10_000_000),
    "Reacher-misc": dict(num_envs=32, num_steps=64, max_grad_norm=1.0, activation="tanh", log_std="param",
                         normalize_obs=True, total_timesteps=10_000_000),
    "Swimmer-misc": dict(num_envs=32, num_steps=64, max_grad_norm=1.0, activation="tanh", log_std="param",
                         normalize_obs=True, total_timesteps=3_000_000),
    "Freeway-MinAtar": dict(num_envs=64, num_steps=128, num_minibatches=8, lr=5e-3, anneal_lr=True, gamma=0.99,
                            ent_coef=0.01, activation="relu", hidden_sizes=(64, 64), total_timesteps=15_000_000),
    "CartPole-v1-pomdp": dict(network="gru", num_envs=8, num_steps=64, num_minibatches=4, lr=2e-3, anneal_lr=True,
                              activation="tanh", hidden_sizes=(64, 64), total_timesteps=500_000),
    "MemoryChain-bsuite": dict(network="gru", num_envs=16, num_steps=32, num_minibatches=4, lr=5e-4, anneal_lr=False,
                               max_grad_norm=1.0, bootstrap_truncated=False, total_timesteps=500_000),
    "DiscountingChain-bsuite": dict(num_envs=16, num_steps=32, num_minibatches=4, lr=5e-4, anneal_lr=False,
                                    max_grad_norm=1.0, bootstrap_truncated=False, total_timesteps=500_000),
}


@pytest.mark.parametrize("env", sorted(MEASURED_WITH))
def test_measured_presets_keep_the_settings_they_were_measured_with(env):
    config = config_for(env)
    for key, value in MEASURED_WITH[env].items():
        assert getattr(config, key) == pytest.approx(value), (env, key)


def test_no_preset_skips_the_family_and_the_preset():
    defaults = RunConfig()
    for env in ("Asterix-MinAtar", "Breakout-MinAtar", "Reacher-misc", "Catch-bsuite"):
        config = config_for(env, use_preset=False)
        assert (config.num_envs, config.lr, config.total_timesteps, config.ent_coef) == (
            defaults.num_envs, defaults.lr, defaults.total_timesteps, defaults.ent_coef), env


def test_config_file_and_set_beat_the_family():
    config = build_config({"env": "SpaceInvaders-MinAtar", "num_envs": 16}, parse_overrides(["lr=1e-4"]))
    assert config.num_envs == 16 and config.lr == pytest.approx(1e-4)
    assert config.total_timesteps == 10_000_000  # untouched keys still come from the family


def test_every_gymnax_env_resolves_to_a_declared_family():
    declared = presets.families("ppo")
    for env in SUPPORTED_ENVS:
        family = presets.family_of(env)
        assert family in declared, (env, family)
    # the family follows trainers/envs.py's suites, Box actions aside
    assert {presets.family_of(env) for env in MINATAR} == {"minatar"}
    assert {presets.family_of(env) for env in BSUITE} == {"bsuite"}
    assert {presets.family_of(env) for env in MISC} == {"misc", "continuous"}
    assert presets.family_of("CartPole-v1-pomdp") == presets.family_of(MASKED_ENVS["CartPole-v1-pomdp"][0])
    # an env from outside gymnax starts from the built-in defaults
    assert presets.family_of("my_pkg.envs:make_env") is None
    assert presets.settings("ppo", "my_pkg.envs:make_env") == {}


def test_the_continuous_family_is_the_envs_with_box_actions():
    from trainers.envs import make_env

    continuous = {env for env in SUPPORTED_ENVS if not make_env(env).discrete}
    assert continuous == set(presets.CONTINUOUS_ACTIONS)


def test_every_family_builds_a_valid_config_for_each_member():
    for env in SUPPORTED_ENVS:
        config = config_for(env)  # raises ConfigError if a family's keys clash (minibatch sizes, ...)
        assert config.env == env
        dump_toml(config)


def test_envs_listing_names_each_envs_family(capsys):
    from rltui.cli import main

    assert main(["envs"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:] if line.strip()}
    assert "minatar" in rows["Freeway-MinAtar"].split()
    assert "bsuite family defaults" in rows["Catch-bsuite"]
    assert "continuous family defaults" in rows["PointRobot-misc"]
    assert "bsuite family defaults" in rows["Catch-bsuite"]
    assert "minatar" in rows["Breakout-MinAtar"].split() and "preset: return" in rows["Breakout-MinAtar"]


def test_envs_summary_of_a_family_default():
    from rltui.commands.envs import _preset_summary

    measured = presets.PresetResult(reference=15.0, mean=20.0, min=16.0, seeds=3, steps=9_994_240, wall_seconds=300)
    assert _preset_summary(False, None, "misc") == "misc family defaults (not measured here)"
    assert _preset_summary(False, measured, "minatar").startswith("minatar family defaults: return 20,")
    assert _preset_summary(True, measured, "minatar").startswith("preset: return 20,")
    assert _preset_summary(False, None, None) == "-"


def test_a_family_result_is_the_envs_result_only_without_a_preset(toml_presets):
    toml_presets(
        '[ppo.family.minatar]\nnum_envs = 64\n'
        '[ppo.family.minatar.result."Asterix-MinAtar"]\n'
        'reference = 15.0\nmean = 20.0\nmin = 16.0\nseeds = 3\nsteps = 9_994_240\nwall_seconds = 300\n'
        '[ppo."Breakout-MinAtar"]\nent_coef = 0.03\n'
    )
    assert presets.result("ppo", "Asterix-MinAtar").mean == pytest.approx(20.0)
    assert presets.result("ppo", "Breakout-MinAtar") is None
    assert presets.family("ppo", "Asterix-MinAtar") == {"num_envs": 64}  # the record is no configuration key
    assert "family" not in presets.presets("ppo")


def _algorithm_sections(page: str) -> dict[str, str]:
    """The presets page split by algorithm: PPO's is everything before the first other
    algorithm's section ("## PQN", ...)."""
    sections, name = {"ppo": ""}, "ppo"
    for part in page.split("\n## "):
        heading = part.split("\n", 1)[0].strip().lower()
        if heading in ("pqn", "dqn", "sac"):
            name = heading
        sections[name] = sections.get(name, "") + "\n## " + part
    return sections


@pytest.mark.parametrize("algo", ["ppo", "pqn"])
def test_family_results_are_on_the_presets_page(algo):
    page = _algorithm_sections((DOCS / "presets.md").read_text(encoding="utf-8"))[algo]
    rows = {}
    for cells in (line.split("|") for line in page.splitlines()):
        if len(cells) > 8:
            rows.setdefault(cells[1].strip(), cells)  # the results table comes before any other
    for env in SUPPORTED_ENVS:
        result = presets.result(algo, env)
        if result is not None and not presets.has_preset(algo, env):
            steps, wall, mean, worst = (cell.strip() for cell in rows[env][3:7])
            assert (steps, wall, float(mean), float(worst)) == (
                result.steps_label, f"{result.wall_seconds:g} s", result.mean, result.min), env
        if result is not None and result.random is not None:
            assert float(rows[env][8]) == pytest.approx(result.random), env  # the "random" column


def test_envs_summary_without_a_reference_or_against_a_random_policy():
    from rltui.commands.envs import _preset_summary

    unreferenced = presets.PresetResult(mean=-3.0, min=-5.0, seeds=3, steps=500_000, wall_seconds=20)
    assert _preset_summary(False, unreferenced, "misc").endswith("in 0.5M steps (no published reference)")
    no_better = presets.PresetResult(mean=0.1, min=0.0, seeds=3, steps=500_000, wall_seconds=20, random=0.2)
    assert _preset_summary(False, no_better, "misc").endswith("(no better than a random policy, 0.2)")


def returns_benchmark():
    """benchmarks/returns.py as a module (benchmarks/ is no package)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "returns.py"
    spec = importlib.util.spec_from_file_location("returns_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while they are made
    spec.loader.exec_module(module)
    return module


def test_returns_benchmark_by_default_reruns_every_row_of_the_results_table():
    measured = {env for env in SUPPORTED_ENVS if presets.result("ppo", env) is not None}
    assert measured <= set(returns_benchmark().measured_envs("ppo"))
    assert set(presets.presets("ppo")) <= set(returns_benchmark().measured_envs("ppo"))


def test_a_random_policy_on_catch_misses_most_balls():
    from trainers.envs import make_env

    # A paddle moved at random catches a ball falling from a random column now and then:
    # the return (+1 caught, -1 missed) is well below a trained policy's 1.
    random = returns_benchmark().evaluate_random(make_env("Catch-bsuite"), episodes=64)
    assert -1.0 <= random <= 0.2


def test_a_random_policy_on_pendulum_acts_within_the_action_bounds():
    from trainers.envs import make_env

    # Pendulum's cost grows with the torque: a uniform draw within [-2, 2] costs far more
    # than a trained policy and no more than the worst torques every step.
    random = returns_benchmark().evaluate_random(make_env("Pendulum-v1"), episodes=16)
    assert -1900.0 < random < -600.0


@pytest.mark.parametrize("reference", [-1e9, 1e9], ids=["reached", "never-reached"])
def test_the_returns_benchmark_stops_at_the_first_check_that_reaches_the_reference(reference):
    returns = returns_benchmark()
    config = build_config({}, {"env": "CartPole-v1", "num_envs": 4, "num_steps": 16, "num_minibatches": 2,
                               "update_epochs": 1, "hidden_sizes": [16], "num_seeds": 2,
                               "total_timesteps": 6 * 4 * 16})
    _, state, final, _, reached = returns.train(config, check_every=2, reference=reference, episodes=2,
                                                stop_at_reference=True)
    updates_run = int(np.asarray(state.update_idx).reshape(-1)[0])
    if reference < 0:  # every seed is above it at the first check: the run ends there
        assert (reached.steps, len(reached.returns), updates_run) == (2 * 4 * 16, 2, 2)
    else:  # no check reaches it: the run goes to its end and says nothing was reached
        assert reached is None and updates_run == 6
    assert len(final) == 2
