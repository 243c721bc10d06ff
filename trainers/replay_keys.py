"""What the algorithms that learn from a replay buffer declare alike: the buffer's keys and
metrics, and its size in memory. Each such algorithm lists `REPLAY_KEYS` and
`REPLAY_METRICS` among its own (one declaration read by all of them,
`algorithms.algorithm.placed`); `trainers.replay` is the buffer and the update machinery
behind them. Plain Python: the configuration reads it before JAX starts."""

from __future__ import annotations

import math
from typing import Any

from trainers.keys import INT32_MAX, STATIC, TRACED, IntRange, Key, Number, Switch
from trainers.metric import MetricSpec

REPLAY_KEYS: tuple[Key, ...] = (
    Key("buffer_size", 10_000, "transitions the replay buffer holds per agent, the oldest replaced first (rounded "
        "up to a multiple of num_envs: each env keeps its own share)", IntRange(1, INT32_MAX), STATIC,
        after="update_epochs"),
    Key("batch_size", 128, "transitions sampled from the replay buffer for one gradient step (split evenly over "
        "devices)", IntRange(1, INT32_MAX), STATIC, after="buffer_size"),
    # Static only for where a checkpoint is written: the trainer runs the same program either way.
    Key("replay_in_checkpoint", True, "checkpoints hold the replay buffer, so a resumed run continues exactly; "
        "off, they leave it out (smaller files) and a resumed run refills it before learning again", Switch(),
        STATIC, resumable=True, after="batch_size"),
    Key("learning_starts", 10_000.0, "transitions in the replay buffer (all envs) before gradient steps start (a "
        "full buffer starts them whatever this says)",
        Number(0, float32=True), TRACED, live=True, after="max_grad_norm"),
    Key("replay_ratio", 0.1, "gradient steps per env step (all envs together; fractions carry over between "
        "updates)", Number(0, float32=True), TRACED, live=True, after="learning_starts"),
    Key("tau", 1.0, "target network update: the fraction of the way it moves to the online network (1: a copy)",
        Number(0, 1, low_open=True, float32=True), TRACED, live=True, after="replay_ratio"),
    Key("target_period", 1.0, "gradient steps between target network updates", Number(1, float32=True), TRACED,
        live=True, after="tau"),
)

REPLAY_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("buffer_fill", "replay buffer fill (fraction of buffer_size)", "buffer", fmt=".3g", sparkline=True,
               after="grad_norm", group="loss"),
    MetricSpec("gradient_steps", "gradient steps taken", "grad steps", fmt=",.0f", integer=True,
               after="buffer_fill", group="loss"),
)


def rows_per_env(config: Any) -> int:
    """The transitions each env keeps: `buffer_size` over `num_envs`, rounded up."""
    return math.ceil(config.buffer_size / config.num_envs)


def buffer_bytes(config: Any, obs_size: int, action_size: int, discrete: bool) -> int:
    """One agent's replay buffer in bytes: every row an observation and the observation it
    led to (float32), the action (int32, or float32 per dimension), the reward (float32)
    and whether the episode terminated (one byte)."""
    action = 4 if discrete else 4 * action_size
    per_row = 2 * 4 * obs_size + action + 4 + 1
    return config.num_envs * rows_per_env(config) * per_row


def replay_batch_problem(config: Any, num_devices: int) -> tuple[str, str] | None:
    """The replay rule of every off-policy algorithm: each device samples an equal share of
    `batch_size`, no larger than the buffer; the buffer holds at least one rollout of every
    env. (key, problem) or None."""
    if config.batch_size % num_devices:
        return "batch_size", (f"must be a multiple of the {num_devices} devices it is split over, "
                              f"got {config.batch_size}")
    rollout = config.num_envs * config.num_steps
    if config.buffer_size < rollout:
        return "buffer_size", (f"must hold at least one rollout (num_envs x num_steps = {rollout:,} transitions), "
                               f"got {config.buffer_size:,}")
    if config.batch_size > config.buffer_size:
        return "batch_size", (f"must be at most buffer_size ({config.buffer_size:,}): a batch is drawn from the "
                              f"buffer, got {config.batch_size:,}")
    return None
