"""The most any implementation could gain over a reference at its own configuration, when
both compute the same network passes with XLA's CPU kernels: the reference's time per
update against the time of the passes its algorithm cannot skip.

For each case, in one process (one XLA worker, as rltui and its benchmarks run these
configurations), in interleaved rounds:

- **reference**: the reference's whole compiled training (`reference_dqn.py`,
  `reference_sac.py`, `reference_pqn.py` at the configurations of
  `offpolicy_throughput.py` and `pqn_throughput.py`), µs per update. DQN learns from its
  first full batch here (its own configuration waits 10,000 env steps), so that every
  update the floor counts is one the reference pays for.
- **floor**: the gradient steps of those updates and nothing else: rows gathered from a
  device array by random indices, rltui's loss for the algorithm (the same passes as the
  reference's: for DQN the online network forward and backward and the target forward;
  for SAC the actor at s' and s, the target and online twin critics, the backward through
  both; for PQN the 2x256 LayerNorm Q-network forward and backward), and an SGD step,
  plus for PQN the rollout's forward passes (one per step of the envs). No env, no buffer
  writes, no exploration, no metrics, no optimizer state.
- **floor + optimizer**: the same with the configuration's optimizer (Adam, or PQN's
  global-norm clip and RAdam) in place of SGD, as optax computes it on the raveled
  parameters.
- **rltui**: rltui's trainer at the same configuration (DQN, like the reference here,
  learning from its first full batch), in chunks as the session runs them, without the
  session.

`ceiling` is the reference's time over a floor's: the largest env steps per second ratio
a program could reach while it computes those passes (and that optimizer) with these
kernels, even if everything else it did took no time; "rltui's ratio" is the reference's
time over rltui's, the same ratio as env steps per second. Figures are CPU µs per update, the
median of --rounds rounds.

    python benchmarks/arithmetic_floor.py [--rounds 5] [--cases dqn sac pqn-4 pqn-16 pqn-64]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

CASES = ("dqn", "sac", "pqn-4", "pqn-16", "pqn-64")
# Updates per timed run of each case: about a second of the reference's training.
UPDATES = {"dqn": 6000, "sac": 2000, "pqn-4": 64, "pqn-16": 32, "pqn-64": 16}


class Case(NamedTuple):
    """What one case times: the reference's jitted training and the floor's gradient step."""

    reference: Any  # jitted train(key)
    loss: Any  # (params, target_params, data, key) -> (loss, aux): one gradient step's arithmetic
    params: Any
    data: Any  # device arrays the loss draws its rows from
    gradient_steps: float  # per update
    config: Any  # rltui's RunConfig for the same configuration
    trainer: Any


def replay_case(algo: str, updates: int) -> Case:
    """DQN or SAC at its reference's configuration."""
    import jax
    import jax.numpy as jnp
    import offpolicy_throughput as off

    from trainers.algorithms import make_trainer
    from trainers.envs import make_env
    from trainers.replay import Replayed

    probe = off.rltui_config(algo)
    config = off.rltui_config(algo, updates * probe.steps_per_update)
    settings = off.reference_settings(config)
    if algo == "dqn":
        settings["learning_starts"] = config.batch_size
    else:
        settings["evaluate"] = False
    reference = jax.jit(off.reference_module(algo).make_train(make_env(config.env), **settings))
    trainer = make_trainer(config.static_config(), 1)
    hp = config.dynamic_hparams()
    rows, obs_size = config.batch_size, trainer.spec.obs_size
    discrete = trainer.spec.discrete

    def stored(key, size):
        keys = jax.random.split(key, 4)
        action = (jax.random.randint(keys[1], (size,), 0, trainer.spec.num_actions) if discrete
                  else jax.random.normal(keys[1], (size, trainer.spec.num_actions)))
        return Replayed(obs=jax.random.normal(keys[0], (size, obs_size)), action=action,
                        reward=jax.random.normal(keys[2], (size,)),
                        next_obs=jax.random.normal(keys[3], (size, obs_size)),
                        terminated=jnp.zeros((size,), bool))

    def loss(params, target, data, key):
        index = jax.random.randint(key, (rows,), 0, config.buffer_size)
        batch = jax.tree.map(lambda x: x[index], data)
        return trainer.loss(params, target, batch, hp, jax.random.fold_in(key, 1))

    params = trainer.network.init(jax.random.PRNGKey(0), jnp.zeros((1, obs_size)))
    data = stored(jax.random.PRNGKey(1), config.buffer_size)
    return Case(reference, loss, params, data, config.replay_ratio * config.steps_per_update, config, trainer)


def pqn_case(num_envs: int, updates: int) -> Case:
    """The same for PQN at `num_envs` envs (64 steps, 16 minibatches, 4 epochs)."""
    import jax
    import jax.numpy as jnp
    import pqn_throughput as pqn
    import reference_pqn

    from trainers.algorithms import make_trainer
    from trainers.algorithms.pqn.trainer import QBatch
    from trainers.envs import make_env

    probe = pqn.pqn_config(num_envs=num_envs)
    config = pqn.pqn_config(num_envs=num_envs, total_timesteps=updates * probe.steps_per_update)
    reference = jax.jit(reference_pqn.make_train(make_env(config.env), num_updates=updates,
                                                 **pqn.reference_settings(config)))
    trainer = make_trainer(config.static_config(), 1)
    envs, steps = config.num_envs, config.num_steps
    per_minibatch = steps // config.num_minibatches
    obs_size = trainer.spec.obs_size

    def loss(params, _target, data, key):
        # A rollout step's forward pass of the envs' rows (as many steps as gradient steps
        # here), kept alive by a term that adds nothing; then the minibatch's loss.
        obs_key, mb_key = jax.random.split(key)
        acting = jnp.max(trainer.apply(params, jax.random.normal(obs_key, (envs, obs_size))).policy_out)
        start = jax.random.randint(mb_key, (), 0, steps - per_minibatch)
        mb = jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, start, per_minibatch), data)
        value, info = trainer._loss(params, mb)
        return value + 0.0 * jax.lax.stop_gradient(acting), info

    params = trainer.network.init(jax.random.PRNGKey(0), jnp.zeros((1, obs_size)))
    data = QBatch(obs=jax.random.normal(jax.random.PRNGKey(1), (steps, envs, obs_size)),
                  action=jax.random.randint(jax.random.PRNGKey(2), (steps, envs), 0, trainer.spec.num_actions),
                  target=jax.random.normal(jax.random.PRNGKey(3), (steps, envs)))
    gradient_steps = config.update_epochs * config.num_minibatches  # = num_steps: one acting pass each
    return Case(reference, loss, params, data, gradient_steps, config, trainer)


def rltui_program(config, updates: int, **hp_values):
    """A function running `updates` of rltui's trainer for `config` from a fresh state."""
    import jax
    import numpy as np

    from trainers import parallel as data_parallel

    static = config.static_config()
    hp = config.dynamic_hparams()._replace(**{k: np.float32(v) for k, v in hp_values.items()})
    parallel = data_parallel.build(static, jax.local_devices()[:1])
    parallel.compile(jax.block_until_ready(parallel.init(parallel.seed_keys(0), hp)), hp)

    def run():
        state, done = jax.block_until_ready(parallel.init(parallel.seed_keys(0), hp)), 0
        while done < updates:
            count = min(static.max_chunk_updates, updates - done)
            state, _ = parallel.run_chunk(state, hp, count)
            done += count
        jax.block_until_ready(state)

    return run


def floor_program(case: Case, count: int, with_optimizer: bool):
    """A compiled function running `count` gradient steps of `case.loss` from its params
    (the target network's too, where the loss reads one)."""
    import jax
    import optax

    from trainers.base import set_injected

    optimizer, loss, data = case.trainer.optimizer, case.loss, case.data
    opt_state = set_injected(optimizer.init(case.params), learning_rate=1e-4, max_grad_norm=10.0)

    def step(i, carry):
        params, opt_state, key = carry
        key, step_key = jax.random.split(key)
        grads, _ = jax.grad(loss, has_aux=True)(params, params, data, step_key)
        if with_optimizer:
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, key
        return jax.tree.map(lambda p, g: p - 1e-4 * g, params, grads), opt_state, key

    program = jax.jit(lambda p, o, k: jax.lax.fori_loop(0, count, step, (p, o, k))[0])
    args = (case.params, opt_state, jax.random.PRNGKey(4))
    compiled = program.lower(*args).compile()
    return lambda: jax.block_until_ready(compiled(*args))


def measure(name: str, rounds: int) -> dict[str, float]:
    """CPU µs per update of each program of case `name`, the median of `rounds` rounds."""
    import jax

    updates = UPDATES[name]
    if name.startswith("pqn-"):
        case = pqn_case(int(name[4:]), updates)
        rltui = rltui_program(case.config, updates)
    else:
        case = replay_case(name, updates)
        # DQN learns from its first full batch, as its reference does here.
        starts = case.config.batch_size if name == "dqn" else case.config.learning_starts
        rltui = rltui_program(case.config, updates, learning_starts=starts)
    count = round(case.gradient_steps * updates)
    reference = case.reference.lower(jax.random.PRNGKey(0)).compile()
    runs = {
        "reference": lambda: jax.block_until_ready(reference(jax.random.PRNGKey(0))),
        "floor": floor_program(case, count, with_optimizer=False),
        "floor + optimizer": floor_program(case, count, with_optimizer=True),
        "rltui": rltui,
    }
    times = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.process_time()
            run()
            times[name].append((time.process_time() - start) / updates * 1e6)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    args = parser.parse_args()
    from rltui.infra import runtime

    runtime.configure_jax(host_devices=1, compile_cache=False)
    runtime.start_backend(1)
    print("| case | reference µs/update | floor µs/update | ceiling | floor + optimizer µs/update | ceiling "
          "| rltui µs/update | rltui's ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for case in args.cases:
        figures = measure(case, args.rounds)
        ref, floor, with_opt = figures["reference"], figures["floor"], figures["floor + optimizer"]
        ours = figures["rltui"]
        print(f"| {case} | {ref:.1f} | {floor:.1f} | {ref / floor:.2f} | {with_opt:.1f} | {ref / with_opt:.2f} "
              f"| {ours:.1f} | {ref / ours:.2f} |", flush=True)


if __name__ == "__main__":
    main()
