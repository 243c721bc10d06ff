"""How much device memory a population needs, estimated before compiling, and a refusal of
one that does not fit.

The estimate counts, per agent, in float32 (4 bytes):

* replicated on every device: the parameters P (counted by `jax.eval_shape` of the
  network's init, nothing allocated) x 6: params, gradients, Adam's two moments, the
  update, and the flat copy the optimizer works on; plus the chunk's metrics buffer
  (max_chunk_updates x 32 values);
* split over the devices with the environments: the env states (from `jax.eval_shape` of
  the env's reset) and observations, twice (before and after a step); the rollout buffer,
  num_steps x num_envs x (2 x obs_size + 7 + action size (+ the GRU's hidden state)), twice
  (the rollout, and the shuffled copy the minibatches are cut from); and the activations
  of one minibatch's forward and backward pass, rows x 2 towers x sum(hidden_sizes) x 3.

The sum is multiplied by SAFETY for what the count leaves out (XLA's temporaries and
fusion buffers, padding, the allocator's fragmentation): the estimate errs high, so a
refusal means the population would not fit, not that it might be tight.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rltui.errors import UsageError

FLOAT = 4  # bytes: everything the trainer keeps is float32 (or int32/uint32 of the same size)
SAFETY = 2.0
_METRICS_PER_UPDATE = 32  # values a chunk's metrics buffer holds per update, with room to spare
_GIB = 2**30


class AgentFootprint(NamedTuple):
    """One agent's bytes (before SAFETY): `replicated` on every device, `split` over the
    devices with the environments."""

    replicated: int
    split: int


def agent_footprint(static: Any, spec: Any) -> AgentFootprint:
    """One agent of `static` (a StaticConfig) on `spec` (an EnvSpec), counted as the module
    says; shapes by `jax.eval_shape`, so nothing is allocated or compiled."""
    import jax
    import jax.numpy as jnp

    from trainers.base import OnPolicyTrainer

    trainer = OnPolicyTrainer(static, spec)
    obs = jnp.zeros((1, spec.obs_size), jnp.float32)

    def init_params(key):
        if trainer.recurrent:
            return trainer.network.init(key, trainer.initial_hidden(1), obs)
        return trainer.network.init(key, obs)

    key = jax.random.PRNGKey(0)
    params = sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(jax.eval_shape(init_params, key)))
    _, env_state = jax.eval_shape(spec.env.reset, key, spec.params)
    env_bytes = sum(math.prod(leaf.shape) * leaf.dtype.itemsize for leaf in jax.tree.leaves(env_state))

    steps = static.num_envs * static.num_steps
    action = 1 if spec.discrete else spec.num_actions
    hidden = static.hidden_sizes[0] if trainer.recurrent else 0
    per_step = 2 * spec.obs_size + 7 + action + hidden
    rows = steps // static.num_minibatches if static.algo == "ppo" else steps
    activations = rows * 2 * sum(static.hidden_sizes) * 3
    replicated = 6 * params * FLOAT + static.max_chunk_updates * _METRICS_PER_UPDATE * FLOAT
    split = (
        2 * static.num_envs * (env_bytes + spec.obs_size * FLOAT)
        + 2 * steps * per_step * FLOAT
        + activations * FLOAT
    )
    return AgentFootprint(replicated=replicated, split=split)


def estimate_agent_bytes(static: Any, spec: Any) -> int:
    """The bytes one agent needs on one device during a chunk, SAFETY included."""
    footprint = agent_footprint(static, spec)
    return math.ceil(SAFETY * (footprint.replicated + footprint.split))


def device_free_bytes(device: Any) -> int | None:
    """Memory free for `device`, or None when unknown: for a CPU device, the host's
    available memory (MemAvailable in /proc/meminfo, else free pages); for an accelerator,
    its allocator's limit less what is in use."""
    if device.platform == "cpu":
        return host_available_bytes()
    stats = device.memory_stats() or {}
    if "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


def host_available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # the file counts kB
    except (OSError, ValueError, IndexError):
        pass  # not Linux, or unreadable: the page counts below
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def check_population_fits(
    static: Any, spec: Any, devices: Sequence[Any], *, free_bytes: Callable[[Any], int | None] = device_free_bytes
) -> None:
    """UsageError (one line, exit 2) when the population of `static` (num_members x
    num_seeds agents) needs more memory than `free_bytes` reports free, before anything is
    compiled. CPU devices share the host's memory, so their needs add up against it once;
    each accelerator is compared with its own free memory. An unknown free memory passes."""
    footprint = agent_footprint(static, spec)
    agents = static.num_members * static.num_seeds
    count = max(1, len(devices))
    per_device = SAFETY * agents * (footprint.replicated + footprint.split / count)
    cpus = [device for device in devices if device.platform == "cpu"]
    checks = [(cpus[0], per_device * len(cpus), "cpu")] if cpus else []
    checks += [
        (device, per_device, f"{device.platform} {device.id}") for device in devices if device.platform != "cpu"
    ]
    for device, need, where in checks:
        free = free_bytes(device)
        if free is not None and need > free:
            noun = "agent" if agents == 1 else "agents"
            raise UsageError(
                f"population of {agents:,} {noun} needs about {_gib(need)} GiB, more than the "
                f"{_gib(max(free, 0))} GiB free on {where}; lower sweep_size, num_seeds or num_envs"
            )


def _gib(count: float) -> str:
    return f"{count / _GIB:.3g}"
