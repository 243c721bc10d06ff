"""The session's checkpoints (`TrainingSession`'s share of them): when one is due, saving
with what a failure leaves on disk, the metadata beside the arrays, restoring (resume and
rollback), and the save after an error.

A mixin of `TrainingSession`: it runs on the session thread.
"""

from __future__ import annotations

import dataclasses

from rltui.infra.read_limits import ReadLimitError, read_checkpoint
from rltui.session.backend import NonFiniteState
from rltui.session.checkpoints import checkpoint_metadata, checkpoint_update
from trainers.env_import import one_line


@dataclasses.dataclass(frozen=True)
class CheckpointFailure:
    """Why the latest checkpoint could not be written, and what is on disk instead."""

    reason: str  # e.g. "No space left on device"
    on_disk: str  # e.g. "the latest checkpoint on disk is checkpoint-000000097.msgpack (update 97)"


class CheckpointSteps:
    def _save_after_error(self) -> str:
        """Try to checkpoint the state after the last update that completed (the backend
        replaces its state only when a chunk returns); says what happened, for the error event."""
        if self._checkpoints is None:
            return "checkpoints are off"
        if self._sync.distributed:
            return "no checkpoint: the other processes of the run take no part in it after an error"
        if self.nonfinite or self._updates_done <= self._last_save[0]:
            return "no newer state to save"
        try:
            self._save("error")
        except BaseException as err:  # noqa: BLE001 - the error itself must still be reported
            return f"checkpoint failed ({one_line(err)})"
        if self.checkpoint_failure is not None:
            return f"checkpoint failed ({self.checkpoint_failure.reason}); {self.checkpoint_failure.on_disk}"
        return f"saved {self.last_checkpoint.name}" if self.last_checkpoint else "saved"

    def _checkpoint_due(self) -> bool:
        if self._checkpoints is None:
            return False
        update, when = self._last_save
        by_count = self._policy.every_updates > 0 and self._updates_done - update >= self._policy.every_updates
        wait = self._policy.seconds_between(self._last_write is not None, self._last_write or 0.0)
        by_time = wait is not None and self._clock() - when >= wait
        return by_count or by_time

    def _save(self, reason: str) -> None:
        if self._checkpoints is None:
            self._event("warning", "checkpoints are off for this session")
            return
        if self.nonfinite:
            # Losses or gradients went non-finite: even finite params may be ruined.
            self._event("warning", "checkpoint refused: training diverged; earlier checkpoints kept")
            return
        from trainers.checkpoint import CheckpointError  # here: importing the session must not load JAX

        started = self._clock()
        metadata = self._metadata(reason)
        try:
            data = self.backend.encode_checkpoint(metadata)
        except NonFiniteState:
            self._event("warning", "checkpoint skipped: the training state is not finite; earlier checkpoints kept")
            return
        except CheckpointError as err:  # a state too large for a file rltui can read back
            self._save_failed(str(err))
            return
        try:
            path = self._checkpoints.save(data, self._updates_done)
        except OSError as err:
            self._save_failed(err.strerror or str(err))
            return
        self.checkpoint_failure = None
        self._last_save = (self._updates_done, self._clock())
        self._last_write = self._last_save[1] - started
        if path is None:  # a peer process of a multi-process run: process 0 wrote the file
            return
        self.last_checkpoint = path
        self._event("checkpoint", f"saved {path.name} ({reason})", path=str(path), reason=reason,
                    seconds=round(self._last_write, 4))

    def _save_failed(self, reason: str) -> None:
        self.checkpoint_failure = CheckpointFailure(reason=reason, on_disk=self._on_disk())
        self._event(
            "warning",
            f"checkpoint of update {self._updates_done} failed ({reason}); {self.checkpoint_failure.on_disk}",
        )

    def _metadata(self, reason: str) -> dict:
        metadata = self._base_metadata(reason)
        if self.population is not None:
            metadata["population"] = self.population.to_metadata()
        return metadata

    def _base_metadata(self, reason: str) -> dict:
        return checkpoint_metadata(
            run=self._run_metadata,
            backend=self.backend.describe(),
            hparams=self._hparams.as_floats(),
            update=self._updates_done,
            env_steps=self.env_steps,
            elapsed=self._elapsed(),
            edits=self._edits,
            reason=reason,
        )

    def _on_disk(self) -> str:
        """What a failed save leaves: the latest checkpoint actually on disk, or none."""
        try:
            latest = self._checkpoints.latest()
        except OSError as err:
            return f"the checkpoint directory cannot be read ({err.strerror or err})"
        if latest is None:
            return "no checkpoint on disk"
        update = checkpoint_update(latest)
        return f"the latest checkpoint on disk is {latest.name}" + ("" if update is None else f" (update {update})")

    def _restore(self, data: bytes, verb: str) -> None:
        before = self._updates_done
        metadata = self.backend.restore_checkpoint(data)
        self._params_version += 1
        self._updates_done = int(metadata["update"])
        self._edits = list(metadata.get("edits", []))
        if self.population is not None and "population" in metadata:
            self.population.restore(metadata["population"])
        if verb == "resumed":
            self._t0 = self._clock() - float(metadata.get("elapsed", 0.0))
            message = f"resumed from update {self._updates_done}"
        else:
            # The updates after the checkpoint are no longer this agent's history: the curves
            # go on from the checkpoint (the run files keep them aside, see RunRecorder).
            self._store.drop_after(self.env_steps)
            message = f"rolled back from update {before} to the checkpoint of update {self._updates_done}"
        # A resume's event carries the edits before it, so the dashboard marks them again.
        edits = {"edits": list(self._edits)} if verb == "resumed" and self._edits else {}
        if self.population is not None and self.population.changes is not None:
            edits["population_seq"] = self.population.changes  # population.jsonl's lines to keep
        self._event(verb, message, update=self._updates_done, env_steps=self.env_steps, **edits)
        if self.population is not None:  # the checkpoint's table (RunRecorder keeps a resume's for a new file)
            self._population_event(verb.replace(" ", "_"), message)

    def _rollback(self) -> None:
        if self._sync.distributed:  # only process 0 has the files; the processes would part ways
            self._event("warning", "rollback is not available in a multi-process run")
            return
        path = self._checkpoints.latest() if self._checkpoints is not None else None
        if path is None:
            self._event("warning", "no checkpoint to roll back to")
            return
        try:
            self._restore(read_checkpoint(path), "rolled back")
        except ReadLimitError as err:
            self._event("warning", f"rollback failed: {path.name} {err.strerror}")
            return
        except (OSError, ValueError) as err:
            self._event("warning", f"rollback failed: {err}")
            return
        self.nonfinite = False
        self._publish()  # the new position, shown at once even while paused
