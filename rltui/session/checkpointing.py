"""The session's checkpoints (`SessionCheckpoints`, which the session holds): when one is
due, saving with what a failure leaves on disk, the metadata beside the arrays, restoring
(resume and rollback), and the save after an error.

Everything here runs on the session thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from rltui.infra.read_limits import ReadLimitError, read_checkpoint
from rltui.runfiles.checkpoints import CheckpointStore, checkpoint_update
from rltui.session.backend import NonFiniteState, TrainingBackend
from rltui.session.checkpoints import CheckpointPolicy, checkpoint_metadata
from rltui.session.distributed import BoundarySync
from rltui.session.metrics import MetricsStore
from rltui.session.params_service import ParamsService
from rltui.session.population import Population
from rltui.session.population_steering import PopulationSteering
from rltui.session.progress import TrainingProgress
from rltui.session.reporter import SessionReporter
from trainers.env_import import one_line


@dataclasses.dataclass(frozen=True)
class CheckpointFailure:
    """Why the latest checkpoint could not be written, and what is on disk instead."""

    reason: str  # e.g. "No space left on device"
    on_disk: str  # e.g. "the latest checkpoint on disk is checkpoint-000000097.msgpack (update 97)"


class SessionCheckpoints:
    def __init__(
        self,
        store: CheckpointStore | None,
        policy: CheckpointPolicy,
        *,
        backend: TrainingBackend,
        progress: TrainingProgress,
        reporter: SessionReporter,
        sync: BoundarySync,
        run_metadata: dict,
        metrics: MetricsStore,
        params: ParamsService,
        population: Population | None,
        steering: PopulationSteering | None,
        publish: Callable[[], None],
    ):
        self.store = store  # None: checkpoints are off
        self._policy = policy
        self._backend = backend  # encodes and restores the training state
        self._progress = progress
        self._reporter = reporter
        self._sync = sync  # a multi-process run's processes save alike; only process 0 writes
        self._run_metadata = run_metadata
        self._metrics = metrics  # a rollback drops the updates after its checkpoint
        self._params = params  # told when a checkpoint replaces the state
        self._population = population
        self._steering = steering
        self._publish = publish  # a snapshot now: a rollback's position shows at once, even while paused
        self._last_save = (0, progress.clock())  # (update, clock) of the last checkpoint
        self._last_write: float | None = None  # seconds the session's last save took; None before its first
        self.last_checkpoint: Path | None = None
        # Set while the latest save attempt failed and none has succeeded since: the run
        # must not end as if its files were complete.
        self.failure: CheckpointFailure | None = None

    def prepare(self) -> None:
        """Once built, before training: the checkpoint directory, and the count of time and
        updates towards the first periodic checkpoint (`count_from_now`)."""
        if self.store is not None:
            self.store.prepare()

    def count_from_now(self) -> None:
        """Count towards the next periodic checkpoint from here, as if one was just saved."""
        self._last_save = (self._progress.updates_done, self._progress.clock())

    def unsaved(self) -> bool:
        """Whether updates were done since the last checkpoint (checkpoints on)."""
        return self.store is not None and self._progress.updates_done > self._last_save[0]

    def save_after_error(self) -> str:
        """Try to checkpoint the state after the last update that completed (the backend
        replaces its state only when a chunk returns); says what happened, for the error event."""
        if self.store is None:
            return "checkpoints are off"
        if self._sync.distributed:
            return "no checkpoint: the other processes of the run take no part in it after an error"
        if self._progress.nonfinite or not self.unsaved():
            return "no newer state to save"
        try:
            self.save("error")
        except BaseException as err:  # noqa: BLE001 - the error itself must still be reported
            return f"checkpoint failed ({one_line(err)})"
        if self.failure is not None:
            return f"checkpoint failed ({self.failure.reason}); {self.failure.on_disk}"
        return f"saved {self.last_checkpoint.name}" if self.last_checkpoint else "saved"

    def due(self) -> bool:
        if self.store is None:
            return False
        update, when = self._last_save
        every = self._policy.every_updates
        by_count = every > 0 and self._progress.updates_done - update >= every
        wait = self._policy.seconds_between(self._last_write is not None, self._last_write or 0.0)
        by_time = wait is not None and self._progress.clock() - when >= wait
        return by_count or by_time

    def save(self, reason: str) -> None:
        event = self._reporter.event
        if self.store is None:
            event("warning", "checkpoints are off for this session")
            return
        if self._progress.nonfinite:
            # Losses or gradients went non-finite: even finite params may be ruined.
            event("warning", "checkpoint refused: training diverged; earlier checkpoints kept")
            return
        from trainers.checkpoint import CheckpointError  # here: importing the session must not load JAX

        clock = self._progress.clock
        started = clock()
        metadata = self.metadata(reason)
        try:
            data = self._backend.encode_checkpoint(metadata)
        except NonFiniteState:
            event("warning", "checkpoint skipped: the training state is not finite; earlier checkpoints kept")
            return
        except CheckpointError as err:  # a state too large for a file rltui can read back
            self._save_failed(str(err))
            return
        try:
            path = self.store.save(data, self._progress.updates_done)
        except OSError as err:
            self._save_failed(err.strerror or str(err))
            return
        self.failure = None
        self._last_save = (self._progress.updates_done, clock())
        self._last_write = self._last_save[1] - started
        if path is None:  # a peer process of a multi-process run: process 0 wrote the file
            return
        self.last_checkpoint = path
        event("checkpoint", f"saved {path.name} ({reason})", path=str(path), reason=reason,
              seconds=round(self._last_write, 4))

    def _save_failed(self, reason: str) -> None:
        self.failure = CheckpointFailure(reason=reason, on_disk=self._on_disk())
        self._reporter.event(
            "warning",
            f"checkpoint of update {self._progress.updates_done} failed ({reason}); {self.failure.on_disk}",
        )

    def metadata(self, reason: str) -> dict:
        """What a checkpoint holds beside the arrays (`reason`: why it is written)."""
        progress = self._progress
        metadata = checkpoint_metadata(
            run=self._run_metadata,
            backend=self._backend.describe(),
            hparams=progress.hparams.as_floats(),
            update=progress.updates_done,
            env_steps=progress.updates_done * self._backend.steps_per_update,
            elapsed=progress.elapsed(),
            edits=progress.edits,
            reason=reason,
        )
        if self._population is not None:
            metadata["population"] = self._population.to_metadata()
        return metadata

    def _on_disk(self) -> str:
        """What a failed save leaves: the latest checkpoint actually on disk, or none."""
        try:
            latest = self.store.latest()
        except OSError as err:
            return f"the checkpoint directory cannot be read ({err.strerror or err})"
        if latest is None:
            return "no checkpoint on disk"
        update = checkpoint_update(latest)
        return f"the latest checkpoint on disk is {latest.name}" + ("" if update is None else f" (update {update})")

    def restore(self, data: bytes, verb: str) -> None:
        """Replace the training state with a checkpoint's (`verb`: "resumed" or "rolled back")."""
        progress, population = self._progress, self._population
        before = progress.updates_done
        metadata = self._backend.restore_checkpoint(data)
        self._params.state_replaced()
        progress.updates_done = int(metadata["update"])
        progress.edits = list(metadata.get("edits", []))
        if population is not None and "population" in metadata:
            population.restore(metadata["population"])
        env_steps = progress.updates_done * self._backend.steps_per_update
        if verb == "resumed":
            progress.started_at = progress.clock() - float(metadata.get("elapsed", 0.0))
            message = f"resumed from update {progress.updates_done}"
            if getattr(self._backend, "replay_left_out", False):
                message += " (its checkpoint holds no replay buffer: training refills it before learning again)"
        else:
            # The updates after the checkpoint are no longer this agent's history: the curves
            # go on from the checkpoint (the run files keep them aside, see RunRecorder).
            self._metrics.drop_after(env_steps)
            message = f"rolled back from update {before} to the checkpoint of update {progress.updates_done}"
        # A resume's event carries the edits before it, so the dashboard marks them again.
        edits = {"edits": list(progress.edits)} if verb == "resumed" and progress.edits else {}
        if population is not None and population.changes is not None:
            edits["population_seq"] = population.changes  # population.jsonl's lines to keep
        self._reporter.event(verb, message, update=progress.updates_done, env_steps=env_steps, **edits)
        if self._steering is not None:  # the checkpoint's table (RunRecorder keeps a resume's for a new file)
            self._steering.event(verb.replace(" ", "_"), message)

    def rollback(self) -> None:
        event = self._reporter.event
        if self._sync.distributed:  # only process 0 has the files; the processes would part ways
            event("warning", "rollback is not available in a multi-process run")
            return
        path = self.store.latest() if self.store is not None else None
        if path is None:
            event("warning", "no checkpoint to roll back to")
            return
        try:
            self.restore(read_checkpoint(path), "rolled back")
        except ReadLimitError as err:
            event("warning", f"rollback failed: {path.name} {err.strerror}")
            return
        except (OSError, ValueError) as err:
            event("warning", f"rollback failed: {err}")
            return
        self._progress.nonfinite = False
        self._publish()  # the new position, shown at once even while paused
