"""Actor-critic networks (flax linen) and the action distributions they parameterise.

Linen modules are pure `init`/`apply` functions over a params pytree, which is what
scan/vmap/pmap compose with directly; NNX's stateful objects would need split/merge at
every transform boundary for no gain here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu}


class PolicyOutputs(NamedTuple):
    """What both networks compute for observations with any leading axes. A NamedTuple is
    a pytree, so it passes through jit, vmap and scan as the three arrays it holds."""

    policy_out: jax.Array  # logits (discrete) or the Gaussian mean (continuous)
    log_std: jax.Array  # (num_actions,) or per row (_gaussian_log_std); discrete: an unused scalar
    value: jax.Array


def _float32(x: jax.Array) -> jax.Array:
    """bfloat16 outputs back to float32; other dtypes as they are (float64 in gradient checks)."""
    return x.astype(jnp.float32) if x.dtype == jnp.bfloat16 else x


_MIN_STD = 1e-3  # a state-dependent standard deviation never collapses below this


def _gaussian_log_std(module: nn.Module, raw: jax.Array | None, mode: str, init: float, num_actions: int) -> jax.Array:
    """Log standard deviation of the Gaussian policy. "param": one learned value per action
    dimension, shape (num_actions,). "state": softplus of the head's extra outputs `raw`
    plus a floor, shape (..., num_actions), starting near exp(init)."""
    if mode == "param":
        return module.param("log_std", nn.initializers.constant(init), (num_actions,))
    offset = math.log(math.expm1(max(math.exp(init) - _MIN_STD, 1e-6)))  # softplus(offset) + floor = exp(init)
    return jnp.log(nn.softplus(raw + offset) + _MIN_STD)


def _patches3x3(image: jax.Array) -> jax.Array:
    """(..., H, W, C) -> (..., H, W, 9C): each pixel's 3x3 neighbourhood (zero padded), so
    that a Dense layer on it is a 3x3 "same" convolution. XLA's CPU convolution (its
    gradient especially) is several times slower than a matmul doing the same arithmetic
    (docs/benchmarks.md)."""
    h, w = image.shape[-3], image.shape[-2]
    pad = [(0, 0)] * (image.ndim - 3) + [(1, 1), (1, 1), (0, 0)]
    padded = jnp.pad(image, pad)
    shifted = [padded[..., i : i + h, j : j + w, :] for i in range(3) for j in range(3)]
    return jnp.concatenate(shifted, axis=-1)


def _rows(x: jax.Array) -> tuple[jax.Array, tuple[int, ...]]:
    """(..., F) -> (N, F) and the leading shape to give back. XLA's CPU backend runs Dense
    layers and their gradients far slower on a (time, env, F) batch than on the same rows
    as (time * env, F) (docs/benchmarks.md). So the networks see rows, and their outputs
    get the leading axes back."""
    return x.reshape((-1, x.shape[-1])), x.shape[:-1]


def _unrows(x: jax.Array, lead: tuple[int, ...]) -> jax.Array:
    return x.reshape(lead + x.shape[1:])


def _dense(features: int, scale: float, dtype) -> nn.Dense:
    # `dtype` is the computation dtype; params stay float32 (param_dtype's default), so
    # the optimizer and its state never see bfloat16.
    return nn.Dense(
        features, kernel_init=nn.initializers.orthogonal(scale), bias_init=nn.initializers.zeros, dtype=dtype
    )


class ActorCritic(nn.Module):
    """Separate policy and value towers. Discrete: outputs logits. Continuous: outputs the
    Gaussian mean and its log standard deviation (`log_std_mode`, see _gaussian_log_std).

    With `image_shape` (H, W, C) the flat observations are images: one shared 3x3
    convolution (CONV_FEATURES channels, ReLU) feeds both towers, as in MinAtar's baselines.

    `dtype=jnp.bfloat16` runs the matmuls and activations in bfloat16; the outputs are cast
    back to float32, so distributions, losses and gradients accumulate in float32."""

    num_actions: int
    discrete: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    dtype: Any = None  # None: computed in the inputs' dtype
    log_std_mode: str = "param"
    log_std_init: float = 0.0
    image_shape: tuple[int, ...] | None = None

    CONV_FEATURES = 16

    @nn.compact
    def __call__(self, obs: jax.Array) -> PolicyOutputs:
        act = _ACTIVATIONS[self.activation]
        obs, lead = _rows(obs)
        if self.image_shape is not None:
            image = obs.reshape(obs.shape[:-1] + tuple(self.image_shape))
            conv = _dense(self.CONV_FEATURES, math.sqrt(2), self.dtype)
            pixels, _ = _rows(_patches3x3(image))  # one row per pixel, as for the towers
            obs = nn.relu(conv(pixels)).reshape(obs.shape[:-1] + (-1,))
        x = obs
        for size in self.hidden_sizes:
            x = act(_dense(size, math.sqrt(2), self.dtype)(x))
        state_std = not self.discrete and self.log_std_mode == "state"
        head = _float32(_dense(self.num_actions * (2 if state_std else 1), 0.01, self.dtype)(x))
        policy_out, raw_std = (
            (head[..., : self.num_actions], head[..., self.num_actions :]) if state_std else (head, None)
        )
        if self.discrete:
            log_std = jnp.zeros(())  # unused
        else:
            log_std = _gaussian_log_std(self, raw_std, self.log_std_mode, self.log_std_init, self.num_actions)
        v = obs
        for size in self.hidden_sizes:
            v = act(_dense(size, math.sqrt(2), self.dtype)(v))
        value = _float32(_dense(1, 1.0, self.dtype)(v)[..., 0])
        if state_std:  # one per row; a "param" log_std has no row axis
            log_std = _unrows(log_std, lead)
        return PolicyOutputs(_unrows(policy_out, lead), log_std, _unrows(value, lead))


class QNetwork(nn.Module):
    """Action values Q(s, .) for discrete actions: Dense layers of `hidden_sizes`, each
    followed by LayerNorm (`norm = "layer_norm"`, as PQN's networks) and the activation,
    then a linear head with one output per action. With `image_shape` a 3x3 convolution
    comes first, normalised the same way. Returns `PolicyOutputs` so that acting,
    evaluation and watching treat it as the other networks: `policy_out` holds the
    Q-values (their argmax is the greedy action) and `value` their maximum, V(s)."""

    num_actions: int
    hidden_sizes: Sequence[int] = (128, 128)
    activation: str = "relu"
    norm: str = "layer_norm"
    dtype: Any = None
    image_shape: tuple[int, ...] | None = None

    def _normalized(self, x: jax.Array) -> jax.Array:
        # LayerNorm statistics in float32 whatever the matmuls' dtype.
        return nn.LayerNorm(dtype=jnp.float32)(x) if self.norm == "layer_norm" else x

    @nn.compact
    def __call__(self, obs: jax.Array) -> PolicyOutputs:
        act = _ACTIVATIONS[self.activation]
        x, lead = _rows(obs)
        if self.image_shape is not None:
            image = x.reshape(x.shape[:-1] + tuple(self.image_shape))
            conv = _dense(ActorCritic.CONV_FEATURES, math.sqrt(2), self.dtype)
            pixels, _ = _rows(_patches3x3(image))
            x = act(self._normalized(conv(pixels))).reshape(x.shape[:-1] + (-1,))
        for size in self.hidden_sizes:
            x = act(self._normalized(_dense(size, math.sqrt(2), self.dtype)(x)))
        q = _float32(_dense(self.num_actions, 1.0, self.dtype)(x))
        return PolicyOutputs(_unrows(q, lead), jnp.zeros(()), _unrows(jnp.max(q, axis=-1), lead))


def matmul_dtype(precision: str):
    """The matmuls' dtype of a `precision` setting: bfloat16 for "bf16", else float32's default."""
    return jnp.bfloat16 if precision == "bf16" else None


def q_network(static: Any, spec: Any, *, norm: str) -> QNetwork:
    """The Q-network of a static configuration and env: its layers, activation and precision,
    a convolution first on image observations (`network = "cnn"`)."""
    return QNetwork(
        num_actions=spec.num_actions,
        hidden_sizes=tuple(static.hidden_sizes),
        activation=static.activation,
        norm=norm,
        dtype=matmul_dtype(static.precision),
        image_shape=spec.obs_shape if static.network == "cnn" else None,
    )


class SquashedGaussianActorCritic(nn.Module):
    """SAC's networks in one module: a Gaussian actor over pre-squash actions u (its mean
    and a state-dependent log standard deviation, bounded to [LOG_STD_MIN, LOG_STD_MAX]),
    twin critics Q_i(s, tanh(u)) on the squashed action in [-1, 1], and the learned entropy
    temperature `log_alpha`. The env receives tanh(u) scaled to its bounds
    (`rollout.env_action` with `EnvSpec.squash_actions`). `__call__` returns `PolicyOutputs`
    so that acting, evaluation and export treat it as the other networks: `policy_out` is
    the mean of u (its tanh, scaled, is the greedy action) and `value` is min_i Q_i of the
    greedy action."""

    num_actions: int
    hidden_sizes: Sequence[int] = (256, 256)
    activation: str = "relu"
    dtype: Any = None

    LOG_STD_MIN = -5.0
    LOG_STD_MAX = 2.0
    NUM_CRITICS = 2

    def setup(self):
        self.actor_layers = [_dense(size, math.sqrt(2), self.dtype) for size in self.hidden_sizes]
        self.actor_head = _dense(2 * self.num_actions, 0.01, self.dtype)
        self.critic_layers = [[_dense(size, math.sqrt(2), self.dtype) for size in self.hidden_sizes]
                              for _ in range(self.NUM_CRITICS)]
        self.critic_heads = [_dense(1, 1.0, self.dtype) for _ in range(self.NUM_CRITICS)]
        self.log_alpha = self.param("log_alpha", nn.initializers.zeros, ())

    def actor(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(mean, log_std) of u, each (..., num_actions)."""
        act = _ACTIVATIONS[self.activation]
        x, lead = _rows(obs)
        for layer in self.actor_layers:
            x = act(layer(x))
        head = _float32(self.actor_head(x))
        mean, raw = head[..., : self.num_actions], head[..., self.num_actions :]
        # tanh keeps the bound differentiable everywhere, unlike a clip.
        span = self.LOG_STD_MAX - self.LOG_STD_MIN
        log_std = self.LOG_STD_MIN + 0.5 * span * (jnp.tanh(raw) + 1.0)
        return _unrows(mean, lead), _unrows(log_std, lead)

    def q_values(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        """Each critic's Q(s, a) for squashed actions `action` in [-1, 1]: (critics, ...)."""
        act = _ACTIVATIONS[self.activation]
        x, lead = _rows(jnp.concatenate([obs, action.astype(obs.dtype)], axis=-1))
        values = []
        for layers, head in zip(self.critic_layers, self.critic_heads):
            q = x
            for layer in layers:
                q = act(layer(q))
            values.append(_unrows(_float32(head(q))[..., 0], lead))
        return jnp.stack(values)

    def __call__(self, obs: jax.Array) -> PolicyOutputs:
        mean, log_std = self.actor(obs)
        value = jnp.min(self.q_values(obs, jnp.tanh(mean)), axis=0)
        return PolicyOutputs(mean, log_std, value)


def epsilon_greedy_logits(q: jax.Array, epsilon: jax.Array) -> jax.Array:
    """Logits of the epsilon-greedy distribution over Q-values `q` (..., actions): the
    greedy action has probability 1 - epsilon + epsilon / actions, every other action
    epsilon / actions. Sampling them (`action_from_noise`'s Gumbel-max) is epsilon-greedy
    exploration, with `epsilon` a traced value."""
    num_actions = q.shape[-1]
    greedy = jax.nn.one_hot(jnp.argmax(q, axis=-1), num_actions, dtype=jnp.float32)
    probs = epsilon / num_actions + (1.0 - epsilon) * greedy
    return jnp.log(probs)


class RecurrentActorCritic(nn.Module):
    """obs -> Dense(hidden_sizes[0]) -> GRU cell of the same width -> separate policy and
    value towers over `hidden_sizes[1:]` -> heads.

    `__call__` is one time step, `(hidden, obs) -> (hidden, PolicyOutputs)`.
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
    log_std_mode: str = "param"
    log_std_init: float = 0.0

    @property
    def hidden_size(self) -> int:
        return self.hidden_sizes[0]

    def setup(self):
        self.embed = _dense(self.hidden_size, math.sqrt(2), self.dtype)
        self.cell = nn.GRUCell(features=self.hidden_size)
        self.actor = [_dense(size, math.sqrt(2), self.dtype) for size in self.hidden_sizes[1:]]
        self.policy_head = _dense(self.num_actions * (2 if self._state_std else 1), 0.01, self.dtype)
        self.critic = [_dense(size, math.sqrt(2), self.dtype) for size in self.hidden_sizes[1:]]
        self.value_head = _dense(1, 1.0, self.dtype)
        if not self.discrete and not self._state_std:
            self.log_std = self.param("log_std", nn.initializers.constant(self.log_std_init), (self.num_actions,))

    @property
    def _state_std(self) -> bool:
        return not self.discrete and self.log_std_mode == "state"

    def encode(self, obs: jax.Array) -> jax.Array:
        obs, lead = _rows(obs)
        return _unrows(_float32(_ACTIVATIONS[self.activation](self.embed(obs))), lead)

    def recur(self, hidden: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return self.cell(hidden, x)

    def heads(self, y: jax.Array) -> PolicyOutputs:
        act = _ACTIVATIONS[self.activation]
        y, lead = _rows(y)
        pi, v = y, y
        for layer in self.actor:
            pi = act(layer(pi))
        for layer in self.critic:
            v = act(layer(v))
        head = _float32(self.policy_head(pi))
        value = _unrows(_float32(self.value_head(v)[..., 0]), lead)
        if self.discrete:
            return PolicyOutputs(_unrows(head, lead), jnp.zeros(()), value)  # log_std unused
        if self._state_std:
            policy_out = head[..., : self.num_actions]
            log_std = _gaussian_log_std(
                self, head[..., self.num_actions :], "state", self.log_std_init, self.num_actions
            )
            log_std = _unrows(log_std, lead)
        else:
            policy_out, log_std = head, self.log_std
        return PolicyOutputs(_unrows(policy_out, lead), log_std, value)

    def __call__(self, hidden: jax.Array, obs: jax.Array) -> tuple[jax.Array, PolicyOutputs]:
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
    # log_std is (action,) for a state-independent std, or shaped like policy_out
    per_dim = jnp.broadcast_to(log_std + 0.5 * (1.0 + _LOG_2PI), policy_out.shape)
    return jnp.sum(per_dim, axis=-1)


def squashed(action: jax.Array, low, high) -> jax.Array:
    """tanh(`action`) scaled from [-1, 1] to [`low`, `high`]: what the env receives of a
    squashed Gaussian's action (SAC's)."""
    return low + 0.5 * (jnp.tanh(action) + 1.0) * (high - low)


def greedy_action(policy_out: jax.Array, discrete: bool) -> jax.Array:
    return jnp.argmax(policy_out, axis=-1) if discrete else policy_out
