"""Evaluation during training: the current policy, greedy, on environments of its own.

The session calls an `Evaluator` at chunk boundaries (every `eval_every_updates`). The
evaluation reads the training state and never writes it, and draws its keys from a stream
of its own (the run's seed folded with a constant, then with the update evaluated), so the
training trajectory is the same with evaluation on or off, and an evaluation of update N
is the same whether the run went there in one go or through a resume.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple, Protocol

from rltui.session.recent import Recent, is_builtin_env

# Folded into the run's PRNGKey(seed) to give evaluation a key stream of its own: training
# splits PRNGKey(seed) and never folds this value in.
EVAL_STREAM = 0x45564131


@dataclasses.dataclass(frozen=True)
class EvaluationPolicy:
    """When to evaluate and what to do with the result (the run's eval_* keys)."""

    every_updates: int = 0  # 0: off
    episodes: int = 16
    stop_at_return: float | None = None  # stop the run once an evaluation's mean return reaches this

    @property
    def enabled(self) -> bool:
        return self.every_updates > 0

    def next_due(self, update: int) -> int:
        """The first update after `update` that is a multiple of `every_updates`."""
        return (update // self.every_updates + 1) * self.every_updates

    def reached(self, mean_return: float) -> bool:
        return self.stop_at_return is not None and math.isfinite(mean_return) and mean_return >= self.stop_at_return


class EvalResult(NamedTuple):
    """One evaluation: the mean and spread of the episodes' returns, over every agent's
    episodes; with several seeds, each agent's mean return as well."""

    mean: float
    std: float
    per_seed: tuple[float, ...] = ()
    per_seed_std: tuple[float, ...] = ()


class Evaluator(Protocol):
    def compile(self) -> None:
        """Compile the evaluation program (called while the session is compiling)."""

    def evaluate(self, update: int) -> EvalResult:
        """Evaluate the backend's current policy; `update` selects the episodes' keys."""


def summarize(returns: Any) -> EvalResult:
    """Returns of shape (episodes,) or (seeds, episodes) as an EvalResult."""
    import numpy as np

    returns = np.asarray(returns, dtype=np.float64)
    if returns.ndim == 1:
        return EvalResult(float(returns.mean()), float(returns.std()))
    return EvalResult(
        float(returns.mean()),
        float(returns.std()),
        tuple(float(v) for v in returns.mean(axis=1)),
        tuple(float(v) for v in returns.std(axis=1)),
    )


# Evaluation programs compiled in this process, as `backend._TRAINERS` keeps trainers.
_PROGRAMS = Recent(keep=2)


class JaxEvaluator:
    """Greedy episodes of the policy in a `JaxBackend`'s state, one env per episode, on the
    first device (every device holds the same parameters)."""

    def __init__(self, backend: Any, episodes: int, seed: int):
        import jax

        from trainers.algorithms import make_trainer
        from trainers.evaluate import evaluate

        self._backend = backend
        self._episodes = episodes
        trainer = make_trainer(backend.static, 1)
        initial_hidden = trainer.initial_hidden(episodes)

        def run(acting, key):
            return evaluate(acting, key, spec=trainer.spec, step_fn=trainer.act_step, initial_hidden=initial_hidden,
                            episodes=episodes, greedy=True)

        if backend.static.num_agents > 1:  # every agent on the same episodes
            run = jax.vmap(run, in_axes=(0, None))
        self._jit = jax.jit(run)
        self._compiled = None
        self._base_key = jax.random.fold_in(jax.random.PRNGKey(seed), EVAL_STREAM)

    def _acting(self):
        import jax

        state = self._backend.train_state
        # One replica: the leading axis is the device axis.
        return jax.tree.map(lambda x: x[0], (state.params, state.obs_stats))

    def compile(self) -> None:
        import jax

        def make():
            return self._jit.lower(self._acting(), jax.random.fold_in(self._base_key, 0)).compile()

        static = self._backend.static
        if not is_builtin_env(static.env_id):
            self._compiled = make()
            return
        # The program depends on the config and the episode count alone (the seed's key is an
        # argument): another session's evaluator on the same config takes it as it is.
        self._compiled = _PROGRAMS.get_or_make((static, self._episodes, tuple(self._backend.devices[:1])), make)

    def evaluate(self, update: int) -> EvalResult:
        import jax

        if self._compiled is None:
            self.compile()
        key = jax.random.fold_in(self._base_key, update)
        # Fetched before the next chunk runs: that chunk donates the state's buffers.
        return summarize(jax.device_get(self._compiled(self._acting(), key)))
