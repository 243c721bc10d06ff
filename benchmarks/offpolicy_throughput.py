"""rltui's DQN and SAC against their references, both parts in one run:
DQN against `benchmarks/reference_dqn.py` (PureJaxRL's `dqn.py` re-expressed) on
CartPole-v1 with its configuration, SAC against `benchmarks/reference_sac.py` (rejax's SAC
re-expressed) on Pendulum-v1 with its `configs/gymnax/pendulum.yaml` settings.

Each reference's configuration is its `make_train`'s defaults; rltui's side is built from
them key by key (`rltui_values`) and the reference then runs with the settings read back
from rltui's configuration (`reference_settings`): one source for both sides. Where
rltui has no such setting (SAC's swish activation; rejax's observation normalisation,
which normalises at sampling time with the latest statistics) the reference runs with
rltui's: ReLU, observations as they come.

1. Env steps and gradient steps per second at the reference's configuration (the run
   shortened to --dqn-env-steps / --sac-env-steps): rltui's trainer through its session (as
   `rltui launch --no-ui` runs it) and the reference, each in a process of its own, in the
   order session, reference, session, so that drift in machine load falls on both sides.
   Both processes are set up as rltui sets up its own (XLA's vector width and worker pool
   for that configuration): trainer code against trainer code. Per process: env steps per
   second (median of --repeats, after --warmup untimed rounds, compile excluded), gradient
   steps per second, CPU seconds per million env steps (getrusage, every thread) and
   compile time. No evaluation on either side.

2. Time to the target return, whole processes: `rltui launch --no-ui` with the same keys,
   an evaluation of 128 episodes at the reference's cadence and `stop_at_eval_return`,
   against the reference's process as its script runs (plain `import jax`, jit the whole
   training, run, print) with its own evaluation: for SAC rejax's (the sampled policy, 128
   episodes every 100 env steps), for DQN a greedy test of 128 envs every twentieth of the
   run (PureJaxRL's script has none). The reference cannot stop early: its whole process is
   what a user waits for; the table also gives the time at which it first reached the
   target, estimated as start-up, compile and its training time pro rata to the updates
   before that evaluation. Pair i runs seed i on both sides; the first pair is cold (rltui's
   compile cache empty), the later warm.

    python benchmarks/offpolicy_throughput.py [--algos dqn sac] [--only table|solve]
        [--dqn-env-steps 1e5] [--sac-env-steps 1e4] [--repeats 2] [--warmup 1] [--pairs 2]
        [--dqn-target 475] [--sac-target -200]
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
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

ENVS = {"dqn": "CartPole-v1", "sac": "Pendulum-v1"}
# Episodes per evaluation on each side of the time to the target: rejax's and purejaxql's 128.
EVAL_EPISODES = 128
# DQN's tests per run: PureJaxRL's script tests nothing; a twentieth, as purejaxql's PQN.
DQN_TESTS_PER_RUN = 20
# A bound no gradient norm reaches: the references clip nothing.
NO_CLIP = 1e30


def reference_module(algo: str):
    import reference_dqn
    import reference_sac

    return {"dqn": reference_dqn, "sac": reference_sac}[algo]


def reference_defaults(algo: str) -> dict:
    """The reference's configuration: its `make_train`'s keyword defaults."""
    parameters = inspect.signature(reference_module(algo).make_train).parameters
    return {name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty}


def rltui_values(algo: str, total_timesteps: float | None = None) -> dict:
    """rltui's configuration keys for the reference's configuration (its run shortened to
    `total_timesteps` if given)."""
    ref = reference_defaults(algo)
    total = float(total_timesteps or ref["total_timesteps"])
    common = {"algo": algo, "env": ENVS[algo], "num_steps": 1, "num_envs": ref["num_envs"], "gamma": ref["gamma"],
              "buffer_size": ref["buffer_size"], "batch_size": ref["batch_size"], "lr": ref["lr"],
              "anneal_lr": False, "max_grad_norm": NO_CLIP, "hidden_sizes": list(ref["hidden_sizes"]),
              "total_timesteps": int(total), "normalize_obs": False, "normalize_rewards": False,
              "reward_scale": 1.0}
    if algo == "dqn":
        # The reference learns once its env steps exceed learning_starts (rltui once its
        # buffer holds that many: one update earlier), on every training_interval-th env
        # step, and moves the target every target_update_interval env steps: in gradient
        # steps, every interval / training_interval.
        return {**common, "activation": "relu", "eps_start": ref["eps_start"], "eps_end": ref["eps_end"],
                "eps_decay": min(1.0, ref["eps_anneal_time"] / total), "double_q": False,
                "learning_starts": float(ref["learning_starts"]),
                "replay_ratio": 1.0 / ref["training_interval"], "tau": ref["tau"],
                "target_period": float(ref["target_update_interval"] // ref["training_interval"])}
    # rejax learns once its env steps exceed fill_buffer (rltui, as for DQN, one update
    # earlier), num_epochs gradient steps per step of the envs, and moves the target
    # critics Polyak-wise every step.
    return {**common, "activation": "relu", "learning_starts": float(ref["fill_buffer"]),
            "replay_ratio": ref["num_epochs"] / ref["num_envs"], "tau": round(1.0 - ref["polyak"], 9),
            "target_period": 1.0, "autotune": True}


def rltui_config(algo: str, total_timesteps: float | None = None):
    from rltui.config.build import build_config

    return build_config(rltui_values(algo, total_timesteps))


def reference_settings(config) -> dict:
    """The reference's `make_train` keywords for rltui's `config` (its evaluation aside)."""
    if config.network != "mlp" or config.anneal_lr or config.normalize_rewards or config.reward_scale != 1.0:
        raise SystemExit("the references take an MLP, a constant lr and rewards as they come")
    clip = math.inf if config.max_grad_norm >= NO_CLIP else None
    common = dict(num_envs=config.num_envs, buffer_size=config.buffer_size, batch_size=config.batch_size,
                  total_timesteps=float(config.total_timesteps), lr=config.lr, gamma=config.gamma,
                  hidden_sizes=tuple(config.hidden_sizes))
    if config.algo == "dqn":
        if clip is None or config.double_q or config.activation != "relu":
            raise SystemExit("PureJaxRL's DQN clips nothing, takes no double Q and uses ReLU")
        interval = round(1.0 / config.replay_ratio)
        return {**common, "eps_start": config.eps_start, "eps_end": config.eps_end,
                "eps_anneal_time": config.eps_decay * config.total_timesteps,
                "target_update_interval": round(config.target_period) * interval,
                "learning_starts": int(config.learning_starts), "training_interval": interval,
                "tau": config.tau}
    if not config.autotune or config.target_period != 1.0:
        raise SystemExit("rejax's SAC learns its temperature and moves its targets every step")
    return {**common, "fill_buffer": int(config.learning_starts),
            "num_epochs": round(config.replay_ratio * config.num_envs), "polyak": 1.0 - config.tau,
            "max_grad_norm": clip if clip is not None else config.max_grad_norm, "activation": config.activation,
            "normalize_observations": config.normalize_obs}


def settings_left_unmatched(algo: str) -> dict:
    """Reference settings the comparison runs otherwise than the reference's own
    configuration: {name: (the reference's, the comparison's)}."""
    ours = reference_settings(rltui_config(algo))

    def differs(theirs, here) -> bool:
        if isinstance(theirs, (int, float)) and not isinstance(theirs, bool):
            return not math.isclose(theirs, here)
        return theirs != here

    return {name: (value, ours[name]) for name, value in reference_defaults(algo).items()
            if name in ours and differs(value, ours[name])}


# --- 1. env steps and gradient steps per second ------------------------------------------
def measure_one(args) -> None:
    """One side of the table for one algorithm, in this process; prints a RESULT line."""
    from rltui.infra import runtime

    algo = args.algo
    env_steps = args.dqn_env_steps if algo == "dqn" else args.sac_env_steps
    probe = rltui_config(algo)
    updates = max(MIN_UPDATES, int(env_steps // probe.steps_per_update))
    config = rltui_config(algo, updates * probe.steps_per_update)
    runtime.configure_jax(host_devices=1, compile_cache=False)
    workers = runtime.start_backend(runtime.resolve_cpu_threads(config))
    import jax

    from rltui.session import TrainingSession
    from trainers.envs import make_env

    static, hp = config.static_config(), config.dynamic_hparams()
    steps = updates * config.steps_per_update
    result = {"workers": workers, "updates": updates}
    gradient_steps = []
    if args.measure == "session":
        class GradientSteps:
            def on_state(self, state, message):
                pass

            def on_event(self, event):
                pass

            def on_metrics(self, snapshot):
                counts = snapshot.history.get("gradient_steps", ())
                if counts:
                    gradient_steps.append(int(counts[-1]))

        backend = timed_backend(static, jax.local_devices()[:1])

        def run() -> tuple[float, float]:
            session = TrainingSession(backend, hp, updates)
            session.add_listener(GradientSteps())
            return run_session(session, cpu_seconds)
    else:
        started = time.perf_counter()
        settings = reference_settings(config)
        if algo == "sac":
            settings["evaluate"] = False
        train = jax.jit(reference_module(algo).make_train(make_env(config.env), **settings))
        train = train.lower(jax.random.PRNGKey(0)).compile()
        result["compile_seconds"] = time.perf_counter() - started

        def run() -> tuple[float, float]:
            wall, cpu = time.perf_counter(), cpu_seconds()
            out = jax.block_until_ready(train(jax.random.PRNGKey(0)))
            gradient_steps.append(int(out["gradient_steps"]))
            return time.perf_counter() - wall, cpu_seconds() - cpu

    result.update(timed_runs(run, steps, args.warmup, args.repeats))
    if args.measure == "session":
        result["compile_seconds"] = backend.build_seconds[0]
    result["gradient_steps"] = gradient_steps[-1]
    result["grad_sps"] = result["sps"] * gradient_steps[-1] / steps
    print("RESULT " + json.dumps(result), flush=True)


def table(args) -> None:
    """Session / reference / session processes per algorithm, then the table."""
    rows = []
    for algo in args.algos:
        results = session_reference_session([sys.executable, __file__, "--algo", algo,
                                             "--dqn-env-steps", str(args.dqn_env_steps),
                                             "--sac-env-steps", str(args.sac_env_steps),
                                             "--repeats", str(args.repeats), "--warmup", str(args.warmup)], algo)
        rows.append((algo, results))
    print("\n| algo | env steps | session SPS | reference SPS | ratio (per session process) | session grad steps/s "
          "| reference grad steps/s | grad ratio | CPU s / 1M steps (session, ref) | CPU ratio "
          "| compile s (session, ref) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for algo, results in rows:
        a, b = results["session"], results["reference"][0]
        mean = lambda key: sum(r[key] for r in a) / len(a)
        ratios = ", ".join(f"{r['sps'] / b['sps']:.2f}" for r in a)
        steps = b["updates"] * rltui_config(algo).steps_per_update
        print(f"| {algo} | {steps:,} | {mean('sps') / 1e3:,.2f}k | {b['sps'] / 1e3:,.2f}k "
              f"| {mean('sps') / b['sps']:.2f} ({ratios}) | {mean('grad_sps'):,.0f} | {b['grad_sps']:,.0f} "
              f"| {mean('grad_sps') / b['grad_sps']:.2f} | {mean('cpu_per_million'):.1f}, {b['cpu_per_million']:.1f} "
              f"| {b['cpu_per_million'] / mean('cpu_per_million'):.2f} "
              f"| {mean('compile_seconds'):.1f}, {b['compile_seconds']:.1f} |", flush=True)


# --- 2. time to the target return --------------------------------------------------------
def eval_every_updates(algo: str) -> int:
    """The reference's evaluation cadence in updates (rltui's and the reference's alike)."""
    if algo == "sac":
        ref = reference_defaults("sac")
        return math.ceil(ref["eval_freq"] / ref["num_envs"])
    return max(1, rltui_config("dqn").total_updates // DQN_TESTS_PER_RUN)


def run_rltui(algo: str, cache: Path, runs: Path, seed: int, target: float) -> dict:
    run_dir = Path(tempfile.mkdtemp(dir=runs)) / "run"
    sets = {**rltui_values(algo), "seed": seed, "eval_every_updates": eval_every_updates(algo),
            "eval_episodes": EVAL_EPISODES, "stop_at_eval_return": target}
    command = ["rltui", "launch", "--no-ui", "--no-preset", "--run-dir", str(run_dir),
               *(a for key, value in sets.items() for a in ("--set", f"{key}={json.dumps(value)}"))]
    phases, reached = run_timed_launch(command, run_dir, {**os.environ, "XDG_CACHE_HOME": str(cache)})
    return {**phases, "solved_at": reached["update"] if reached else None,
            "eval_return": reached["data"]["eval_return"] if reached else None}


def run_reference(algo: str, seed: int, target: float) -> dict:
    job = {"algo": algo, "seed": seed, "target": target, "settings": reference_settings(rltui_config(algo))}
    phases, marks = run_marked_process(__file__, job)
    return {**phases, "solved_at": marks["solved_at"], "eval_return": marks["eval_return"]}


def reference_process(job: dict) -> None:
    """The reference's whole process, as its script runs: imports, jit, run, print."""
    import jax
    import numpy as np

    from trainers.envs import make_env

    marks = {"imported": time.time()}
    algo, settings = job["algo"], job["settings"]
    every = eval_every_updates(algo)
    if algo == "dqn":
        settings = {**settings, "test_every": every, "test_envs": EVAL_EPISODES}
    else:
        settings = {**settings, "eval_episodes": EVAL_EPISODES}
    key = jax.random.PRNGKey(job["seed"])
    train = jax.jit(reference_module(algo).make_train(make_env(ENVS[algo]), **settings)).lower(key).compile()
    marks["compiled"] = time.time()
    out = jax.device_get(jax.block_until_ready(train(key)))
    marks["trained"] = time.time()
    updates = int(settings["total_timesteps"] // settings["num_envs"])
    if algo == "dqn":
        # One entry per update, each the latest test's: the tests are every `every`-th.
        tests = np.asarray(out["test_returns"])[every - 1::every]
    else:
        tests = np.asarray(out["eval_returns"])[1:]  # the first is before training
    solved = np.flatnonzero(tests >= job["target"])
    marks["updates"] = updates
    marks["solved_at"] = int(solved[0] + 1) * every if solved.size else None
    marks["eval_return"] = float(tests[solved[0]]) if solved.size else float(tests[-1])
    print(json.dumps(marks), flush=True)


def solve(args) -> None:
    phases = ("total", "start_up", "compile", "training", "teardown")
    with tempfile.TemporaryDirectory(prefix="rltui-offpolicy-solve-") as scratch:
        for algo in args.algos:
            target = args.dqn_target if algo == "dqn" else args.sac_target
            print(f"\n{algo}: time to an evaluation return of {target:g} ({EVAL_EPISODES} episodes every "
                  f"{eval_every_updates(algo)} updates), seconds:")
            print(f"| run | seed | {' | '.join(phases)} | to the solving evaluation | solved at update "
                  "| eval return |")
            print("|---" * (len(phases) + 5) + "|")
            cache, runs = Path(scratch) / algo / "cache", Path(scratch) / algo / "runs"
            runs.mkdir(parents=True)
            for seed in range(args.pairs):
                label = "cold" if seed == 0 else "warm"
                ours = run_rltui(algo, cache, runs, seed, target)
                theirs = run_reference(algo, seed, target)
                for name, result in ((f"rltui {label}", ours), ("reference", theirs)):
                    reached = result["solved_at"] is not None
                    to_solve = result.get("to_solve", result["total"] if name.startswith("rltui") and reached else None)
                    cells = [f"{result[p]:.1f}" for p in phases]
                    returned = result["eval_return"]
                    print(f"| {name} | {seed} | {' | '.join(cells)} | {'-' if to_solve is None else f'{to_solve:.1f}'} "
                          f"| {result['solved_at'] or 'not solved'} "
                          f"| {float('nan') if returned is None else returned:.1f} |", flush=True)
                estimate = f"{ours['total'] / theirs['to_solve']:.2f}" if "to_solve" in theirs else "-"
                print(f"| ratio rltui / reference ({label}): whole process {ours['total'] / theirs['total']:.2f}, "
                      f"to the solving evaluation {estimate} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", choices=tuple(ENVS), default=list(ENVS))
    parser.add_argument("--only", choices=("table", "solve"))
    parser.add_argument("--dqn-env-steps", type=float, default=1e5, help="DQN env steps per measurement (1e5)")
    parser.add_argument("--sac-env-steps", type=float, default=1e4, help="SAC env steps per measurement (1e4)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds before the timed ones (default 1)")
    parser.add_argument("--pairs", type=int, default=2, help="time-to-target pairs; the first is cold (default 2)")
    parser.add_argument("--dqn-target", type=float, default=475.0, help="DQN's greedy test return that counts")
    parser.add_argument("--sac-target", type=float, default=-200.0, help="SAC's evaluation return that counts")
    parser.add_argument("--measure", choices=("session", "reference"), help=argparse.SUPPRESS)
    parser.add_argument("--algo", choices=tuple(ENVS), help=argparse.SUPPRESS)
    parser.add_argument("--reference-process", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure_one(args)
    elif args.reference_process:
        reference_process(json.loads(args.reference_process))
    else:
        print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
        for algo in args.algos:
            print(f"{algo}: reference settings run otherwise than its configuration "
                  f"(its, here): {settings_left_unmatched(algo) or 'none'}", flush=True)
        if args.only != "solve":
            table(args)
        if args.only != "table":
            solve(args)
        print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
