"""Env steps per second on CartPole-v1, three ways, in one run:

  (a) session  training through TrainingSession + JaxBackend, as `rltui launch --no-ui` runs it
  (b) scan     the same number of updates as one jitted `lax.scan`, returning the same
               per-update metrics: no session, no chunking
  (c) rollout  env step + policy forward only (no learning)
  (d) reference  the same PPO written as single-file pure-JAX trainers write it
               (benchmarks/reference_ppo.py), same env, network and hyperparameters:
               the yardstick for "as fast as the best pure-JAX trainers", measured here

Each env count runs in a process of its own, started with XLA's CPU worker pool sized as
`rltui launch` sizes it for that config (`cpu_threads = 0`, automatic; `--cpu-threads N`
fixes it): the pool is per process, and the launcher's choice differs by batch size.
Each figure excludes compilation and is the median of --repeats runs, after --warmup untimed
rounds (a first execution pays one-off costs, buffers and threads, that a long run amortises,
and it would fall on whichever measure runs first); (a)/(b) is the
session's overhead (target >= 0.97); (b)/(d) is rltui's trainer against the reference, and
(a)/(d) rltui as `--no-ui` runs it against the reference.
On a shared machine speed swings by tens of percent within seconds, in wall and in CPU
time alike, so (a)/(b) is noisy; the share of the session's wall time spent outside its
compiled chunks (host work: commands, records, listeners) is the figure load hardly moves.

    python benchmarks/throughput.py [--envs 4 64] [--env-steps 1e6] [--repeats 3] [--warmup 1] [--devices 1]
                                    [--cpu-threads N]

`--table` prints the scaling table instead: for each env count (default 4 16 64 256 1024
4096), the session (as `rltui launch --no-ui` runs it) and the reference twice, each in a
process of its own, in the order session, reference, reference as users run it, session
(drift in machine load over the four falls on both sides alike). "reference" runs in a
process set up as rltui sets up its own (XLA's vector width and worker pool): trainer code
against trainer code. "reference as users run it" is a plain `import jax`, XLA's defaults,
as single-file trainers are run. Per process: env steps per second (median of --repeats),
CPU seconds per million env steps (getrusage: every thread of the process, user and
system), peak resident memory (the process's high-water mark, compile included) and
compile time (the session's build: init and compile; the reference's jit compile).
The session's figures are the mean of its two processes; the ratio is session / reference in
env steps per second, and the CPU ratio the reference's CPU time per env step over the
session's (the figure that load moves least: on a shared machine the wall-clock ratio can
swing by tens of percent between two processes).

    python benchmarks/throughput.py --table [--envs ...] [--env-steps 1e6] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Updates per measurement at least, so that the largest batches are not one call, which
# XLA compiles without its loop.
MIN_UPDATES = 4


def timed(run):
    """(wall seconds, process CPU seconds, result) of `run()`, waited for until its result is ready."""
    import jax

    wall, cpu = time.perf_counter(), time.process_time()
    result = jax.block_until_ready(run())
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[4, 64])
    parser.add_argument("--steps", type=int, default=128)
    parser.add_argument("--env-steps", type=float, default=1e6, help="env steps per measurement (default 1e6)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds before the timed ones (default 1)")
    parser.add_argument("--devices", type=int, default=1, help="host devices to split envs over")
    parser.add_argument("--cpu-threads", type=int, default=0,
                        help="XLA CPU worker threads; 0 (default): as `rltui launch` chooses for the config")
    parser.add_argument("--table", action="store_true", help="the scaling table (A-B-C-A processes per env count)")
    parser.add_argument("--measure", choices=("session", "reference", "plain-reference"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.table:
        table(args)
        return
    if args.measure:
        measure_one(args)
        return
    if len(args.envs) > 1:
        for num_envs in args.envs:
            # the same options; the last --envs wins
            if subprocess.run([sys.executable, __file__, *sys.argv[1:], "--envs", str(num_envs)]).returncode:
                sys.exit(1)
        return

    from rltui.config.build import RunConfig
    from rltui.infra import runtime

    runtime.configure_jax(host_devices=args.devices, compile_cache=False)
    launch_config = RunConfig(num_envs=args.envs[0], num_steps=args.steps, devices=args.devices,
                              cpu_threads=args.cpu_threads)
    cpus = runtime.start_backend(runtime.resolve_cpu_threads(launch_config))
    import jax
    import numpy as np
    import reference_ppo
    from harness import fmt, repeat

    from rltui.session import TrainingSession
    from rltui.session.backend import JaxBackend
    from trainers.algorithms.ppo.trainer import AXIS, make_trainer
    from trainers.hparams import DynamicHParams, StaticConfig
    from trainers.parallel import DataParallel
    from trainers.rollout import rollout

    class TimedBackend(JaxBackend):
        """Adds up the wall time spent inside compiled chunks (dispatch and fetch included)."""

        inside = 0.0

        def run_chunk(self, num_updates, hparams):
            start = time.perf_counter()
            try:
                return super().run_chunk(num_updates, hparams)
            finally:
                self.inside += time.perf_counter() - start

    devices = jax.local_devices()[: args.devices]
    print(f"jax {jax.__version__}, {len(devices)} {devices[0].platform} device(s), {os.cpu_count()} cores, "
          f"XLA CPU worker threads: {cpus}" + (" (as rltui launch chooses)" if not args.cpu_threads else ""))
    for num_envs in args.envs:
        static = StaticConfig(env_id="CartPole-v1", num_envs=num_envs, num_steps=args.steps)
        updates = max(MIN_UPDATES, int(args.env_steps // static.steps_per_update))
        steps = updates * static.steps_per_update
        hp = DynamicHParams.create(anneal_updates=updates)

        # (a) the session, as the headless CLI drives it (compile excluded: timed from the
        # 'compiled' event to the end of the run)
        backend = TimedBackend(static, seed=0, devices=devices)
        host_share = []  # per session run: fraction of its wall time outside run_chunk

        def session_seconds() -> tuple[float, float]:
            backend.inside = 0.0
            wall, cpu = run_session(TrainingSession(backend, hp, updates), time.process_time)
            host_share.append(1.0 - backend.inside / wall)
            return wall, cpu

        # (b) one jitted scan over all updates
        trainer = make_trainer(static, len(devices))
        parallel = DataParallel(trainer, devices)

        def all_updates(state, hp):
            def body(carry, _):
                # Every metric, as a chunk returns them: a scan returning only one lets XLA drop
                # the others' reductions, about 10% of an update at 64 envs, and would not be
                # the same work.
                return trainer.update(carry, hp)
            return jax.lax.scan(body, state, None, length=updates)

        scan_fn = jax.pmap(all_updates, axis_name=AXIS, in_axes=(0, None), devices=devices)
        state0 = parallel.init(jax.random.PRNGKey(0), hp)
        jax.block_until_ready(scan_fn.lower(state0, hp).compile())

        def scan_seconds() -> tuple[float, float]:
            state = parallel.init(jax.random.PRNGKey(0), hp)
            jax.block_until_ready(state)
            return timed(lambda: scan_fn(state, hp))[:2]

        # (c) rollout only
        def rollouts(state):
            def body(carry, _):
                env_state, obs, key = carry
                env_state, obs, key, traj = rollout(
                    state.params, env_state, obs, key, trainer._env_ids(), num_global_envs=num_envs,
                    spec=trainer.spec, apply_fn=trainer.apply, num_steps=static.num_steps,
                )
                # consume every field so nothing is optimised away
                return (env_state, obs, key), sum(jax.numpy.sum(x.astype(np.float32)) for x in jax.tree.leaves(traj))
            return jax.lax.scan(body, (state.env_state, state.obs, state.key), None, length=updates)[1]

        rollout_fn = jax.pmap(rollouts, axis_name=AXIS, devices=devices)
        jax.block_until_ready(rollout_fn(state0))

        def rollout_seconds() -> tuple[float, float]:
            return timed(lambda: rollout_fn(state0))[:2]

        # (d) the reference PPO, jitted whole on one device (it has no device axis)
        reference = None
        if len(devices) == 1:
            reference = jax.jit(reference_ppo.make_train(trainer.spec, num_envs, args.steps, updates))
            reference = reference.lower(jax.random.PRNGKey(0)).compile()

        reference_returns = []

        def reference_seconds() -> tuple[float, float]:
            wall, cpu_seconds, returns = timed(lambda: reference(jax.random.PRNGKey(0)))
            reference_returns.append(float(np.nanmean(np.asarray(returns["returns"])[-10:])))
            return wall, cpu_seconds

        # interleaved, reference right after scan, so drift in machine load hits both alike
        measures = {"session": session_seconds, "scan": scan_seconds}
        if reference is not None:
            measures["reference"] = reference_seconds
        measures["rollout"] = rollout_seconds
        results = {name: [] for name in measures}  # env steps per wall second
        cpu = {name: [] for name in measures}  # env steps per process CPU-second
        for _ in range(args.warmup):
            for measure in measures.values():
                measure()
        host_share.clear()
        reference_returns.clear()
        for _ in range(args.repeats):
            for name, measure in measures.items():
                wall_seconds, cpu_seconds = measure()
                results[name].append(steps / wall_seconds)
                cpu[name].append(steps / cpu_seconds)
        stats = {name: repeat(iter(values).__next__, len(values)) for name, values in results.items()}
        ratios = [a / b for a, b in zip(results["session"], results["scan"])]
        print(f"\nCartPole-v1, {num_envs} envs x {args.steps} steps, {updates} updates ({steps:,} env steps):")
        print(f"  (a) session    {fmt(stats['session'], ' SPS')}")
        print(f"  (b) scan       {fmt(stats['scan'], ' SPS')}")
        print(f"  (c) rollout    {fmt(stats['rollout'], ' SPS')}")
        print(f"  (a)/(b) median {np.median(ratios):.3f}  (per run: {', '.join(f'{r:.3f}' for r in ratios)})")
        print(
            f"  session host work {100 * np.median(host_share):.2f}% of its wall time"
            " (the rest is inside compiled chunks)"
        )
        if reference is not None:
            versus = [b / d for b, d in zip(results["scan"], results["reference"])]
            print(f"  (d) reference  {fmt(stats['reference'], ' SPS')}  (its return, last 10 updates: "
                  f"{reference_returns[-1]:.1f})")
            print(f"  (b)/(d) median {np.median(versus):.3f}  (per run: {', '.join(f'{r:.3f}' for r in versus)})")
            # what a user gets: rltui as `--no-ui` runs it, against the reference trainer
            overall = [a / d for a, d in zip(results["session"], results["reference"])]
            print(f"  (a)/(d) median {np.median(overall):.3f}  (per run: {', '.join(f'{r:.3f}' for r in overall)})")
        per_cpu = ", ".join(f"{name} {np.median(cpu[name]):,.0f}" for name in measures)
        print(f"  env steps per CPU-second: {per_cpu} ({os.cpu_count()} cores)")


TABLE_ENVS = [4, 16, 64, 256, 1024, 4096]


def table(args) -> None:
    """Runs session / reference / plain reference / session processes per env count and prints the table."""
    envs = args.envs if "--envs" in sys.argv else TABLE_ENVS
    rows = []
    for num_envs in envs:
        results = {"session": [], "reference": [], "plain-reference": []}
        for which in ("session", "reference", "plain-reference", "session"):
            command = [sys.executable, __file__, "--measure", which, "--envs", str(num_envs), "--steps",
                       str(args.steps), "--env-steps", str(args.env_steps), "--repeats", str(args.repeats),
                       "--warmup", str(args.warmup), "--cpu-threads", str(args.cpu_threads)]
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if done.returncode or not lines:
                sys.exit(f"{which} at {num_envs} envs failed:\n{done.stderr[-2000:]}")
            result = json.loads(lines[-1][len("RESULT "):])
            result["process_seconds"] = time.perf_counter() - started
            results[which].append(result)
            print(f"  {num_envs} envs {which}: {json.dumps(result)}", flush=True)
        rows.append((num_envs, results))
    print_table(rows)


def print_table(rows: list[tuple[int, dict[str, list[dict]]]]) -> None:
    """The markdown table: per env count, the results of the session's two processes and each reference's one."""
    print("\n| envs | session SPS | reference SPS (rltui's XLA settings, XLA's defaults) | ratio (per session process) "
          "| ratio to the reference as users run it | CPU s / 1M steps (session, ref) | CPU ratio "
          "| peak RSS MiB (session, ref) | compile s (session, ref) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for num_envs, results in rows:
        a, b, plain = results["session"], results["reference"][0], results["plain-reference"][0]
        mean = lambda key: sum(r[key] for r in a) / len(a)
        ratios = ", ".join(f"{r['sps'] / b['sps']:.2f}" for r in a)
        print(f"| {num_envs} | {mean('sps') / 1e3:,.0f}k | {b['sps'] / 1e3:,.0f}k, {plain['sps'] / 1e3:,.0f}k "
              f"| {mean('sps') / b['sps']:.2f} ({ratios}) | {mean('sps') / plain['sps']:.2f} "
              f"| {mean('cpu_per_million'):.2f}, {b['cpu_per_million']:.2f} "
              f"| {b['cpu_per_million'] / mean('cpu_per_million'):.2f} "
              f"| {mean('peak_rss_mib'):,.0f}, {b['peak_rss_mib']:,.0f} | {mean('compile_seconds'):.1f}, "
              f"{b['compile_seconds']:.1f} |")


def run_session(session, cpu_clock) -> tuple[float, float]:
    """Run `session` to its end; the (wall, CPU) seconds from its `compiled` event to its
    `finished` event: training alone, compile excluded."""
    marks = {}

    class Clock:
        def on_state(self, state, message):
            pass

        def on_metrics(self, snapshot):
            pass

        def on_event(self, event):
            if event.kind in ("compiled", "finished"):
                marks[event.kind] = (time.perf_counter(), cpu_clock())

    session.add_listener(Clock())
    session.start()
    session.join()
    assert session.error is None, session.error
    (wall0, cpu0), (wall1, cpu1) = marks["compiled"], marks["finished"]
    return wall1 - wall0, cpu1 - cpu0


def timed_runs(run, steps: int, warmup: int, repeats: int) -> dict[str, float]:
    """`run() -> (wall seconds, CPU seconds)` of `steps` env steps, after `warmup` untimed
    rounds: the median env steps per second and CPU seconds per million steps of `repeats`
    rounds, and the process's peak memory."""
    for _ in range(warmup):
        run()
    measured = [run() for _ in range(repeats)]
    return {
        "sps": statistics.median(steps / wall for wall, _ in measured),
        "cpu_per_million": statistics.median(cpu for _, cpu in measured) / steps * 1e6,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure_one(args) -> None:
    """One side of the table at one env count, in this process; prints a RESULT line."""

    from rltui.config.build import RunConfig
    from rltui.infra import runtime

    num_envs = args.envs[0]
    if args.measure == "plain-reference":  # as a single-file trainer runs: XLA's defaults
        import jax

        jax.devices()  # the backend starts here, as in the other processes
        workers = os.cpu_count()
    else:
        runtime.configure_jax(host_devices=1, compile_cache=False)
        workers = runtime.start_backend(runtime.resolve_cpu_threads(
            RunConfig(num_envs=num_envs, num_steps=args.steps, cpu_threads=args.cpu_threads)))
    import jax
    import reference_ppo

    from rltui.session import TrainingSession
    from trainers.envs import make_env
    from trainers.hparams import DynamicHParams, StaticConfig

    static = StaticConfig(env_id="CartPole-v1", num_envs=num_envs, num_steps=args.steps)
    updates = max(MIN_UPDATES, int(args.env_steps // static.steps_per_update))
    steps = updates * static.steps_per_update
    hp = DynamicHParams.create(anneal_updates=updates)
    result = {"workers": workers}
    if args.measure == "session":
        from harness import timed_backend

        backend = timed_backend(static, jax.local_devices()[:1])

        def run() -> tuple[float, float]:
            return run_session(TrainingSession(backend, hp, updates), cpu_seconds)
    else:
        started = time.perf_counter()
        spec = make_env("CartPole-v1")
        train = jax.jit(reference_ppo.make_train(spec, num_envs, args.steps, updates))
        train = train.lower(jax.random.PRNGKey(0)).compile()
        result["compile_seconds"] = time.perf_counter() - started

        def run() -> tuple[float, float]:
            wall, cpu = time.perf_counter(), cpu_seconds()
            jax.block_until_ready(train(jax.random.PRNGKey(0)))
            return time.perf_counter() - wall, cpu_seconds() - cpu

    result.update(timed_runs(run, steps, args.warmup, args.repeats))
    if args.measure == "session":
        result["compile_seconds"] = backend.build_seconds[0]
    result["updates"] = updates
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
