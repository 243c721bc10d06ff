"""A population's throughput and memory against one member's, on CartPole-v1, in one run.

Each configuration trains in a process of its own (XLA's CPU worker pool sized as `rltui
launch` sizes it, and peak memory measured alone), A-B-A: one member, then the population,
then one member again, so the ratio compares neighbours in time on a shared machine.

  total SPS     env steps per second over every agent (members x seeds x envs)
  per agent     total SPS / agents
  peak RSS      the process's peak resident memory (compile included)
  estimate      rltui.config.memory's estimate for the population (what launch checks)

Compile excluded; each figure the median of --repeats timed chunks of --updates updates.

    python benchmarks/population.py [--pairs 4:1:8 64:1:16] [--updates 40] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def measure(num_envs: int, members: int, updates: int, repeats: int) -> dict:
    from rltui.config.build import build_config
    from rltui.infra import runtime

    sweep = {"lr": [float(x) for x in (2.5e-4 * 1.1 ** i for i in range(members))]} if members > 1 else {}
    config = build_config({"num_envs": num_envs, "sweep": sweep})
    runtime.configure_jax(host_devices=1, compile_cache=False)
    threads = runtime.start_backend(runtime.resolve_cpu_threads(config))
    import jax
    import numpy as np

    from rltui.assembly import make_population
    from rltui.config.memory import estimate_agent_bytes
    from trainers.envs import make_env
    from trainers.parallel import build

    static = dataclasses.replace(config.static_config(), max_chunk_updates=updates)
    parallel = build(static, jax.local_devices()[:1])
    base = config.dynamic_hparams()
    population = make_population(config, base)
    hp = population.trainer_hparams() if population is not None else base
    state = parallel.init(parallel.seed_keys(0), hp)
    active = np.ones(static.num_agents, bool) if population is not None else None
    state, _ = parallel.run_chunk(state, hp, updates, active)  # compile and warm up
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        state, metrics = parallel.run_chunk(state, hp, updates, active)
        jax.block_until_ready(state)
        seconds.append(time.perf_counter() - start)
    steps = updates * static.steps_per_update * static.num_agents
    sps = steps / statistics.median(seconds)
    return {
        "envs": num_envs, "members": members, "agents": static.num_agents, "threads": threads,
        "total_sps": sps, "per_agent_sps": sps / static.num_agents,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "estimate_mib": static.num_agents * estimate_agent_bytes(static, make_env(static.env_id)) / 2**20,
    }


def run_child(num_envs: int, members: int, args) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", f"{num_envs}:{members}", "--updates", str(args.updates),
         "--repeats", str(args.repeats)], capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", nargs="+", default=["4:1:8", "64:1:16"],
                        help="ENVS:1:MEMBERS: one member against MEMBERS members at ENVS envs each")
    parser.add_argument("--updates", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        envs, members = map(int, args.child.split(":"))
        print(json.dumps(measure(envs, members, args.updates, args.repeats)))
        return
    print(f"{'envs':>5} {'members':>7} {'threads':>7} {'total SPS':>12} {'per agent':>13} {'peak RSS':>10} "
          f"{'estimate':>9}")
    for pair in args.pairs:
        envs, _, members = map(int, pair.split(":"))
        a1, b, a2 = run_child(envs, 1, args), run_child(envs, members, args), run_child(envs, 1, args)
        for row in (a1, b, a2):
            print(f"{row['envs']:>5} {row['members']:>7} {row['threads']:>7} {row['total_sps']:>12,.0f} "
                  f"{row['per_agent_sps']:>13,.0f} {row['peak_rss_mib']:>8,.0f}Mi {row['estimate_mib']:>7,.1f}Mi")
        one = statistics.mean([a1["total_sps"], a2["total_sps"]])
        print(f"  {members} members x {envs} envs: {b['total_sps'] / one:.2f}x one member's env steps per second "
              f"(each agent at {b['per_agent_sps'] / one:.2f}x)")


if __name__ == "__main__":
    main()
