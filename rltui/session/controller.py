"""`TrainingSession`: the training thread, its command queue, state machine and host loop.

It knows nothing of terminals or widgets: clients (the dashboard, the headless runner)
send commands with `submit` and receive immutable snapshots through listeners, which are
called on the session thread.

The session holds its parts, each given what it uses: where training stands
(`TrainingProgress`, shared by all), what listeners are told (`SessionReporter`),
parameters for the watch view (`ParamsService`), a population's steering
(`PopulationSteering`), checkpoints (`SessionCheckpoints`), evaluation
(`SessionEvaluation`) and the commands at each chunk boundary (`BoundaryCommands`).
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

from rltui.runfiles.checkpoints import CheckpointStore
from rltui.session.backend import TrainingBackend
from rltui.session.boundary_commands import BoundaryCommands
from rltui.session.checkpointing import CheckpointFailure, SessionCheckpoints
from rltui.session.checkpoints import CheckpointPolicy
from rltui.session.commands import Command, Stop
from rltui.session.distributed import BoundarySync, LocalSync
from rltui.session.evaluating import SessionEvaluation
from rltui.session.evaluation import EvalResult, EvaluationPolicy, Evaluator
from rltui.session.events import SessionEvent, SessionState
from rltui.session.latest_episodes import LatestEpisodes
from rltui.session.metrics import TRAINER_METRICS, MetricsSnapshot, MetricsStore, UpdateRecord, load_run_history
from rltui.session.params_service import ParamsService
from rltui.session.population import Population
from rltui.session.population_steering import PopulationSteering
from rltui.session.progress import TrainingProgress
from rltui.session.reporter import ListenerFailed, SessionListener, SessionReporter
from rltui.session.value_bound import ValueBoundWatch
from trainers.algorithms import DEFAULT_ALGORITHM
from trainers.env_import import one_line
from trainers.hparams import DynamicHParams
from trainers.metrics_spec import EVAL_RETURN, EVAL_RETURN_STD, divergence_metrics

__all__ = ["ListenerFailed", "SessionListener", "TrainingSession"]



class TrainingSession:
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
        # The metrics whose non-finite value pauses the run: those its algorithm reports.
        algo = backend.describe().get("algo", DEFAULT_ALGORITHM)
        self._guarded = divergence_metrics(algo)
        self._value_bound = ValueBoundWatch(algo, population.num_seeds if population is not None else None)
        # Members x seeds agents with hyperparameters of their own (None: one configuration).
        self.population = population
        self.total_updates = total_updates
        self.chunk_seconds = chunk_seconds
        self._clock = clock
        self._commands: queue.Queue[Command] = queue.Queue()
        self._store = MetricsStore(history)
        # Each agent's latest finished episode, carried into the updates it finishes none in.
        self._episodes = LatestEpisodes()
        self._thread = threading.Thread(target=self._main, name="rltui-training", daemon=True)
        # Waiters block on this event, not on Thread.join: an exception such as
        # KeyboardInterrupt raised inside join() can leave the thread looking finished.
        self._ended = threading.Event()
        self._chunk_size = 1
        self._last_sps = 0.0
        self._resume = resume
        # Several processes of one run agree on commands, chunk sizes and saves through this.
        self._sync: BoundarySync = sync or LocalSync()
        self.error: str | None = None
        self.error_checkpoint: str | None = None  # after an error: what became of the last good state
        # Warnings from other threads (the display lost its output...), logged as events
        # by the session thread at the next chunk boundary.
        self._notices: collections.deque[str] = collections.deque()
        self.stopped_early = False
        # Set once the final checkpoint is written and the end recorded: from then on the
        # run's files are complete, and nothing is left that an abort could save.
        self.wound_up = False
        self.start_update = 0  # where this session's training began (a resume's checkpoint)
        # The session's parts.
        self._progress = progress = TrainingProgress(hparams, clock, started_at=clock())
        self._reporter = reporter = SessionReporter(progress)
        self._params = ParamsService(backend, progress, self._commands, self._sync)
        self._steering = None if population is None else PopulationSteering(
            population, backend, progress, reporter, self._params, publish=self._publish)
        self._checkpoints = SessionCheckpoints(
            checkpoints, checkpoint_policy, backend=backend, progress=progress, reporter=reporter, sync=self._sync,
            run_metadata=dict(run_metadata or {}), metrics=self._store, params=self._params, population=population,
            steering=self._steering, publish=self._publish)
        self._evaluation = SessionEvaluation(
            evaluation, evaluator, backend=backend, progress=progress, reporter=reporter, sync=self._sync,
            store=checkpoints, metadata=self._checkpoints.metadata)
        self._boundary = BoundaryCommands(
            self._commands, sync=self._sync, progress=progress, reporter=reporter, checkpoints=self._checkpoints,
            params=self._params, steering=self._steering)

    # --- client API (any thread) -------------------------------------------------------
    def load_history(self, metrics_path: Path, last_update: int | None = None) -> int:
        """Before `start`, on a resume: the run's updates up to its checkpoint, from its
        metrics.jsonl, so the curves show the whole run. Returns how many were read."""
        count = load_run_history(self._store, metrics_path, last_update)
        last = self._store.last_record()
        if last is not None:
            self._episodes.resume_from(last.per_seed, last.update)
        self._value_bound.resume_from(self._store.history()[0]["reward_max"])
        return count

    def add_listener(self, listener: SessionListener) -> None:
        self._reporter.add(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        self._reporter.remove(listener)

    def start(self) -> None:
        self._progress.started_at = self._clock()
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

    def request_params(self) -> Future:
        """The latest parameters as host arrays (a `ParamsSnapshot`), copied at the next
        chunk boundary (`ParamsService.request`). Never blocks."""
        return self._params.request()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the session to end; True once it has. Safe to interrupt."""
        if not self._ended.wait(timeout):
            return False
        self._thread.join()  # the thread is past its last statement: returns at once
        return True

    @property
    def state(self) -> SessionState:
        return self._reporter.state

    def describe(self) -> dict:
        """Static facts for display: env, algorithm, devices."""
        return dict(self.backend.describe())

    @property
    def hparams(self) -> DynamicHParams:
        return self._progress.hparams

    @property
    def updates_done(self) -> int:
        return self._progress.updates_done

    @property
    def env_steps(self) -> int:
        return self._progress.updates_done * self.backend.steps_per_update

    @property
    def nonfinite(self) -> bool:
        """Training diverged (non-finite losses or gradients) and has not been resumed since."""
        return self._progress.nonfinite

    @property
    def last_checkpoint(self) -> Path | None:
        return self._checkpoints.last_checkpoint

    @property
    def checkpoint_failure(self) -> CheckpointFailure | None:
        """Set while the latest save attempt failed and none has succeeded since."""
        return self._checkpoints.failure

    @property
    def best_eval_return(self) -> float | None:
        """Of checkpoints/best.msgpack, once there is one."""
        return self._evaluation.best_return

    @property
    def target_reached(self) -> bool:
        """stop_at_eval_return was reached."""
        return self._evaluation.target_reached

    def event_now(self, kind: str, message: str, **data) -> SessionEvent:
        """An event stamped with this moment's update and time, for a caller that records
        it itself (an abort, which cannot wait for the session thread)."""
        return self._reporter.event_now(kind, message, **data)

    # --- the session thread ----------------------------------------------------------------
    def _main(self) -> None:
        try:
            self._train()
        except BaseException as exc:  # noqa: BLE001 - nothing may end this thread unreported
            self._fail(exc)
        finally:
            self._params.close()
            self._ended.set()

    def _train(self) -> None:
        reporter, progress = self._reporter, self._progress
        try:
            reporter.set_state(SessionState.COMPILING)
            started = self._clock()
            self.backend.build(progress.hparams if self.population is None else self.population.trainer_hparams())
            seconds = self._clock() - started
            self._checkpoints.prepare()
            if self._resume is not None:
                # Before the compiled event, so that every event of a resumed run carries
                # its update index and the run's clock, both continued from the checkpoint.
                self._checkpoints.restore(self._resume, "resumed")
                self._resume = None
                self.start_update = progress.updates_done
            self._evaluation.prepare()
            reporter.event("compiled", f"compiled in {seconds:.1f} s", seconds=seconds)
            if self._steering is not None and self.start_update == 0:
                seeds = self.population.num_seeds
                self._steering.event("start", f"population of {self.population.num_members} members x "
                                     f"{seeds} seed{'s' if seeds != 1 else ''}")
            self._checkpoints.count_from_now()
            reporter.set_state(SessionState.RUNNING)
            self._loop()
            if self._checkpoints.unsaved() and not progress.nonfinite:
                # Every process decides alike here: same updates, same saves, same divergence.
                self._checkpoints.save("final")
            self._log_notices()
            failure = self._checkpoints.failure
            failed = {"checkpoint_failed": failure.reason} if failure else {}
            done = progress.updates_done
            ending = f"stopped at update {done}" if self.stopped_early else f"finished {done} updates"
            reporter.event("finished", ending, **failed)
            self.wound_up = True
            reporter.set_state(SessionState.FINISHED, ending)  # a client (serve) tells a stop from a finish
        except BaseException as exc:  # noqa: BLE001 - any failure, even SystemExit, becomes the ERROR state
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        """End in the ERROR state: save the last good state if it is newer than the last
        checkpoint, then log the error and set the state, whatever the listeners do."""
        if self._reporter.failing:
            return
        self._reporter.failing = True
        cause = exc.__cause__ if isinstance(exc, ListenerFailed) and exc.__cause__ is not None else exc
        self.error = str(exc) if isinstance(exc, ListenerFailed) else one_line(exc)
        self.error_checkpoint = saved = self._checkpoints.save_after_error()
        self._log_notices()
        self._reporter.event("error", self.error, checkpoint=saved,
                             traceback="".join(traceback.format_exception(cause))[-4000:])
        self._reporter.set_state(SessionState.ERROR, self.error)

    def _log_notices(self) -> None:
        while self._notices:
            self._reporter.event("warning", self._notices.popleft())

    def _loop(self) -> None:
        progress = self._progress
        while progress.updates_done < self.total_updates:
            self._log_notices()
            applied = self._boundary.apply(self._chunk_size)
            self._chunk_size = applied.chunk_size
            if not applied.go_on:
                self.stopped_early = True
                return
            count = min(self._chunk_size, self.total_updates - progress.updates_done, self.backend.max_chunk_updates)
            if self._evaluation.enabled:  # a chunk ends on each update due an evaluation
                count = min(count, self._evaluation.next_due(progress.updates_done) - progress.updates_done)
            if self.population is not None and self.population.pbt.enabled:  # ... and on each PBT step
                every = self.population.pbt.every_updates
                count = min(count, every - progress.updates_done % every)
            hparams = progress.hparams if self.population is None else self.population.trainer_hparams()
            started = self._clock()
            if self.population is None:
                rows = self.backend.run_chunk(count, hparams)
            else:
                rows = self.backend.run_chunk(count, hparams, self.population.active())
            seconds = max(self._clock() - started, 1e-9)
            # What is recorded: each agent's latest finished episode carried forward. A
            # population's steering (its members' scores for PBT) sees the raw rows.
            recorded = [self._episodes.carry(row, progress.updates_done + 1 + i) for i, row in enumerate(rows)]
            if self._steering is None:
                diverged = self._diverged(rows)
            else:
                diverged = self._steering.members_diverged([self.population.shape_row(row) for row in rows])
                recorded = [self.population.shape_row(row) for row in recorded]
            # Outside the chunk's timing: the chunk size and SPS measure training alone.
            evaluation = None if diverged else self._evaluation.evaluate_if_due(progress.updates_done + len(rows))
            self._record(recorded, started, seconds, evaluation)
            for beyond in self._value_bound.check(rows, progress.updates_done + 1 - len(rows), hparams.gamma):
                self._reporter.event("warning", beyond.message, about_update=beyond.update)
            self._chunk_size = self._next_chunk_size(len(rows) or count, seconds)
            if evaluation is not None and self._evaluation.after(evaluation):
                self.stopped_early = True
                return
            if diverged:
                progress.nonfinite = True
                self._reporter.event("nonfinite", "non-finite loss or gradient: training paused")
                self._reporter.set_state(SessionState.PAUSED, "non-finite loss or gradient")
                continue
            if self._steering is not None:
                self._steering.boundary()
            if self._sync.agree(self._checkpoints.due()):
                # Due on the last update, it is the run's final checkpoint (no other follows).
                self._checkpoints.save("final" if progress.updates_done >= self.total_updates else "periodic")

    def _next_chunk_size(self, count: int, seconds: float) -> int:
        """Size chunks from measured time so that one takes about `chunk_seconds`; grow at
        most 8x per chunk so a noisy first measurement cannot overshoot far."""
        per_update = seconds / count
        target = int(self.chunk_seconds / per_update)
        return max(1, min(target, count * 8, self.backend.max_chunk_updates))

    def _diverged(self, rows: list[dict[str, float]]) -> bool:
        return any(not math.isfinite(row.get(name, 0.0)) for row in rows for name in self._guarded)

    def _record(
        self, rows: list[dict[str, float]], started: float, seconds: float, evaluation: EvalResult | None = None
    ) -> None:
        progress = self._progress
        steps_per_update = self.backend.steps_per_update
        sps = len(rows) * steps_per_update / seconds
        self._last_sps = sps
        begin = started - progress.started_at
        records = []
        for i, row in enumerate(rows):
            progress.updates_done += 1
            values = {name: float(row.get(name, math.nan)) for name in TRAINER_METRICS}
            per_seed = row.get("per_seed", {})
            per_member = row.get("per_member", {})
            if evaluation is not None and i == len(rows) - 1:  # the update evaluated
                values.update({EVAL_RETURN: evaluation.mean, EVAL_RETURN_STD: evaluation.std})
                if evaluation.per_seed:
                    per_seed = {**per_seed, EVAL_RETURN: evaluation.per_seed, EVAL_RETURN_STD: evaluation.per_seed_std}
                    if self.population is not None:
                        self.population.observe_eval(evaluation.per_seed)
                        per_member = {**per_member, EVAL_RETURN: self.population.member_means(evaluation.per_seed)}
            records.append(
                UpdateRecord(
                    update=progress.updates_done,
                    env_steps=progress.updates_done * steps_per_update,
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
            update=self._progress.updates_done,
            total_updates=self.total_updates,
            env_steps=self.env_steps,
            total_env_steps=self.total_updates * self.backend.steps_per_update,
            elapsed=self._progress.elapsed(),
            sps=self._last_sps,
            hparams=MappingProxyType(self._progress.hparams.as_floats()),
            new_records=new_records,
            history=history,
            history_env_steps=steps,
            seed_returns=self._store.seed_returns(),
            population=self.population.view() if self.population is not None else None,
        )
        self._reporter.snapshot(snapshot)
