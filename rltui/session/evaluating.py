"""Evaluation during training (`SessionEvaluation`, which the session holds): compiling the
evaluator, evaluating on the updates due, keeping the best policy as
checkpoints/best.msgpack, and stopping at `stop_at_eval_return`.

Everything here runs on the session thread.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rltui.runfiles.checkpoints import CheckpointStore
from rltui.session.backend import NonFiniteState, TrainingBackend
from rltui.session.distributed import BoundarySync
from rltui.session.evaluation import EvalResult, EvaluationPolicy, Evaluator
from rltui.session.progress import TrainingProgress
from rltui.session.reporter import SessionReporter
from trainers.metrics_spec import EVAL_RETURN, EVAL_RETURN_STD


class SessionEvaluation:
    def __init__(
        self,
        policy: EvaluationPolicy | None,
        evaluator: Evaluator | None,
        *,
        backend: TrainingBackend,
        progress: TrainingProgress,
        reporter: SessionReporter,
        sync: BoundarySync,
        store: CheckpointStore | None,
        metadata: Callable[[str], dict],
    ):
        # Off without an evaluator, or in a multi-process run (`prepare`).
        self._policy = policy if policy is not None and evaluator is not None else EvaluationPolicy()
        self._evaluator = evaluator
        self._backend = backend  # encodes the best policy's checkpoint
        self._progress = progress
        self._reporter = reporter
        self._sync = sync
        self._store = store  # where the best policy goes (checkpoints/best.msgpack); None: nowhere
        self._metadata = metadata  # a checkpoint's metadata, by the reason it is written
        self.best_return: float | None = None  # of checkpoints/best.msgpack, once there is one
        self.target_reached = False  # stop_at_eval_return was reached

    @property
    def enabled(self) -> bool:
        return self._policy.enabled

    def next_due(self, update: int) -> int:
        """The next update after `update` that is evaluated (evaluation enabled)."""
        return self._policy.next_due(update)

    def prepare(self) -> None:
        if not self._policy.enabled:
            return
        if self._sync.distributed:
            self._policy = EvaluationPolicy()
            self._reporter.event("warning", "evaluation during training is off in a multi-process run")
            return
        self._evaluator.compile()
        if self._store is not None and hasattr(self._store, "best_score"):
            try:
                self.best_return = self._store.best_score()
            except (OSError, ValueError) as err:
                self._reporter.event("warning", f"{err}; the next evaluation's policy replaces it")

    def evaluate_if_due(self, update: int) -> EvalResult | None:
        if not self._policy.enabled or update % self._policy.every_updates:
            return None
        return self._evaluator.evaluate(update)

    def after(self, result: EvalResult) -> bool:
        """Keep the policy as the best if it is; True when the run's target is reached."""
        best = self.best_return
        if math.isfinite(result.mean) and (best is None or result.mean > best):
            self._save_best(result)
        if self._policy.reached(result.mean):
            self.target_reached = True
            self._reporter.event(
                "target_reached",
                f"evaluation return {result.mean:.4g} reached stop_at_eval_return "
                f"{self._policy.stop_at_return:g}: stopping",
                eval_return=result.mean,
                target=self._policy.stop_at_return,
            )
            return True
        return False

    def _save_best(self, result: EvalResult) -> None:
        if self._store is None or not hasattr(self._store, "save_best"):
            return
        from trainers.checkpoint import CheckpointError  # here: importing the session must not load JAX

        metadata = self._metadata("best")
        metadata[EVAL_RETURN] = result.mean
        metadata[EVAL_RETURN_STD] = result.std
        try:
            data = self._backend.encode_checkpoint(metadata)
            path = self._store.save_best(data, result.mean)
        except NonFiniteState:
            return
        except (OSError, CheckpointError) as err:  # CheckpointError: a state too large to write
            reason = (err.strerror if isinstance(err, OSError) else None) or err
            update = self._progress.updates_done
            self._reporter.event("warning", f"best checkpoint of update {update} failed ({reason})")
            return
        if path is None:  # another process has written a better one since
            return
        previous = self.best_return
        self.best_return = result.mean
        than = "" if previous is None else f" (previous best {previous:.4g})"
        self._reporter.event("best", f"saved {path.name}: evaluation return {result.mean:.4g}{than}", path=str(path),
                             eval_return=result.mean, previous=previous)
