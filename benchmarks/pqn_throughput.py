"""rltui's PQN against the reference PQN (`benchmarks/reference_pqn.py`, purejaxql's
single-file trainer re-expressed) on purejaxql's CartPole configuration, both parts in
one run:

1. Env steps per second at each env count (default 4 16 64 256 1024; num_steps and the
   minibatch count stay the configuration's): rltui's PQN through its session (as
   `rltui launch --no-ui` runs it) and the reference, each in a process of its own, in the
   order session, reference, session, so that drift in machine load falls on both sides.
   Both processes are set up as rltui sets up its own (XLA's vector width and worker pool
   for that configuration): trainer code against trainer code. Per process: env steps per
   second (median of --repeats, after --warmup untimed rounds, compile excluded), CPU
   seconds per million env steps (getrusage, every thread) and compile time. The ratio is
   the session's mean over the reference's.

2. Time to a solved CartPole, whole processes: `rltui launch --no-ui --set algo=pqn` with a
   greedy evaluation of 128 episodes every twentieth of the run and `stop_at_eval_return`,
   against the reference's process as its script runs (plain `import jax`, jit the whole
   training, run, print) with its greedy test of 128 envs at the same cadence, as
   purejaxql's CartPole configuration has it. The reference cannot stop early: its whole
   process is what a user waits for; the table also gives the time at which it first
   reached the return, estimated as start-up, compile and its training time pro rata to
   the updates before that test. Pair i runs seed i on both sides; the first pair is cold
   (rltui's compile cache empty), the later warm.

    python benchmarks/pqn_throughput.py [--envs 4 16 64 256 1024] [--env-steps 2e5] [--repeats 2]
                                        [--warmup 1] [--pairs 3] [--target 475] [--only table|solve]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from harness import run_marked_process, run_timed_launch, session_reference_session, timed_backend  # noqa: E402
from throughput import MIN_UPDATES, cpu_seconds, run_session, timed_runs  # noqa: E402

TABLE_ENVS = [4, 16, 64, 256, 1024]
# Greedy test episodes on each side of the time to solve: purejaxql's TEST_NUM_ENVS.
TEST_EPISODES = 128
# Tests per run: purejaxql's TEST_INTERVAL is a twentieth of the updates.
TESTS_PER_RUN = 20


def pqn_config(**values):
    """rltui's run configuration for PQN on CartPole-v1 with `values` set: the one source of
    both sides' settings."""
    from rltui.config.build import build_config

    return build_config({"algo": "pqn", **values})


def reference_settings(config) -> dict:
    """`reference_pqn.make_train`'s keywords for rltui's `config` (its updates aside)."""
    if config.algo != "pqn" or config.network != "mlp" or len(set(config.hidden_sizes)) != 1:
        raise SystemExit(f"the reference is PQN with an MLP of equal widths; this run has {config.algo} "
                         f"{config.network} {config.hidden_sizes}")
    return dict(num_envs=config.num_envs, num_steps=config.num_steps, epochs=config.update_epochs,
                minibatches=config.num_minibatches, hidden_size=config.hidden_sizes[0],
                num_layers=len(config.hidden_sizes), lr=config.lr, max_grad_norm=config.max_grad_norm,
                gamma=config.gamma, q_lambda=config.q_lambda, eps_start=config.eps_start, eps_end=config.eps_end,
                eps_decay=config.eps_decay, reward_scale=config.reward_scale)


# --- 1. env steps per second ----------------------------------------------------------------
def measure_one(args) -> None:
    """One side of the table at one env count, in this process; prints a RESULT line."""
    from rltui.config.build import build_config
    from rltui.infra import runtime

    num_envs = args.envs[0]
    probe = pqn_config(num_envs=num_envs)
    updates = max(MIN_UPDATES, int(args.env_steps // probe.steps_per_update))
    config = build_config({"algo": "pqn", "num_envs": num_envs, "total_timesteps": updates * probe.steps_per_update})
    runtime.configure_jax(host_devices=1, compile_cache=False)
    workers = runtime.start_backend(runtime.resolve_cpu_threads(config))
    import jax
    import reference_pqn

    from rltui.session import TrainingSession
    from trainers.envs import make_env

    static, hp = config.static_config(), config.dynamic_hparams()
    steps = updates * config.steps_per_update
    result = {"workers": workers, "updates": updates}
    if args.measure == "session":
        backend = timed_backend(static, jax.local_devices()[:1])

        def run() -> tuple[float, float]:
            return run_session(TrainingSession(backend, hp, updates), cpu_seconds)
    else:
        started = time.perf_counter()
        train = jax.jit(reference_pqn.make_train(make_env(config.env), num_updates=updates,
                                                 **reference_settings(config)))
        train = train.lower(jax.random.PRNGKey(0)).compile()
        result["compile_seconds"] = time.perf_counter() - started

        def run() -> tuple[float, float]:
            wall, cpu = time.perf_counter(), cpu_seconds()
            jax.block_until_ready(train(jax.random.PRNGKey(0)))
            return time.perf_counter() - wall, cpu_seconds() - cpu

    result.update(timed_runs(run, steps, args.warmup, args.repeats))
    if args.measure == "session":
        result["compile_seconds"] = backend.build_seconds[0]
    print("RESULT " + json.dumps(result), flush=True)


def table(args) -> None:
    """Session / reference / session processes per env count, then the table."""
    rows = []
    for num_envs in args.envs:
        results = session_reference_session([sys.executable, __file__, "--envs", str(num_envs), "--env-steps",
                                             str(args.env_steps), "--repeats", str(args.repeats),
                                             "--warmup", str(args.warmup)], f"{num_envs} envs")
        rows.append((num_envs, results))
    print("\n| envs | session SPS | reference SPS | ratio (per session process) | CPU s / 1M steps (session, ref) "
          "| CPU ratio | compile s (session, ref) |")
    print("|---|---|---|---|---|---|---|")
    for num_envs, results in rows:
        a, b = results["session"], results["reference"][0]
        mean = lambda key: sum(r[key] for r in a) / len(a)
        ratios = ", ".join(f"{r['sps'] / b['sps']:.2f}" for r in a)
        print(f"| {num_envs} | {mean('sps') / 1e3:,.1f}k | {b['sps'] / 1e3:,.1f}k | {mean('sps') / b['sps']:.2f} "
              f"({ratios}) | {mean('cpu_per_million'):.1f}, {b['cpu_per_million']:.1f} "
              f"| {b['cpu_per_million'] / mean('cpu_per_million'):.2f} "
              f"| {mean('compile_seconds'):.1f}, {b['compile_seconds']:.1f} |", flush=True)


# --- 2. time to solve ----------------------------------------------------------------------
def run_rltui(cache: Path, runs: Path, seed: int, target: float, test_every: int) -> dict:
    run_dir = Path(tempfile.mkdtemp(dir=runs)) / "run"
    sets = {"algo": "pqn", "seed": seed, "eval_every_updates": test_every, "eval_episodes": TEST_EPISODES,
            "stop_at_eval_return": target}
    command = ["rltui", "launch", "--no-ui", "--run-dir", str(run_dir),
               *(a for key, value in sets.items() for a in ("--set", f"{key}={value}"))]
    phases, reached = run_timed_launch(command, run_dir, {**os.environ, "XDG_CACHE_HOME": str(cache)})
    return {**phases, "solved_at": reached["update"] if reached else None,
            "test_return": reached["data"]["eval_return"] if reached else None}


def run_reference(seed: int, target: float, test_every: int) -> dict:
    config = pqn_config()
    job = {"env": config.env, "seed": seed, "target": target, "test_every": test_every, "updates": config.total_updates,
           "settings": reference_settings(config)}
    phases, marks = run_marked_process(__file__, job)
    return {**phases, "solved_at": marks["solved_at"], "test_return": marks["test_return"]}


def reference_process(job: dict) -> None:
    """The reference's whole process, as its script runs: imports, jit, run, print."""
    import jax
    import numpy as np
    import reference_pqn

    from trainers.envs import make_env

    marks = {"imported": time.time()}
    key = jax.random.PRNGKey(job["seed"])
    train = jax.jit(reference_pqn.make_train(
        make_env(job["env"]), num_updates=job["updates"], test_every=job["test_every"], test_envs=TEST_EPISODES,
        **job["settings"],
    )).lower(key).compile()
    marks["compiled"] = time.time()
    out = jax.device_get(jax.block_until_ready(train(key)))
    marks["trained"] = time.time()
    tests = np.asarray(out["test_returns"])
    solved = np.flatnonzero(tests >= job["target"])
    marks["updates"] = job["updates"]
    marks["solved_at"] = int(solved[0]) + 1 if solved.size else None
    marks["test_return"] = float(tests[solved[0]]) if solved.size else float(tests[-1])
    print(json.dumps(marks), flush=True)


def solve(args) -> None:
    test_every = max(1, pqn_config().total_updates // TESTS_PER_RUN)
    phases = ("total", "start_up", "compile", "training", "teardown")
    print(f"\ntime to a greedy test return of {args.target:g} ({TEST_EPISODES} episodes every {test_every} updates), "
          "seconds:")
    print(f"| run | seed | {' | '.join(phases)} | to the solving test | solved at update | test return |")
    print("|---" * (len(phases) + 5) + "|")
    with tempfile.TemporaryDirectory(prefix="rltui-pqn-solve-") as scratch:
        cache, runs = Path(scratch) / "cache", Path(scratch) / "runs"
        runs.mkdir()
        for seed in range(args.pairs):
            label = "cold" if seed == 0 else "warm"
            ours = run_rltui(cache, runs, seed, args.target, test_every)
            theirs = run_reference(seed, args.target, test_every)
            for name, result in ((f"rltui {label}", ours), ("reference", theirs)):
                to_solve = result.get("to_solve", result["total"] if name.startswith("rltui") else None)
                cells = [f"{result[p]:.1f}" for p in phases]
                print(f"| {name} | {seed} | {' | '.join(cells)} | {'-' if to_solve is None else f'{to_solve:.1f}'} "
                      f"| {result['solved_at'] or 'not solved'} | {result['test_return'] or float('nan'):.1f} |",
                      flush=True)
            estimate = f"{ours['total'] / theirs['to_solve']:.2f}" if "to_solve" in theirs else "-"
            print(f"| ratio rltui / reference ({label}): whole process {ours['total'] / theirs['total']:.2f}, "
                  f"to the solving test {estimate} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=TABLE_ENVS)
    parser.add_argument("--env-steps", type=float, default=2e5, help="env steps per measurement (default 2e5)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds before the timed ones (default 1)")
    parser.add_argument("--pairs", type=int, default=3, help="time-to-solve pairs; the first is cold (default 3)")
    parser.add_argument("--target", type=float, default=475.0, help="greedy test return that counts as solved")
    parser.add_argument("--only", choices=("table", "solve"))
    parser.add_argument("--measure", choices=("session", "reference"), help=argparse.SUPPRESS)
    parser.add_argument("--reference-process", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure_one(args)
    elif args.reference_process:
        reference_process(json.loads(args.reference_process))
    else:
        print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
        if args.only != "solve":
            table(args)
        if args.only != "table":
            solve(args)
        print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
