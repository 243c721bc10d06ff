"""Memory matters: PPO with an MLP against PPO with a GRU on CartPole-v1-pomdp (cart
position and pole angle only; the velocities are masked out of the observation).

    python benchmarks/pomdp_cartpole.py [--steps 80000] [--seeds 0 1 2 3] [--networks mlp gru]
                                        [--num-envs 8] [--lr 2e-3] ...

For each network and seed: the mean episode return of the first and last 10 updates, the
best 10 in a row, the mean greedy return of 16 evaluation episodes at the end, and the wall
time of training (compile excluded, reported apart). The defaults are the configuration of
tests/trainers/test_learning.py's GRU test (8 envs x 64 steps, 4 minibatches, 4 epochs, lr 2e-3
annealed, hidden_sizes 64 64).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(network: str, steps: int, seed: int, static_kwargs: dict, hparams: dict) -> dict:
    import jax
    import numpy as np

    from trainers.algorithms import make_trainer
    from trainers.evaluate import evaluate
    from trainers.hparams import DynamicHParams, StaticConfig
    from trainers.parallel import DataParallel

    static = StaticConfig(env_id="CartPole-v1-pomdp", network=network, **static_kwargs)
    updates = steps // static.steps_per_update
    hp = DynamicHParams.create(anneal_updates=updates, **hparams)
    parallel = DataParallel(make_trainer(static, 1), jax.local_devices()[:1])
    state = parallel.init(jax.random.PRNGKey(seed), hp)
    start = time.perf_counter()
    parallel.compile(state, hp)
    compiled = time.perf_counter()
    returns, done = [], 0
    while done < updates:
        count = min(static.max_chunk_updates, updates - done)
        state, metrics = parallel.run_chunk(state, hp, count)
        returns.extend(np.asarray(metrics.per_update.episode_return[:count]).tolist())
        done += count
    end = time.perf_counter()
    returns = np.array(returns)
    trainer, params = parallel.trainer, parallel.unreplicate(state.params)
    greedy = jax.jit(lambda key: evaluate(params, key, spec=trainer.spec, step_fn=trainer.policy_step,
                                          initial_hidden=trainer.initial_hidden(16), episodes=16))
    return {
        "first10": float(np.nanmean(returns[:10])),
        "last10": float(np.nanmean(returns[-10:])),
        "best10": float(max(np.nanmean(returns[i : i + 10]) for i in range(max(1, len(returns) - 9)))),
        "greedy": float(np.mean(greedy(jax.random.PRNGKey(7)))),
        "updates": updates,
        "compile_s": compiled - start,
        "train_s": end - compiled,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=80_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--networks", nargs="+", default=["mlp", "gru"])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--num-steps", type=int, default=64)
    parser.add_argument("--num-minibatches", type=int, default=4)
    parser.add_argument("--update-epochs", type=int, default=4)
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--ent-coef", type=float, default=0.01)
    args = parser.parse_args()
    static_kwargs = dict(
        num_envs=args.num_envs, num_steps=args.num_steps, num_minibatches=args.num_minibatches,
        update_epochs=args.update_epochs, hidden_sizes=tuple(args.hidden), max_chunk_updates=128,
    )
    for network in args.networks:
        for seed in args.seeds:
            r = run(network, args.steps, seed, static_kwargs, dict(lr=args.lr, ent_coef=args.ent_coef))
            print(
                f"{network:<4} seed {seed}: return first10 {r['first10']:6.1f}  last10 {r['last10']:6.1f}  "
                f"best10 {r['best10']:6.1f}  greedy {r['greedy']:6.1f}  "
                f"({r['updates']} updates, compile {r['compile_s']:.1f} s, train {r['train_s']:.1f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
