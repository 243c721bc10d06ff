"""`TrainingSession`: the training thread, its command queue, state machine and host loop.

It knows nothing of terminals or widgets: clients (the dashboard, the headless runner)
send commands with `submit` and receive immutable snapshots through listeners, which are
called on the session thread.
"""

from __future__ import annotations

import collections
import math
import queue
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from types import MappingProxyType

from rltui.session.backend import TrainingBackend
from rltui.session.checkpoint_steps import CheckpointFailure, CheckpointSteps
from rltui.session.checkpoints import CheckpointPolicy, CheckpointStore
from rltui.session.command_steps import CommandSteps
from rltui.session.commands import Command, Stop
from rltui.session.distributed import BoundarySync, LocalSync
from rltui.session.evaluation import EvalResult, EvaluationPolicy, Evaluator
from rltui.session.evaluation_steps import EvaluationSteps
from rltui.session.events import SessionEvent, SessionState
from rltui.session.interface import ParamsSnapshot
from rltui.session.metrics import TRAINER_METRICS, MetricsSnapshot, MetricsStore, UpdateRecord, load_run_history
from rltui.session.params_service import ParamsService
from rltui.session.population import Population
from rltui.session.population_steering import PopulationSteering
from trainers.env_import import one_line
from trainers.hparams import DynamicHParams

# Metrics whose non-finite value means training has diverged (episode_return may be NaN
# simply because no episode finished).
_GUARDED = ("policy_loss", "value_loss", "entropy", "grad_norm")


class SessionListener:
    """Override what you need. Called on the session thread: return quickly, copy nothing
    mutable (snapshots are already immutable)."""

    def on_state(self, state: SessionState, message: str | None) -> None:
        pass

    def on_metrics(self, snapshot: MetricsSnapshot) -> None:
        pass

    def on_event(self, event: SessionEvent) -> None:
        pass


class ListenerFailed(Exception):
    """A listener raised (anything, SystemExit included): the session ends in the ERROR state."""


class TrainingSession(CommandSteps, CheckpointSteps, EvaluationSteps, PopulationSteering, ParamsService):
    # The run lives in this process: when its client leaves, the run must stop.
    outlives_client = False

    def __init__(
        self,
        backend: TrainingBackend,
        hparams: DynamicHParams,
        total_updates: int,
        *,
        chunk_seconds: float = 0.3,
        history: int = 4096,
        clock: Callable[[], float] = time.monotonic,
        checkpoints: CheckpointStore | None = None,
        checkpoint_policy: CheckpointPolicy = CheckpointPolicy(),
        run_metadata: dict | None = None,
        resume: bytes | None = None,
        sync: BoundarySync | None = None,
        evaluation: EvaluationPolicy | None = None,
        evaluator: Evaluator | None = None,
        population: Population | None = None,
    ):
        self.backend = backend
        # Members x seeds agents with hyperparameters of their own (None: one configuration).
        self.population = population
        self.total_updates = total_updates
        self.chunk_seconds = chunk_seconds
        self._hparams = hparams
        self._clock = clock
        self._commands: queue.Queue[Command] = queue.Queue()
        self._listeners: list[SessionListener] = []
        self._store = MetricsStore(history)
        self._thread = threading.Thread(target=self._main, name="rltui-training", daemon=True)
        # Waiters block on this event, not on Thread.join: an exception such as
        # KeyboardInterrupt raised inside join() can leave the thread looking finished.
        self._ended = threading.Event()
        self._state = SessionState.IDLE
        self._state_lock = threading.Lock()
        self._updates_done = 0
        self._chunk_size = 1
        self._last_sps = 0.0
        self._t0 = clock()
        self._checkpoints = checkpoints
        self._policy = checkpoint_policy
        self._run_metadata = dict(run_metadata or {})
        self._resume = resume
        # Several processes of one run agree on commands, chunk sizes and saves through this.
        self._sync: BoundarySync = sync or LocalSync()
        self._edits: list[dict] = []  # the edit log, carried in checkpoints
        self._last_save = (0, clock())  # (update, clock) of the last checkpoint
        self._last_write: float | None = None  # seconds the session's last save took; None before its first
        self.last_checkpoint: Path | None = None
        # Set while the latest save attempt failed and none has succeeded since: the run
        # must not end as if its files were complete.
        self.checkpoint_failure: CheckpointFailure | None = None
        self.error: str | None = None
        self.error_checkpoint: str | None = None  # after an error: what became of the last good state
        # Warnings from other threads (the display lost its output...), logged as events
        # by the session thread at the next chunk boundary.
        self._notices: collections.deque[str] = collections.deque()
        # Once failing, listeners that raise again are passed over: the error must still
        # reach the others, and the state must still become ERROR.
        self._failing = False
        self.nonfinite = False
        self.stopped_early = False
        # Set once the final checkpoint is written and the end recorded: from then on the
        # run's files are complete, and nothing is left that an abort could save.
        self.wound_up = False
        self.start_update = 0  # where this session's training began (a resume's checkpoint)
        self._evaluation = evaluation if evaluation is not None and evaluator is not None else EvaluationPolicy()
        self._evaluator = evaluator
        self.best_eval_return: float | None = None  # of checkpoints/best.msgpack, once there is one
        self.target_reached = False  # stop_at_eval_return was reached
        # Parameters requests (the watch view), served by the session thread between
        # chunks; once it has ended, from the copy it took last.
        self._params_lock = threading.Lock()
        self._params_requests: list[Future] = []
        self._params_closed = False
        self._params_version = 0  # changes when a checkpoint replaces the state
        self._params_copy: tuple[tuple[int, int], ParamsSnapshot] | None = None

    # --- client API (any thread) -------------------------------------------------------
    def load_history(self, metrics_path: Path, last_update: int | None = None) -> int:
        """Before `start`, on a resume: the run's updates up to its checkpoint, from its
        metrics.jsonl, so the curves show the whole run. Returns how many were read."""
        return load_run_history(self._store, metrics_path, last_update)

    def add_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        # A new list, not an in-place removal: the session thread may be iterating the old one.
        self._listeners = [known for known in self._listeners if known is not listener]

    def start(self) -> None:
        self._t0 = self._clock()
        self._thread.start()

    def submit(self, command: Command) -> None:
        """Queue a command; it takes effect at the next chunk boundary. Never blocks."""
        self._commands.put(command)

    def stop(self) -> None:
        self.submit(Stop())

    def warn(self, message: str) -> None:
        """Log a warning event from any thread; the session thread writes it at the next
        chunk boundary (or as it ends). Never blocks."""
        self._notices.append(message)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the session to end; True once it has. Safe to interrupt."""
        if not self._ended.wait(timeout):
            return False
        self._thread.join()  # the thread is past its last statement: returns at once
        return True

    @property
    def state(self) -> SessionState:
        with self._state_lock:
            return self._state

    def describe(self) -> dict:
        """Static facts for display: env, algorithm, devices."""
        return dict(self.backend.describe())

    @property
    def hparams(self) -> DynamicHParams:
        return self._hparams

    @property
    def updates_done(self) -> int:
        return self._updates_done

    @property
    def env_steps(self) -> int:
        return self._updates_done * self.backend.steps_per_update

    # --- the session thread ----------------------------------------------------------------
    def _elapsed(self) -> float:
        return self._clock() - self._t0

    def event_now(self, kind: str, message: str, **data) -> SessionEvent:
        """An event stamped with this moment's update and time, for a caller that records
        it itself (an abort, which cannot wait for the session thread)."""
        return SessionEvent(kind=kind, update=self._updates_done, message=message, wall_time=self._elapsed(),
                            data=data)

    def _main(self) -> None:
        try:
            self._train()
        except BaseException as exc:  # noqa: BLE001 - nothing may end this thread unreported
            self._fail(exc)
        finally:
            self._close_params()
            self._ended.set()

    def _train(self) -> None:
        try:
            self._set_state(SessionState.COMPILING)
            started = self._clock()
            self.backend.build(self._trainer_hparams())
            seconds = self._clock() - started
            if self._checkpoints is not None:
                self._checkpoints.prepare()
            if self._resume is not None:
                # Before the compiled event, so that every event of a resumed run carries
                # its update index and the run's clock, both continued from the checkpoint.
                self._restore(self._resume, "resumed")
                self._resume = None
                self.start_update = self._updates_done
            self._prepare_evaluation()
            self._event("compiled", f"compiled in {seconds:.1f} s", seconds=seconds)
            if self.population is not None and self.start_update == 0:
                seeds = self.population.num_seeds
                self._population_event("start", f"population of {self.population.num_members} members x "
                                       f"{seeds} seed{'s' if seeds != 1 else ''}")
            self._last_save = (self._updates_done, self._clock())
            self._set_state(SessionState.RUNNING)
            self._loop()
            if self._checkpoints is not None and self._updates_done > self._last_save[0] and not self.nonfinite:
                # Every process decides alike here: same updates, same saves, same divergence.
                self._save("final")
            self._log_notices()
            failed = {"checkpoint_failed": self.checkpoint_failure.reason} if self.checkpoint_failure else {}
            if self.stopped_early:
                self._event("finished", f"stopped at update {self._updates_done}", **failed)
            else:
                self._event("finished", f"finished {self._updates_done} updates", **failed)
            self.wound_up = True
            self._set_state(SessionState.FINISHED)
        except BaseException as exc:  # noqa: BLE001 - any failure, even SystemExit, becomes the ERROR state
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        """End in the ERROR state: save the last good state if it is newer than the last
        checkpoint, then log the error and set the state, whatever the listeners do."""
        if self._failing:
            return
        self._failing = True
        cause = exc.__cause__ if isinstance(exc, ListenerFailed) and exc.__cause__ is not None else exc
        self.error = str(exc) if isinstance(exc, ListenerFailed) else one_line(exc)
        self.error_checkpoint = saved = self._save_after_error()
        self._log_notices()
        self._event("error", self.error, checkpoint=saved, traceback="".join(traceback.format_exception(cause))[-4000:])
        self._set_state(SessionState.ERROR, self.error)

    def _log_notices(self) -> None:
        while self._notices:
            self._event("warning", self._notices.popleft())

    def _loop(self) -> None:
        while self._updates_done < self.total_updates:
            self._log_notices()
            if not self._apply_commands():
                self.stopped_early = True
                return
            count = min(self._chunk_size, self.total_updates - self._updates_done, self.backend.max_chunk_updates)
            if self._evaluation.enabled:  # a chunk ends on each update due an evaluation
                count = min(count, self._evaluation.next_due(self._updates_done) - self._updates_done)
            if self.population is not None and self.population.pbt.enabled:  # ... and on each PBT step
                every = self.population.pbt.every_updates
                count = min(count, every - self._updates_done % every)
            started = self._clock()
            if self.population is None:
                rows = self.backend.run_chunk(count, self._hparams)
            else:
                rows = self.backend.run_chunk(count, self.population.trainer_hparams(), self.population.active())
            seconds = max(self._clock() - started, 1e-9)
            if self.population is None:
                diverged = self._diverged(rows)
            else:
                rows = [self.population.shape_row(row) for row in rows]
                diverged = self._members_diverged(rows)
            # Outside the chunk's timing: the chunk size and SPS measure training alone.
            evaluation = None if diverged else self._evaluate_if_due(self._updates_done + len(rows))
            self._record(rows, started, seconds, evaluation)
            self._chunk_size = self._next_chunk_size(len(rows) or count, seconds)
            if evaluation is not None and self._after_evaluation(evaluation):
                self.stopped_early = True
                return
            if diverged:
                self.nonfinite = True
                self._event("nonfinite", "non-finite loss or gradient: training paused")
                self._set_state(SessionState.PAUSED, "non-finite loss or gradient")
                continue
            if self.population is not None:
                self._population_boundary()
            if self._sync.agree(self._checkpoint_due()):
                # Due on the last update, it is the run's final checkpoint (no other follows).
                self._save("final" if self._updates_done >= self.total_updates else "periodic")

    def _next_chunk_size(self, count: int, seconds: float) -> int:
        """Size chunks from measured time so that one takes about `chunk_seconds`; grow at
        most 8x per chunk so a noisy first measurement cannot overshoot far."""
        per_update = seconds / count
        target = int(self.chunk_seconds / per_update)
        return max(1, min(target, count * 8, self.backend.max_chunk_updates))

    def _diverged(self, rows: list[dict[str, float]]) -> bool:
        return any(not math.isfinite(row.get(name, 0.0)) for row in rows for name in _GUARDED)

    def _record(
        self, rows: list[dict[str, float]], started: float, seconds: float, evaluation: EvalResult | None = None
    ) -> None:
        steps_per_update = self.backend.steps_per_update
        sps = len(rows) * steps_per_update / seconds
        self._last_sps = sps
        begin = started - self._t0
        records = []
        for i, row in enumerate(rows):
            self._updates_done += 1
            values = {name: float(row.get(name, math.nan)) for name in TRAINER_METRICS}
            per_seed = row.get("per_seed", {})
            per_member = row.get("per_member", {})
            if evaluation is not None and i == len(rows) - 1:  # the update evaluated
                values.update(eval_return=evaluation.mean, eval_return_std=evaluation.std)
                if evaluation.per_seed:
                    per_seed = {**per_seed, "eval_return": evaluation.per_seed,
                                "eval_return_std": evaluation.per_seed_std}
                    if self.population is not None:
                        self.population.observe_eval(evaluation.per_seed)
                        per_member = {**per_member, "eval_return": self.population.member_means(evaluation.per_seed)}
            records.append(
                UpdateRecord(
                    update=self._updates_done,
                    env_steps=self._updates_done * steps_per_update,
                    # interpolated within the chunk: the host only sees chunk boundaries
                    wall_time=begin + seconds * (i + 1) / len(rows),
                    sps=sps,
                    values=values,
                    per_seed=per_seed,
                    per_member=per_member,
                )
            )
        self._store.extend(records)
        self._publish(tuple(records))

    def _publish(self, new_records: tuple[UpdateRecord, ...] = ()) -> None:
        history, steps = self._store.history()
        snapshot = MetricsSnapshot(
            state=self.state,
            update=self._updates_done,
            total_updates=self.total_updates,
            env_steps=self.env_steps,
            total_env_steps=self.total_updates * self.backend.steps_per_update,
            elapsed=self._elapsed(),
            sps=self._last_sps,
            hparams=MappingProxyType(self._hparams.as_floats()),
            new_records=new_records,
            history=history,
            history_env_steps=steps,
            seed_returns=self._store.seed_returns(),
            population=self.population.view() if self.population is not None else None,
        )
        self._notify("on_metrics", snapshot)

    def _set_state(self, state: SessionState, message: str | None = None) -> None:
        with self._state_lock:
            self._state = state
        self._notify("on_state", state, message)

    def _event(self, kind: str, message: str, **data) -> None:
        self._notify("on_event", self.event_now(kind, message, **data))

    def _notify(self, method: str, *args) -> None:
        """Call every listener. Whatever one raises (SystemExit and KeyboardInterrupt
        included: on this thread they would end it unreported) becomes ListenerFailed,
        which ends the session in the ERROR state; once failing, it is passed over."""
        for listener in self._listeners:
            try:
                getattr(listener, method)(*args)
            except BaseException as exc:
                if self._failing:
                    continue
                raise ListenerFailed(f"{type(listener).__name__} failed: {one_line(exc)}") from exc
