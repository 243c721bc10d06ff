"""Time to a solved CartPole as a user sees it: `rltui launch --no-ui` on the defaults, the
whole process from start to exit, against the reference PPO's whole process
(benchmarks/reference_ppo.py, written as single-file pure-JAX trainers are: import, jit the
whole training, run it, print) on the same configuration, read from the run's config.toml.

Paired runs: each pair is rltui then the reference, back to back. The first pair is cold
(rltui's compile cache, under XDG_CACHE_HOME, points at an empty directory); later pairs
are warm (the same directory, now holding the compiled programs). The reference runs as
such scripts run: without JAX's persistent cache, so it compiles every time.

Where rltui's seconds go, from outside and from the run's files:
  start-up  process start to the run directory's config.toml (Python, imports, JAX's
            backend start; split by a separate probe process that times each import)
  compile   the `compiled` event's seconds (init, compile, the choice of chunk program)
  training  `compiled` to `finished` in events.jsonl
  teardown  `finished` to process exit (final checkpoint, closing files, interpreter exit)

    python benchmarks/time_to_solve.py [--pairs 2] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import run_timed_launch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# What the reference needs of the run's configuration.
REFERENCE_KEYS = ("env", "algo", "network", "hidden_sizes", "seed", "total_timesteps", "num_envs", "num_steps",
                  "update_epochs", "num_minibatches", "lr", "gamma", "gae_lambda", "clip_eps", "ent_coef", "vf_coef",
                  "max_grad_norm")
PROBE = """
import json, time
t = [time.perf_counter()]
import rltui.cli, rltui.commands.launch  # what runs before JAX is configured
from rltui.infra import deferred_imports
deferred_imports.install()  # as configure_jax does
t.append(time.perf_counter())
import jax
t.append(time.perf_counter())
jax.devices()
t.append(time.perf_counter())
import flax, optax, gymnax
t.append(time.perf_counter())
import rltui.session, rltui.headless, trainers.parallel, trainers.algorithms.ppo.trainer
t.append(time.perf_counter())
print(json.dumps(dict(rltui_cli=t[1] - t[0], jax=t[2] - t[1], backend_start=t[3] - t[2],
                      flax_optax_gymnax=t[4] - t[3], session_and_trainer=t[5] - t[4])))
"""


def run_rltui(cache: Path, runs: Path, sets: list[str]) -> dict:
    # imported here, so that the reference's process imports nothing of rltui's
    from rltui.config.build import build_config
    from rltui.config.toml_text import load_toml

    run_dir = Path(tempfile.mkdtemp(dir=runs)) / "run"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    command = ["rltui", "launch", "--no-ui", "--run-dir", str(run_dir), *(a for s in sets for a in ("--set", s))]
    phases, _ = run_timed_launch(command, run_dir, env)
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    returns = [m["episode_return"] for m in metrics[-10:] if m["episode_return"] is not None]
    config = build_config(load_toml(run_dir / "config.toml"))
    return {
        **phases,
        "return": sum(returns) / len(returns),
        "config": {key: getattr(config, key) for key in REFERENCE_KEYS},
    }


def run_reference(config: dict) -> dict:
    args = json.dumps(config)
    start = time.time()
    done = subprocess.run([sys.executable, __file__, "--reference-process", args], capture_output=True, text=True)
    end = time.time()
    if done.returncode:
        sys.exit(f"the reference exited {done.returncode}:\n{done.stderr[-2000:]}")
    marks = json.loads(done.stdout.splitlines()[-1])
    return {
        "total": end - start,
        "start_up": marks["imported"] - start,
        "compile": marks["compiled"] - marks["imported"],
        "training": marks["trained"] - marks["compiled"],
        "teardown": end - marks["trained"],
        "return": marks["return"],
    }


def reference_process(config: dict) -> None:
    """The reference's whole process: imports, jit, run, print; timestamps on the way."""
    import jax
    import numpy as np
    import reference_ppo

    from trainers.envs import make_env

    marks = {"imported": time.time()}
    updates = int(config["total_timesteps"] // (config["num_envs"] * config["num_steps"]))
    train = jax.jit(reference_ppo.make_train(
        make_env(config["env"]), config["num_envs"], config["num_steps"], updates, epochs=config["update_epochs"],
        minibatches=config["num_minibatches"], lr=config["lr"], gamma=config["gamma"],
        gae_lambda=config["gae_lambda"], clip_eps=config["clip_eps"], ent_coef=config["ent_coef"],
        vf_coef=config["vf_coef"], max_grad_norm=config["max_grad_norm"],
    )).lower(jax.random.PRNGKey(config["seed"])).compile()
    marks["compiled"] = time.time()
    returns = np.asarray(jax.block_until_ready(train(jax.random.PRNGKey(config["seed"])))["returns"])
    marks["trained"] = time.time()
    marks["return"] = float(np.nanmean(returns[-10:]))
    print(json.dumps(marks), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=2, help="pairs of runs; the first is cold (default 2)")
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE passed to rltui launch")
    parser.add_argument("--reference-process", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reference_process:
        reference_process(json.loads(args.reference_process))
        return
    probe = json.loads(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                                      check=True).stdout.splitlines()[-1])
    print("start-up, from a probe process (s): " + ", ".join(f"{k} {v:.2f}" for k, v in probe.items()))
    with tempfile.TemporaryDirectory(prefix="rltui-time-to-solve-") as scratch:
        measure_pairs(args, Path(scratch))


def measure_pairs(args, scratch: Path) -> None:
    """The pairs, with rltui's compile cache and run directories under `scratch`."""
    cache, runs = scratch / "cache", scratch / "runs"
    runs.mkdir()
    phases = ("total", "start_up", "compile", "training", "teardown")
    print(f"| run | {' | '.join(phases)} | return (last 10 updates) |")
    print("|---" * (len(phases) + 2) + "|")
    for pair in range(args.pairs):
        label = "cold" if pair == 0 else "warm"
        ours = run_rltui(cache, runs, args.set)
        config = ours.pop("config")
        if tuple(config["hidden_sizes"]) != (64, 64) or config["algo"] != "ppo" or config["network"] != "mlp":
            print(f"note: the reference is PPO with [64, 64] MLP towers; this run has {config['algo']} "
                  f"{config['network']} {config['hidden_sizes']}")
        theirs = run_reference(config)
        for name, result in ((f"rltui {label}", ours), ("reference", theirs)):
            print(f"| {name} | {' | '.join(f'{result[p]:.1f}' for p in phases)} | {result['return']:.1f} |",
                  flush=True)
        print(f"| ratio rltui/reference ({label}) | {ours['total'] / theirs['total']:.2f} |")


if __name__ == "__main__":
    main()
