"""Populations as the user specifies them: the `sweep` table and `--sweep` flags into members,
PBT's keys, the one-line refusals, and the memory estimate's refusal."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from rltui.cli import main
from rltui.config.build import build_config
from rltui.config.sweep import MAX_AGENTS, plan_sweep
from rltui.config.toml_text import dump_toml, load_toml, parse_overrides
from rltui.errors import UsageError


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def launch_error(workdir: Path, capsys, *args: str) -> str:
    """The one line `rltui launch --no-ui ARGS` refuses with (exit 2), nothing written."""
    code = main(["launch", "--no-ui", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert not (workdir / "runs").exists()
    assert lines[0].startswith("rltui: error: ")
    return lines[0].removeprefix("rltui: error: ")


def sweep_of(*args: str, file_values=None):
    return plan_sweep(build_config(file_values or {}, parse_overrides(list(args))))


def test_no_sweep_is_one_member():
    config = build_config()
    assert plan_sweep(config) is None
    assert config.static_config().num_members == 1


def test_grid_is_every_combination_last_key_fastest_in_the_trainers_key_order():
    # given ent_coef first: the members follow the trainer's key order (lr before ent_coef)
    sweep = sweep_of("sweep.ent_coef=[0, 0.01]", "sweep.lr=[1e-4, 3e-4, 1e-3]")
    assert sweep.keys == ("lr", "ent_coef")
    got = [(m["lr"], m["ent_coef"]) for m in sweep.members]
    want = [(lr, ent) for lr in (1e-4, 3e-4, 1e-3) for ent in (0.0, 0.01)]
    assert len(got) == 6
    for (lr, ent), (want_lr, want_ent) in zip(got, want):
        assert lr == pytest.approx(want_lr, rel=1e-6) and ent == pytest.approx(want_ent, rel=1e-6)
    assert sweep.label(1) == "lr=0.0001 ent_coef=0.01"
    assert sweep.label(2) == "lr=0.0003 ent_coef=0"


def test_switches_sweep_as_zero_and_one():
    sweep = sweep_of("sweep.anneal_lr=[true, false]")
    assert [m["anneal_lr"] for m in sweep.members] == [1.0, 0.0]
    assert sweep.label(1) == "anneal_lr=false"


def test_sampled_members_are_within_bounds_and_fixed_by_sweep_seed():
    args = ("sweep.lr=loguniform(1e-4, 1e-2)", "sweep.vf_coef=[0.5, 1.0]", "sweep.gamma=uniform(0.9, 0.99)",
            "sweep_size=16")
    sweep = sweep_of(*args)
    assert sweep.keys == ("lr", "gamma", "vf_coef")
    assert len(sweep.members) == 16
    for member in sweep.members:
        assert 1e-4 * (1 - 1e-6) <= member["lr"] <= 1e-2 * (1 + 1e-6)
        assert 0.9 * (1 - 1e-6) <= member["gamma"] <= 0.99 * (1 + 1e-6)
        assert member["vf_coef"] in (0.5, 1.0)
    assert len({m["lr"] for m in sweep.members}) == 16  # drawn, not repeated
    assert {m["vf_coef"] for m in sweep.members} == {0.5, 1.0}  # 16 draws of a choice of two
    assert sweep_of(*args) == sweep  # deterministic
    other = sweep_of(*args, "sweep_seed=1")
    assert [m["lr"] for m in other.members] != [m["lr"] for m in sweep.members]
    # a key's draws stay when another key joins the sweep
    alone = sweep_of("sweep.lr=loguniform(1e-4, 1e-2)", "sweep_size=16")
    assert [m["lr"] for m in alone.members] == [m["lr"] for m in sweep.members]
    # loguniform spreads over the decades: both halves (in log) are drawn
    logs = [math.log10(m["lr"]) for m in sweep.members]
    assert min(logs) < -3 < max(logs)


def test_static_config_counts_the_members():
    assert build_config({}, parse_overrides(["sweep.lr=[1e-4,3e-4,1e-3]", "num_seeds=2"])).static_config() \
        .num_members == 3
    config = build_config({}, parse_overrides(["sweep.lr=choice(1e-4, 3e-4)", "sweep_size=16"]))
    assert config.static_config().num_members == 16
    assert config.static_config().num_agents == 16


def test_toml_sweep_table_and_the_flag_wins_per_key(workdir, monkeypatch):
    path = workdir / "pop.toml"
    path.write_text('[sweep]\nlr = [1e-4, 3e-4]\nent_coef = "loguniform(1e-4, 1e-2)"\n', encoding="utf-8")
    values = load_toml(path)
    config = build_config(values, parse_overrides(["sweep_size=4"]))
    assert plan_sweep(config).keys == ("lr", "ent_coef")
    # --sweep replaces the file's lr entry and keeps its ent_coef entry
    seen = {}
    import rltui.commands.launch

    def fake_launch(args, spec=None):
        seen["config"] = rltui.commands.launch._config_and_resume(args).config
        return 0

    monkeypatch.setattr(rltui.commands.launch, "launch", fake_launch)
    assert main(["launch", "--no-ui", "--config", str(path), "--sweep", "lr=[1e-3,3e-3,1e-2]",
                 "--sweep-size", "8"]) == 0
    config = seen["config"]
    assert config.sweep == {"lr": [1e-3, 3e-3, 1e-2], "ent_coef": "loguniform(1e-4, 1e-2)"}
    assert config.sweep_size == 8
    sweep = plan_sweep(config)
    assert len(sweep.members) == 8
    for member in sweep.members:
        assert any(member["lr"] == pytest.approx(v, rel=1e-6) for v in (1e-3, 3e-3, 1e-2)), member
        assert 1e-4 * (1 - 1e-6) <= member["ent_coef"] <= 1e-2 * (1 + 1e-6)
    # --set sweep={...} replaces the whole table, like any key
    assert build_config(values, parse_overrides(["sweep={gamma = [0.9, 0.99]}"])).sweep == {"gamma": [0.9, 0.99]}
    # --set sweep_size works like any key
    assert build_config(values, parse_overrides(["sweep_size=16"])).static_config().num_members == 16


def test_a_sweep_is_written_and_read_back(workdir):
    config = build_config({}, parse_overrides(["sweep.lr=[1e-4,3e-4]", "sweep.ent_coef=uniform(0, 0.02)",
                                               "sweep_size=5", "pbt_every_updates=10"]))
    path = workdir / "config.toml"
    path.write_text(dump_toml(config), encoding="utf-8")
    again = build_config(load_toml(path))
    assert again == config
    assert plan_sweep(again) == plan_sweep(config)


def test_pbt_keys_default_and_factors():
    config = build_config({}, parse_overrides(["sweep.lr=[1e-4,3e-4]", "pbt_every_updates=5",
                                               "pbt_perturb=[0.5, 2]", "pbt_keys=[lr, ent_coef]"]))
    assert config.pbt_perturb == (0.5, 2.0)
    assert config.pbt_keys == ("lr", "ent_coef")


BAD_SWEEPS = [
    pytest.param(["--sweep", "lrr=[1e-4]"],
                 "lrr: unknown key in the sweep; did you mean lr? sweepable keys: lr, gamma, q_lambda, eps_start, "
                 "eps_end, eps_decay, gae_lambda, bootstrap_truncated, clip_eps, ent_coef, vf_coef, max_grad_norm, "
                 "learning_starts, replay_ratio, tau, target_period, autotune, alpha, double_q, anneal_lr, baseline, "
                 "normalize_returns, reward_scale",
                 id="unknown-key"),
    pytest.param(["--sweep", "num_envs=[4,8]"],
                 "num_envs: cannot be swept: it changes the compiled program's shapes; launch one run per value",
                 id="static-num_envs"),
    pytest.param(["--sweep", "hidden_sizes=[[64],[128]]"],
                 "hidden_sizes: cannot be swept: it changes the compiled program's shapes; launch one run per value",
                 id="static-hidden_sizes"),
    pytest.param(["--sweep", "seed=[0,1]"],
                 "seed: cannot be swept: use num_seeds for several seeds (seed, seed+1, ...) per member",
                 id="seed"),
    pytest.param(["--sweep", "total_timesteps=[1e5,2e5]"],
                 "total_timesteps: cannot be swept: it is a setting of the whole run; launch one run per value",
                 id="run-key"),
    pytest.param(["--set", "algo=reinforce", "--sweep", "clip_eps=[0.1,0.2]"],
                 "clip_eps: cannot be swept with algo = reinforce, which does not read it (read by ppo)",
                 id="not-read-by-algo"),
    pytest.param(["--sweep", "lr=[]"], "lr: the sweep's list is empty; give one value or more, like [0.00025]",
                 id="empty-list"),
    pytest.param(["--sweep", "lr=[1e-4]", "--sweep", "ent_coef=[0]"],
                 "sweep: a population needs at least 2 members, this sweep gives one; for one value use "
                 "--set lr=0.0001 --set ent_coef=0", id="one-member"),
    pytest.param(["--sweep", "lr=[1e-4,1e-4]"], "lr: 0.0001 appears twice in the sweep's list", id="repeated"),
    pytest.param(["--sweep", "lr=normal(1e-4,1e-2)", "--sweep-size", "4"],
                 "lr: unknown distribution 'normal'; expected loguniform(lo, hi), uniform(lo, hi) or choice(a, b, ...)",
                 id="unknown-distribution"),
    pytest.param(["--sweep", "lr=loguniform(1e-4)", "--sweep-size", "4"],
                 "lr: loguniform(lo, hi) takes 2 numbers, got 1: 'loguniform(1e-4)'", id="arg-count"),
    pytest.param(["--sweep", "lr=uniform(a,b)", "--sweep-size", "4"],
                 "lr: expected numbers in 'uniform(a,b)', got 'a'", id="not-numbers"),
    pytest.param(["--sweep", "ent_coef=loguniform(0,1e-2)", "--sweep-size", "4"],
                 "ent_coef: loguniform(lo, hi) needs lo > 0, got 'loguniform(0,1e-2)'; use uniform for a range from 0",
                 id="loguniform-lo-zero"),
    pytest.param(["--sweep", "lr=loguniform(1e-2,1e-4)", "--sweep-size", "4"],
                 "lr: loguniform(lo, hi) needs lo < hi, got 'loguniform(1e-2,1e-4)'", id="lo-above-hi"),
    pytest.param(["--sweep", "gamma=uniform(0.9,1.5)", "--sweep-size", "4"],
                 "gamma: expected a number in (0, 1], got 1.5 (a bound of uniform(0.9,1.5))", id="bound-outside-rule"),
    pytest.param(["--sweep", "gamma=[0.9,1.5]"], "gamma: expected a number in (0, 1], got 1.5",
                 id="value-outside-rule"),
    pytest.param(["--sweep", "anneal_lr=uniform(0,1)", "--sweep-size", "4"],
                 "anneal_lr: a switch is swept with [true, false] or choice(true, false), not uniform",
                 id="switch-uniform"),
    pytest.param(["--sweep", "lr=fast"],
                 "lr: expected a list of values like [1e-4, 3e-4], or loguniform(lo, hi), uniform(lo, hi) or "
                 "choice(a, b, ...); got 'fast'", id="not-a-spec"),
    pytest.param(["--sweep", "lr=3e-4"],
                 "lr: expected a list of values like [1e-4, 3e-4], or loguniform(lo, hi), uniform(lo, hi) or "
                 "choice(a, b, ...); got 0.0003 (one value: --set lr=0.0003)", id="one-value"),
    pytest.param(["--sweep", "lr=loguniform(1e-4,1e-2)"],
                 "lr: loguniform(1e-4,1e-2) is drawn, not listed; set sweep_size, the number of members to draw "
                 "(--sweep-size N)", id="distribution-without-size"),
    pytest.param(["--sweep", "lr"],
                 "--sweep: expected KEY=SPEC, like lr=[1e-4,3e-4] or lr=loguniform(1e-4,1e-2), got 'lr'",
                 id="flag-without-spec"),
    pytest.param(["--sweep", "lr=[1e-4,3e-4]", "--sweep-size", "0"],
                 "--sweep-size: expected a number of members, 1 or more, got '0'", id="size-0"),
    pytest.param(["--sweep", "lr=[1e-4,3e-4]", "--sweep-size", "-3"],
                 "--sweep-size: expected a number of members, 1 or more, got '-3'", id="size-negative"),
    pytest.param(["--sweep-size", "4"],
                 "sweep_size: there is no sweep to draw members from; add one (--sweep KEY=SPEC), or use num_seeds "
                 "for agents that differ only in their seed", id="size-without-sweep"),
    pytest.param(["--sweep", "lr=[1,2,3,4,5,6,7,8,9,10]", "--sweep", "gamma=[0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1]",
                  "--sweep", "ent_coef=[0,1,2,3,4,5,6,7,8,9]", "--set", "num_seeds=5"],
                 f"sweep: the grid's 1,000 members x 5 seeds = 5,000 agents, more than the {MAX_AGENTS:,} one run "
                 "trains; draw some of them with --sweep-size N, or lower num_seeds", id="grid-too-large"),
    pytest.param(["--sweep", "lr=loguniform(1e-4,1e-2)", "--sweep-size", "4096", "--set", "num_seeds=2"],
                 f"sweep_size: 4,096 members x 2 seeds = 8,192 agents, more than the {MAX_AGENTS:,} one run trains; "
                 "lower sweep_size or num_seeds", id="sample-too-large"),
    pytest.param(["--set", "pbt_every_updates=5"],
                 "pbt_every_updates: population-based training needs a population of at least 2 members, got 1; add "
                 "a sweep (--sweep \"lr=loguniform(1e-4,1e-3)\" --sweep-size 8)", id="pbt-without-population"),
    pytest.param(["--sweep", "lr=[1e-4,3e-4]", "--set", "pbt_every_updates=5", "--set", "pbt_metric=eval_return"],
                 "pbt_metric: eval_return needs evaluation; set eval_every_updates > 0", id="pbt-eval-without-eval"),
    pytest.param(["--sweep", "lr=[1e-4,3e-4]", "--set", "pbt_fraction=0.6"],
                 "pbt_fraction: expected a number in (0, 0.5], got 0.6", id="pbt-fraction"),
    pytest.param(["--set", "pbt_perturb=[0, 1.2]"],
                 "pbt_perturb: expected a list of positive numbers, like [0.8, 1.25], got [0, 1.2]", id="pbt-perturb"),
    pytest.param(["--sweep", "anneal_lr=[true,false]", "--set", "pbt_every_updates=3"],
                 "pbt_keys: the sweep has no numeric key for PBT to perturb (anneal_lr is a switch); name some, like "
                 'pbt_keys = ["lr"]', id="pbt-nothing-to-perturb"),
    pytest.param(["--set", "algo=reinforce", "--set", "pbt_keys=[clip_eps]"],
                 "pbt_keys: algo = reinforce does not read clip_eps", id="pbt-key-not-read"),
]


@pytest.mark.parametrize("args,message", BAD_SWEEPS)
def test_bad_sweep_is_one_line_exit_2_before_anything_is_written(workdir, capsys, args, message):
    assert launch_error(workdir, capsys, *args) == message


def test_bad_sweep_in_a_file_names_the_file(workdir, capsys):
    (workdir / "pop.toml").write_text("[sweep]\nnum_envs = [4, 8]\n", encoding="utf-8")
    assert launch_error(workdir, capsys, "--config", "pop.toml") == (
        "--config: pop.toml: num_envs: cannot be swept: it changes the compiled program's shapes; launch one run "
        "per value"
    )


def test_bad_sweep_is_refused_before_jax_is_imported(workdir):
    import subprocess  # a fresh interpreter: this one may have imported JAX for other tests

    script = (
        "import sys\nfrom rltui.cli import main\n"
        "rc = main(['launch', '--no-ui', '--sweep', 'num_envs=[4,8]'])\n"
        "print('RC', rc, 'JAX', 'jax' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=workdir, capture_output=True, text=True, timeout=120)
    assert "RC 2 JAX False" in result.stdout, result.stdout + result.stderr


# --- memory -------------------------------------------------------------------------------


class FakeDevice:
    def __init__(self, platform: str = "cpu", id: int = 0):
        self.platform, self.id = platform, id

    def memory_stats(self):
        return {"bytes_limit": 2**30, "bytes_in_use": 2**29}


def _static_and_spec(*items: str):
    from trainers.envs import make_env

    static = build_config({}, parse_overrides(list(items))).static_config()
    return static, make_env(static.env_id)


def test_memory_estimate_grows_with_the_batch_and_covers_the_rollout():
    from rltui.config.memory import estimate_agent_bytes

    small, spec = _static_and_spec()
    large, _ = _static_and_spec("num_envs=64")
    one = estimate_agent_bytes(small, spec)
    # the rollout buffer alone: num_steps x num_envs x (2 x obs + 8) float32
    assert one > small.num_steps * small.num_envs * (2 * spec.obs_size + 8) * 4
    assert estimate_agent_bytes(large, spec) > 8 * one


def test_population_too_large_for_memory_is_refused(workdir):
    from rltui.config.memory import check_population_fits, estimate_agent_bytes

    static, spec = _static_and_spec("sweep.lr=loguniform(1e-4,1e-2)", "sweep_size=64", "num_seeds=4")
    need = 256 * estimate_agent_bytes(static, spec)
    check_population_fits(static, spec, [FakeDevice()], free_bytes=lambda device: 2 * need)  # fits
    with pytest.raises(UsageError) as caught:
        check_population_fits(static, spec, [FakeDevice()], free_bytes=lambda device: need // 2)
    message = str(caught.value)
    assert message.startswith("population of 256 agents needs about ")
    assert message.endswith(" GiB free on cpu (mostly the activations of hidden_sizes [64, 64] over 128 rows at "
                            "once); lower the sweep's size, num_seeds, num_envs, num_steps or hidden_sizes"), message
    assert "\n" not in message
    assert caught.value.exit_code == 2
    # an accelerator is compared with its own free memory (bytes_limit - bytes_in_use by default)
    with pytest.raises(UsageError, match=r"GiB free on gpu 1 \(mostly "):
        check_population_fits(static, spec, [FakeDevice("gpu", 0), FakeDevice("gpu", 1)],
                              free_bytes=lambda device: 2**40 if device.id == 0 else 1)
    # unknown free memory passes
    check_population_fits(static, spec, [FakeDevice()], free_bytes=lambda device: None)


def test_host_available_memory_reads_meminfo(tmp_path):
    from rltui.config.memory import device_free_bytes, host_available_bytes

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  1000 kB\nMemFree:  10 kB\nMemAvailable:  500 kB\n", encoding="ascii")
    assert host_available_bytes(meminfo) == 500 * 1024
    assert host_available_bytes(tmp_path / "missing") is None or host_available_bytes(tmp_path / "missing") > 0
    assert device_free_bytes(FakeDevice("gpu")) == 2**29
