"""Evaluation during training (`TrainingSession`'s share of it): compiling the evaluator,
evaluating on the updates due, keeping the best policy as checkpoints/best.msgpack, and
stopping at `stop_at_eval_return`.

A mixin of `TrainingSession`: it runs on the session thread.
"""

from __future__ import annotations

import math

from rltui.session.backend import NonFiniteState
from rltui.session.evaluation import EvalResult, EvaluationPolicy


class EvaluationSteps:
    def _prepare_evaluation(self) -> None:
        if not self._evaluation.enabled:
            return
        if self._sync.distributed:
            self._evaluation = EvaluationPolicy()
            self._event("warning", "evaluation during training is off in a multi-process run")
            return
        self._evaluator.compile()
        if self._checkpoints is not None and hasattr(self._checkpoints, "best_score"):
            try:
                self.best_eval_return = self._checkpoints.best_score()
            except (OSError, ValueError) as err:
                self._event("warning", f"{err}; the next evaluation's policy replaces it")

    def _evaluate_if_due(self, update: int) -> EvalResult | None:
        if not self._evaluation.enabled or update % self._evaluation.every_updates:
            return None
        return self._evaluator.evaluate(update)

    def _after_evaluation(self, result: EvalResult) -> bool:
        """Keep the policy as the best if it is; True when the run's target is reached."""
        best = self.best_eval_return
        if math.isfinite(result.mean) and (best is None or result.mean > best):
            self._save_best(result)
        if self._evaluation.reached(result.mean):
            self.target_reached = True
            self._event(
                "target_reached",
                f"evaluation return {result.mean:.4g} reached stop_at_eval_return "
                f"{self._evaluation.stop_at_return:g}: stopping",
                eval_return=result.mean,
                target=self._evaluation.stop_at_return,
            )
            return True
        return False

    def _save_best(self, result: EvalResult) -> None:
        if self._checkpoints is None or not hasattr(self._checkpoints, "save_best"):
            return
        from trainers.checkpoint import CheckpointError  # here: importing the session must not load JAX

        metadata = self._metadata("best")
        metadata["eval_return"] = result.mean
        metadata["eval_return_std"] = result.std
        try:
            data = self.backend.encode_checkpoint(metadata)
            path = self._checkpoints.save_best(data, result.mean)
        except NonFiniteState:
            return
        except (OSError, CheckpointError) as err:  # CheckpointError: a state too large to write
            reason = (err.strerror if isinstance(err, OSError) else None) or err
            self._event("warning", f"best checkpoint of update {self._updates_done} failed ({reason})")
            return
        if path is None:  # another process has written a better one since
            return
        previous = self.best_eval_return
        self.best_eval_return = result.mean
        than = "" if previous is None else f" (previous best {previous:.4g})"
        self._event("best", f"saved {path.name}: evaluation return {result.mean:.4g}{than}", path=str(path),
                    eval_return=result.mean, previous=previous)
