"""`jax.random`'s hash as straight-line code on the CPU (`rltui.infra.unrolled_threefry`)
against JAX's own CPU lowering (a five-trip loop), per algorithm, in one process.

Each case's chunk program is built twice: first with JAX's lowering, then, after
`unrolled_threefry.install()`, again. Both start from the same state (after the case's
fill updates, which bring a replay algorithm's buffer to `learning_starts`), and the two
programs run chunks of `--updates` updates in alternation, `--rounds` times; the figure is
the median of the per-round ratios of CPU time (JAX's lowering over the unrolled hash),
so above 1 is faster. The two programs' states after the rounds are compared too: the
hash is the same function, so equal states are expected, though XLA may fuse the float
arithmetic around the draws differently and round differently.

    python benchmarks/threefry_lowering.py [--cases ppo-4 ppo-64 pqn-4 pqn-64 dqn sac ppo-breakout pqn-breakout]
                                           [--rounds 7] [--updates 64]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# name: (rltui keys, updates that fill a replay buffer to its learning start); DQN's and SAC's
# are the reference configurations of benchmarks/offpolicy_throughput.py.
CASES = {
    "ppo-4": ({"algo": "ppo", "num_envs": 4}, 0),
    "ppo-64": ({"algo": "ppo", "num_envs": 64}, 0),
    "pqn-4": ({"algo": "pqn", "num_envs": 4}, 0),
    "pqn-64": ({"algo": "pqn", "num_envs": 64}, 0),
    "ppo-breakout": ({"algo": "ppo", "env": "Breakout-MinAtar"}, 0),
    "pqn-breakout": ({"algo": "pqn", "env": "Breakout-MinAtar"}, 0),
    "dqn": ("dqn", 1000),
    "sac": ("sac", 256),
}


def case_config(name: str):
    from rltui.config.build import build_config

    keys, _ = CASES[name]
    if isinstance(keys, str):
        from offpolicy_throughput import rltui_config

        return rltui_config(keys)
    return build_config(keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--updates", type=int, default=64, help="updates per timed chunk")
    args = parser.parse_args()

    from rltui.infra import runtime, unrolled_threefry

    # Process setup as rltui's, but JAX's own lowering first: installed below, between builds.
    install, unrolled_threefry.install = unrolled_threefry.install, lambda: None
    runtime.configure_jax(host_devices=1, compile_cache=False)
    configs = {name: case_config(name) for name in args.cases}
    workers = {runtime.resolve_cpu_threads(config) for config in configs.values()}
    if len(workers) > 1:
        raise SystemExit(f"the cases need different XLA worker pools ({workers}); run them apart")
    runtime.start_backend(workers.pop())
    import jax
    import numpy as np

    from trainers.parallel import build

    def built(config):
        parallel = build(config.static_config(), jax.local_devices()[:1])
        hp = config.dynamic_hparams()
        parallel.compile(parallel.init(parallel.seed_keys(0), hp), hp)
        return parallel

    before = {name: built(config) for name, config in configs.items()}
    install()
    after = {name: built(config) for name, config in configs.items()}

    print(f"jax {jax.__version__}; CPU time per chunk of {args.updates} updates, median of {args.rounds} rounds")
    print("| case | JAX's lowering ms | rltui's ms | ratio (median of rounds) | states equal |")
    print("|---|---|---|---|---|")
    for name, config in configs.items():
        hp = config.dynamic_hparams()
        fill = CASES[name][1]
        states = {}
        for side, parallel in (("before", before[name]), ("after", after[name])):
            state = parallel.init(parallel.seed_keys(0), hp)
            while fill and int(np.asarray(state.update_idx)[0]) < fill:
                state, _ = parallel.run_chunk(state, hp, min(config.static_config().max_chunk_updates, fill))
            states[side] = state
        seconds = {"before": [], "after": []}
        for _ in range(args.rounds):
            for side, parallel in (("before", before[name]), ("after", after[name])):
                started = time.process_time()
                states[side], _ = parallel.run_chunk(states[side], hp, args.updates)
                jax.block_until_ready(states[side])
                seconds[side].append(time.process_time() - started)
        ratio = statistics.median(b / a for b, a in zip(seconds["before"], seconds["after"]))
        equal = all(np.array_equal(np.asarray(x), np.asarray(y))
                    for x, y in zip(jax.tree.leaves(states["before"]), jax.tree.leaves(states["after"])))
        print(f"| {name} | {statistics.median(seconds['before']) * 1e3:.1f} "
              f"| {statistics.median(seconds['after']) * 1e3:.1f} | {ratio:.3f} | {'yes' if equal else 'NO'} |",
              flush=True)


if __name__ == "__main__":
    main()
