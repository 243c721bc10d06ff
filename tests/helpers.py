"""Shared test utilities."""

from __future__ import annotations

import contextlib

import jax
import jax.monitoring
import numpy as np

from trainers.hparams import EDITABLE_HPARAMS, DynamicHParams, StaticConfig, hparam_rule
from trainers.parallel import build as parallel_build

TINY = dict(num_envs=2, num_steps=8, num_minibatches=2, update_epochs=1, hidden_sizes=(16,), max_chunk_updates=8)


class CompileCounter:
    """Counts the programs compiled while active: by XLA, or loaded from the persistent
    compilation cache (the suite shares one, tests/conftest.py), which a compile in another
    process filled. Either way the program was not one this process already held."""

    def __init__(self):
        self.count = 0

    def _compiled(self, event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            self.count += 1

    def _loaded(self, event, **kwargs):
        if event == "/jax/compilation_cache/cache_hits":
            self.count += 1


@contextlib.contextmanager
def count_compiles():
    counter = CompileCounter()
    jax.monitoring.register_event_duration_secs_listener(counter._compiled)
    jax.monitoring.register_event_listener(counter._loaded)
    try:
        yield counter
    finally:
        jax.monitoring.unregister_event_duration_listener(counter._compiled)
        jax.monitoring.unregister_event_listener(counter._loaded)


_PARALLEL_CACHE: dict = {}


def build(static: StaticConfig, seed: int = 0, hp: DynamicHParams | None = None, devices=None, fresh: bool = False):
    """A DataParallel trainer and its initial state. Trainers are cached per static config
    (compiling is the slow part of these tests) unless `fresh`."""
    devices = devices if devices is not None else jax.local_devices()[:1]
    hp = hp or DynamicHParams.create(anneal_updates=100)
    key = (static, tuple(devices))
    if fresh or key not in _PARALLEL_CACHE:
        _PARALLEL_CACHE[key] = parallel_build(static, devices)
    parallel = _PARALLEL_CACHE[key]
    return parallel, parallel.init(parallel.seed_keys(seed), hp), hp


def host_metrics(metrics):
    host = jax.device_get(metrics)
    n = int(host.num_updates)
    return {k: v[:n] for k, v in vars(host.per_update).items()}


def assert_checkpoint_continues_bit_exactly(parallel, state, hp: DynamicHParams, data: bytes, portable) -> dict:
    """Run `state` 4 updates on, and again from checkpoint `data` (encoded from `portable`,
    the same state's host copy), restored and placed without compiling anything new: every
    metric of every update equal. Bit-exact on the same machine only: both continuations run
    one compiled program in this process. Returns the resumed run's metrics."""
    from trainers import checkpoint

    state, straight = parallel.run_chunk(state, hp, 4)
    with count_compiles() as compiles:
        restored, _ = checkpoint.decode(data, portable)
        placed = parallel.put(checkpoint.from_portable(restored, 1), like=state)
        _, resumed = parallel.run_chunk(placed, hp, 4)
        jax.block_until_ready(resumed)
    assert compiles.count == 0
    resumed = host_metrics(resumed)
    for key, values in host_metrics(straight).items():
        np.testing.assert_array_equal(values, resumed[key], err_msg=key)
    return resumed


def chunk_before_and_after(static: StaticConfig, hp: DynamicHParams, updates: int = 8, seed: int = 2):
    """One chunk of `updates` updates from a fresh state: its metrics, and the state before
    and after it (host copies): (metrics, before, after)."""
    from trainers import checkpoint

    parallel, state, hp = build(static, seed=seed, hp=hp)
    before = checkpoint.to_portable(state)
    state, metrics = parallel.run_chunk(state, hp, updates)
    return host_metrics(metrics), before, checkpoint.to_portable(state)


def train_returns(static: StaticConfig, updates: int, seed: int, hp: DynamicHParams) -> np.ndarray:
    """Mean episode return of each of `updates` updates, run in chunks of max_chunk_updates."""
    return train_run(static, updates, seed, hp)[2]


def train_run(static: StaticConfig, updates: int, seed: int, hp: DynamicHParams):
    """`train_returns`, also returning the trainer and its final state: (parallel, state, returns)."""
    parallel, state, hp = build(static, seed=seed, hp=hp)
    returns, done = [], 0
    while done < updates:
        count = min(static.max_chunk_updates, updates - done)
        state, metrics = parallel.run_chunk(state, hp, count)
        returns.extend(host_metrics(metrics)["episode_return"].tolist())
        done += count
    return parallel, state, np.array(returns)


def edit_every_hparam(hp: DynamicHParams):
    """`hp` after each editable hyperparameter is changed in turn, yielded after each edit:
    a number halved, a switch flipped."""
    for name in EDITABLE_HPARAMS:
        value = float(getattr(hp, name))
        hp = hp.with_updates({name: 1.0 - value if hparam_rule(name) == "0 or 1" else value * 0.5})
        yield hp
