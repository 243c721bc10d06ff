"""Actor-critic networks (flax linen) and the action distributions they parameterise.

Linen modules are pure `init`/`apply` functions over a params pytree, which is what
scan/vmap/pmap compose with directly; NNX's stateful objects would need split/merge at
every transform boundary for no gain here.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu}


def _float32(x: jax.Array) -> jax.Array:
    """bfloat16 outputs back to float32; other dtypes as they are (float64 in gradient checks)."""
    return x.astype(jnp.float32) if x.dtype == jnp.bfloat16 else x


def _dense(features: int, scale: float, dtype) -> nn.Dense:
    # `dtype` is the computation dtype; params stay float32 (param_dtype's default), so
    # the optimizer and its state never see bfloat16.
    return nn.Dense(
        features, kernel_init=nn.initializers.orthogonal(scale), bias_init=nn.initializers.zeros, dtype=dtype
    )


class ActorCritic(nn.Module):
    """Separate policy and value towers. Discrete: outputs logits. Continuous: outputs the
    Gaussian mean and a state-independent learned log standard deviation.

    `dtype=jnp.bfloat16` runs the matmuls and activations in bfloat16; the outputs are cast
    back to float32, so distributions, losses and gradients accumulate in float32."""

    num_actions: int
    discrete: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    dtype: Any = None  # None: computed in the inputs' dtype

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        act = _ACTIVATIONS[self.activation]
        x = obs
        for size in self.hidden_sizes:
            x = act(_dense(size, math.sqrt(2), self.dtype)(x))
        policy_out = _float32(_dense(self.num_actions, 0.01, self.dtype)(x))
        if self.discrete:
            log_std = jnp.zeros(())  # unused
        else:
            log_std = self.param("log_std", nn.initializers.zeros, (self.num_actions,))
        v = obs
        for size in self.hidden_sizes:
            v = act(_dense(size, math.sqrt(2), self.dtype)(v))
        value = _float32(_dense(1, 1.0, self.dtype)(v)[..., 0])
        return policy_out, log_std, value


class RecurrentActorCritic(nn.Module):
    """obs -> Dense(hidden_sizes[0]) -> GRU cell of the same width -> separate policy and
    value towers over `hidden_sizes[1:]` -> heads.

    `__call__` is one time step, `(hidden, obs) -> (hidden, (policy_out, log_std, value))`.
    Its three stages are also methods (`encode`, `recur`, `heads`) so that a replay over
    stored sequences runs only `recur` inside its time scan and the feed-forward parts on
    all steps at once. Any leading batch axes. The caller resets `hidden` to zeros where an
    episode ended (trainers/recurrent.py).

    With `dtype=jnp.bfloat16` the dense layers compute in bfloat16; the GRU cell and its
    carried hidden state stay float32 (a recurrence accumulates rounding step by step), and
    the outputs are float32."""

    num_actions: int
    discrete: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    dtype: Any = None

    @property
    def hidden_size(self) -> int:
        return self.hidden_sizes[0]

    def setup(self):
        self.embed = _dense(self.hidden_size, math.sqrt(2), self.dtype)
        self.cell = nn.GRUCell(features=self.hidden_size)
        self.actor = [_dense(size, math.sqrt(2), self.dtype) for size in self.hidden_sizes[1:]]
        self.policy_head = _dense(self.num_actions, 0.01, self.dtype)
        self.critic = [_dense(size, math.sqrt(2), self.dtype) for size in self.hidden_sizes[1:]]
        self.value_head = _dense(1, 1.0, self.dtype)
        if not self.discrete:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.num_actions,))

    def encode(self, obs: jax.Array) -> jax.Array:
        return _float32(_ACTIVATIONS[self.activation](self.embed(obs)))

    def recur(self, hidden: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return self.cell(hidden, x)

    def heads(self, y: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        act = _ACTIVATIONS[self.activation]
        pi, v = y, y
        for layer in self.actor:
            pi = act(layer(pi))
        for layer in self.critic:
            v = act(layer(v))
        log_std = jnp.zeros(()) if self.discrete else self.log_std  # unused when discrete
        return _float32(self.policy_head(pi)), log_std, _float32(self.value_head(v)[..., 0])

    def __call__(self, hidden: jax.Array, obs: jax.Array):
        hidden, y = self.recur(hidden, self.encode(obs))
        return hidden, self.heads(y)


# --- distributions -------------------------------------------------------------------------
# Small and explicit instead of a dependency: categorical and diagonal Gaussian are all we need.

_LOG_2PI = float(np.log(2 * np.pi))


def sample_action(key: jax.Array, policy_out: jax.Array, log_std: jax.Array, discrete: bool) -> jax.Array:
    if discrete:
        return jax.random.categorical(key, policy_out, axis=-1)
    noise = jax.random.normal(key, policy_out.shape, policy_out.dtype)
    return policy_out + jnp.exp(log_std) * noise


def action_from_noise(noise: jax.Array, policy_out: jax.Array, log_std: jax.Array, discrete: bool) -> jax.Array:
    """A sample given pre-drawn noise: Gumbel-max for the categorical, mean + std * N(0, 1)
    for the Gaussian. Lets a rollout draw all its randomness in one batched call."""
    if discrete:
        return jnp.argmax(policy_out + noise, axis=-1)
    return policy_out + jnp.exp(log_std) * noise


def log_prob(policy_out: jax.Array, log_std: jax.Array, action: jax.Array, discrete: bool) -> jax.Array:
    if discrete:
        logp = jax.nn.log_softmax(policy_out, axis=-1)
        return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), axis=-1)[..., 0]
    z = (action - policy_out) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z**2 - log_std - 0.5 * _LOG_2PI, axis=-1)


def entropy(policy_out: jax.Array, log_std: jax.Array, discrete: bool) -> jax.Array:
    if discrete:
        logp = jax.nn.log_softmax(policy_out, axis=-1)
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)
    per_dim = log_std + 0.5 * (1.0 + _LOG_2PI)
    return jnp.broadcast_to(jnp.sum(per_dim), policy_out.shape[:-1])


def greedy_action(policy_out: jax.Array, discrete: bool) -> jax.Array:
    return jnp.argmax(policy_out, axis=-1) if discrete else policy_out
