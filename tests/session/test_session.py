"""TrainingSession driven by a pure-Python fake backend (no JAX)."""

from __future__ import annotations

import dataclasses
import math
import queue
import threading
import time

import numpy as np
import pytest

from rltui.session import (
    Pause,
    Resume,
    SaveCheckpoint,
    SessionListener,
    SessionState,
    SetHParams,
    Stop,
    TrainingSession,
)
from rltui.session.metrics import TRAINER_METRICS
from trainers.hparams import DynamicHParams

TIMEOUT = 10.0  # seconds; every wait in this file is bounded by it
S = SessionState


class FakeClock:
    """Time that only moves when the fake backend says so: makes chunk sizes exact."""

    def __init__(self) -> None:
        self._t = 1024.0  # binary-exact sums with the power-of-two costs used below
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._t += seconds


class FakeBackend:
    """Implements the TrainingBackend protocol in pure Python.

    Records the hparams of every update it runs. Optionally sleeps per update, advances a
    fake clock per update, raises on a chosen update (or in build), returns a non-finite
    metric on a chosen update, or blocks each chunk until the test releases it.
    """

    steps_per_update = 32

    def __init__(
        self,
        *,
        max_chunk_updates: int = 64,
        sleep_per_update: float = 0.0,
        clock: FakeClock | None = None,
        clock_per_update=1.0,  # float, or callable(update_index) -> float
        fail_at: int | None = None,
        fail_in_build: bool = False,
        bad_at: int | None = None,
        bad_metric: str = "policy_loss",
        bad_value: float = math.nan,
        gated: bool = False,
        algo: str = "ppo",
    ):
        self.algo = algo
        self.max_chunk_updates = max_chunk_updates
        self.sleep_per_update = sleep_per_update
        self.clock = clock
        self.clock_per_update = clock_per_update
        self.fail_at = fail_at
        self.fail_in_build = fail_in_build
        self.bad_at = bad_at
        self.bad_metric = bad_metric
        self.bad_value = bad_value
        self.built_with: DynamicHParams | None = None
        self.seen: list[DynamicHParams] = []  # hparams of update i+1
        self.chunks: list[int] = []  # requested sizes, in order
        self.entered: queue.Queue[int] = queue.Queue()  # chunk index, when a chunk starts
        self._cond = threading.Condition()
        self._gated = gated
        self._permits = 0

    # --- test control ---
    def wait_entered(self, timeout: float = TIMEOUT) -> int:
        """Wait until a chunk has started (and, when gated, is blocked); its index."""
        return self.entered.get(timeout=timeout)

    def release(self, chunks: int = 1) -> None:
        with self._cond:
            self._permits += chunks
            self._cond.notify_all()

    def open(self) -> None:
        with self._cond:
            self._gated = False
            self._cond.notify_all()

    # --- the protocol ---
    def build(self, hparams: DynamicHParams) -> None:
        self.built_with = hparams
        if self.fail_in_build:
            raise RuntimeError("compile exploded")

    def run_chunk(self, num_updates: int, hparams: DynamicHParams) -> list[dict[str, float]]:
        index = len(self.chunks)
        self.chunks.append(num_updates)
        self.entered.put(index)
        with self._cond:
            if self._gated:
                ok = self._cond.wait_for(lambda: self._permits > 0 or not self._gated, timeout=TIMEOUT)
                if not ok:
                    raise TimeoutError("test never released chunk")
                if self._gated:
                    self._permits -= 1
        rows = []
        for _ in range(num_updates):
            update = len(self.seen) + 1
            if self.fail_at == update:
                raise ValueError(f"boom at update {update}")
            self.seen.append(hparams)
            if self.sleep_per_update:
                time.sleep(self.sleep_per_update)
            if self.clock is not None:
                cost = self.clock_per_update
                self.clock.advance(cost(update) if callable(cost) else cost)
            row = {name: 0.5 for name in TRAINER_METRICS}
            row["episode_return"] = float(update)
            row["lr"] = float(hparams.lr)
            if self.bad_at == update:
                row[self.bad_metric] = self.bad_value
            rows.append(row)
        return rows

    def describe(self) -> dict:
        return {"env": "Fake-v0", "algo": self.algo, "devices": ["cpu:0"], "device_kind": "fake"}


class Recorder(SessionListener):
    """Collects everything a session reports, and lets the test wait for it."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.states: list[tuple[SessionState, str | None]] = []
        self.events = []
        self.snapshots = []

    def on_state(self, state, message):
        with self.cond:
            self.states.append((state, message))
            self.cond.notify_all()

    def on_metrics(self, snapshot):
        with self.cond:
            self.snapshots.append(snapshot)
            self.cond.notify_all()

    def on_event(self, event):
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def wait_for(self, predicate, timeout: float = TIMEOUT):
        with self.cond:
            assert self.cond.wait_for(predicate, timeout=timeout), "timed out waiting"

    def wait_event(self, kind: str, count: int = 1):
        self.wait_for(lambda: len(self.kinds(kind)) >= count)
        return self.kinds(kind)[count - 1]

    def kinds(self, kind: str):
        return [e for e in self.events if e.kind == kind]

    @property
    def state_seq(self):
        return [s for s, _ in self.states]

    @property
    def records(self):
        return [r for snap in self.snapshots for r in snap.new_records]


def make_session(backend, total_updates=10, *, clock=None, chunk_seconds=1.0, hparams=None, **kw):
    session = TrainingSession(
        backend,
        hparams or DynamicHParams.create(lr=2.5e-4, anneal_lr=0.0),
        total_updates,
        chunk_seconds=chunk_seconds,
        **({"clock": clock} if clock is not None else {}),
        **kw,
    )
    rec = Recorder()
    session.add_listener(rec)
    return session, rec


def gated_session(total_updates=10):
    """One update per chunk (fake clock: 1 s per update, chunk_seconds=1), each chunk
    blocked until the test releases it."""
    clock = FakeClock()
    backend = FakeBackend(clock=clock, gated=True)
    session, rec = make_session(backend, total_updates, clock=clock, chunk_seconds=1.0)
    return session, rec, backend


def assert_no_chunk_starts_while_paused(session, backend) -> None:
    """Nothing runs while paused, shown without a fixed wait: the paused session answers two
    parameters requests, one after the other, at its chunk boundaries (it has none to copy,
    so each is answered with ParamsUnavailable); a session that trained on while paused would
    run a chunk between the two."""
    before = len(backend.chunks)
    for _ in range(2):
        assert session.request_params().exception(timeout=TIMEOUT) is not None
    assert len(backend.chunks) == before, "a chunk started while it should not have"


def finish(session, backend=None):
    if backend is not None:
        backend.open()
    assert session.join(TIMEOUT), "session thread did not end"


@pytest.fixture
def cleanup():
    """Stop and open whatever a test started, even when it fails, so no thread lingers."""
    started = []
    yield started.append
    for session, backend in started:
        session.stop()
        backend.open()
        session.join(TIMEOUT)


# --- the normal run ---------------------------------------------------------------------


def test_runs_to_completion_compiling_running_finished():
    backend = FakeBackend(max_chunk_updates=8)
    session, rec = make_session(backend, total_updates=25, chunk_seconds=0.05)
    assert session.state is S.IDLE
    session.start()
    finish(session)

    assert rec.state_seq == [S.COMPILING, S.RUNNING, S.FINISHED]
    assert session.state is S.FINISHED
    assert session.updates_done == 25
    assert len(backend.seen) == 25
    assert sum(backend.chunks) == 25
    assert session.env_steps == 25 * FakeBackend.steps_per_update
    assert not session.stopped_early and session.error is None and not session.nonfinite
    assert backend.built_with is not None
    kinds = [e.kind for e in rec.events]
    assert kinds[0] == "compiled" and kinds[-1] == "finished"
    assert "error" not in kinds and "warning" not in kinds
    assert rec.events[-1].update == 25

    records = rec.records
    assert [r.update for r in records] == list(range(1, 26))
    assert [r.env_steps for r in records] == [u * FakeBackend.steps_per_update for u in range(1, 26)]
    assert all(b.wall_time >= a.wall_time for a, b in zip(records, records[1:]))
    last = rec.snapshots[-1]
    assert last.update == last.total_updates == 25
    assert last.env_steps == last.total_env_steps
    assert last.latest_return == 25.0
    assert last.history["episode_return"][-1] == 25.0
    assert last.history_env_steps[-1] == 25 * FakeBackend.steps_per_update


def test_join_with_timeout_returns_false_while_running(cleanup):
    session, rec, backend = gated_session()
    cleanup((session, backend))
    session.start()
    backend.wait_entered()
    assert session.join(0.05) is False
    assert session.state is S.RUNNING
    finish(session, backend)
    assert session.join(0) is True


def test_save_checkpoint_warns_and_training_continues():
    backend = FakeBackend()
    session, rec = make_session(backend, total_updates=5)
    session.submit(SaveCheckpoint())
    session.start()
    finish(session)
    warnings = rec.kinds("warning")
    assert len(warnings) == 1 and "checkpoint" in warnings[0].message
    assert session.state is S.FINISHED and session.updates_done == 5


# --- pause / resume ---------------------------------------------------------------------


def test_pause_at_next_chunk_boundary_then_resume(cleanup):
    session, rec, backend = gated_session(total_updates=6)
    cleanup((session, backend))
    session.start()
    assert backend.wait_entered() == 0
    session.submit(Pause())
    # the chunk in flight is not interrupted: the pause is taken at the boundary after it
    # (its event says update 1, below)
    assert session.state is S.RUNNING
    backend.release()
    paused = rec.wait_event("paused")
    assert paused.update == 1
    assert session.state is S.PAUSED
    # nothing runs while paused
    backend.release(5)
    assert_no_chunk_starts_while_paused(session, backend)
    assert session.updates_done == 1 and len(backend.seen) == 1
    assert rec.records[-1].update == 1

    session.submit(Resume())
    assert backend.wait_entered() == 1
    resumed = rec.wait_event("resumed")
    assert resumed.update == 1
    finish(session, backend)
    assert session.state is S.FINISHED
    assert session.updates_done == 6
    assert rec.state_seq == [S.COMPILING, S.RUNNING, S.PAUSED, S.RUNNING, S.FINISHED]


def test_resume_when_not_paused_and_double_pause_are_harmless(cleanup):
    session, rec, backend = gated_session(total_updates=4)
    cleanup((session, backend))
    session.submit(Resume())
    session.submit(Pause())
    session.submit(Pause())
    session.start()
    rec.wait_event("paused")
    assert_no_chunk_starts_while_paused(session, backend)
    session.submit(Resume())
    finish(session, backend)
    assert len(rec.kinds("paused")) == 1 and len(rec.kinds("resumed")) == 1
    assert session.state is S.FINISHED and session.updates_done == 4


# --- live hyperparameter edits ----------------------------------------------------------


def test_set_hparams_applies_at_next_chunk_boundary(cleanup):
    session, rec, backend = gated_session(total_updates=5)
    cleanup((session, backend))
    session.start()
    backend.wait_entered()  # chunk 0 (update 1) is running with the old value
    session.submit(SetHParams({"lr": 1e-3}))
    # not applied to the chunk in flight: the edit is taken at the boundary after it (its
    # event says update 1, and the chunk ran with the old value, below)
    assert float(session.hparams.lr) == pytest.approx(2.5e-4)
    backend.release()
    event = rec.wait_event("hparams")
    assert event.update == 1
    assert dict(event.data["changes"]) == {"lr": pytest.approx(1e-3)}
    assert dict(event.data["previous"]) == {"lr": pytest.approx(2.5e-4)}
    assert "lr" in event.message
    finish(session, backend)

    lrs = [float(hp.lr) for hp in backend.seen]
    assert lrs[0] == pytest.approx(2.5e-4)
    assert lrs[1:] == [pytest.approx(1e-3)] * 4
    assert float(session.hparams.lr) == pytest.approx(1e-3)
    # other hyperparameters untouched; still float32 so the compiled step is reused
    assert float(session.hparams.gamma) == pytest.approx(0.99)
    assert all(np.asarray(v).dtype == np.float32 for v in session.hparams)
    # what the dashboard sees follows the edit
    assert rec.snapshots[0].hparams["lr"] == pytest.approx(2.5e-4)
    assert rec.snapshots[-1].hparams["lr"] == pytest.approx(1e-3)
    assert [r.get("lr") for r in rec.records][1:] == [pytest.approx(1e-3)] * 4


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"lr": -1}, "lr"),
        ({"lr": 0}, "lr"),
        ({"gamma": 0}, "gamma"),
        ({"gamma": 1.5}, "gamma"),
        ({"gae_lambda": 2}, "gae_lambda"),
        ({"num_envs": 8}, "num_envs"),
        ({"anneal_lr": 0.0}, "anneal_lr"),
        ({"lr": "fast"}, "lr"),
        ({"lr": math.nan}, "lr"),
        ({"lr": True}, "lr"),
        ({"lr": 1e-3, "gamma": 2.0}, "gamma"),  # all or nothing
    ],
)
def test_invalid_edit_is_refused(changes, field):
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    session, rec = make_session(backend, total_updates=3, clock=clock)
    before = session.hparams
    session.submit(SetHParams(changes))
    session.start()
    finish(session)
    warnings = rec.kinds("warning")
    assert len(warnings) == 1
    assert "refused" in warnings[0].message and field in warnings[0].message
    assert rec.kinds("hparams") == []
    assert session.hparams == before
    assert all(hp == before for hp in backend.seen)
    assert session.state is S.FINISHED and session.updates_done == 3


def test_refused_edit_then_valid_edit(cleanup):
    session, rec, backend = gated_session(total_updates=3)
    cleanup((session, backend))
    session.start()
    backend.wait_entered()
    session.submit(SetHParams({"gamma": 0}))
    session.submit(SetHParams({"gamma": 0.9}))
    finish(session, backend)
    assert len(rec.kinds("warning")) == 1 and len(rec.kinds("hparams")) == 1
    assert float(backend.seen[-1].gamma) == pytest.approx(0.9)


def test_a_switch_edit_is_said_true_or_false(cleanup):
    session, rec, backend = gated_session(total_updates=3)
    cleanup((session, backend))
    session.start()
    backend.wait_entered()
    session.submit(SetHParams({"bootstrap_truncated": 0.0, "gamma": 0.98}))
    finish(session, backend)
    (event,) = rec.kinds("hparams")
    assert event.message == "set bootstrap_truncated true -> false, gamma 0.99 -> 0.98"


def test_commands_apply_in_submission_order(cleanup):
    session, rec, backend = gated_session(total_updates=4)
    cleanup((session, backend))
    session.start()
    backend.wait_entered()
    session.submit(SetHParams({"lr": 1e-3}))
    session.submit(SetHParams({"lr": 2e-3}))
    session.submit(Pause())
    session.submit(SetHParams({"ent_coef": 0.05}))
    session.submit(Resume())
    backend.release()
    assert backend.wait_entered() == 1
    finish(session, backend)

    kinds = [e.kind for e in rec.events if e.kind in ("hparams", "paused", "resumed")]
    assert kinds == ["hparams", "hparams", "paused", "hparams", "resumed"]
    changes = [dict(e.data["changes"]) for e in rec.kinds("hparams")]
    assert changes == [{"lr": pytest.approx(1e-3)}, {"lr": pytest.approx(2e-3)}, {"ent_coef": pytest.approx(0.05)}]
    assert float(backend.seen[1].lr) == pytest.approx(2e-3)
    assert float(backend.seen[1].ent_coef) == pytest.approx(0.05)
    assert float(session.hparams.lr) == pytest.approx(2e-3)


# --- stop -------------------------------------------------------------------------------


def test_stop_while_running_ends_early(cleanup):
    session, rec, backend = gated_session(total_updates=10)
    cleanup((session, backend))
    session.start()
    backend.wait_entered()
    backend.release()
    backend.wait_entered()  # chunk 1 (update 2) in flight
    session.stop()
    backend.release()
    assert session.join(TIMEOUT)
    assert session.state is S.FINISHED
    assert session.stopped_early
    assert session.updates_done == 2 == len(backend.seen)
    assert rec.state_seq[-2:] == [S.STOPPING, S.FINISHED]
    assert rec.wait_event("stopping").update == 2
    assert "stopped at update 2" in rec.events[-1].message
    # The final state says how the run ended too: a client (serve) tells a stop from a finish.
    assert rec.states[-1] == (S.FINISHED, "stopped at update 2")


def test_stop_while_paused_ends(cleanup):
    session, rec, backend = gated_session(total_updates=10)
    cleanup((session, backend))
    session.start()
    backend.wait_entered()
    session.submit(Pause())
    backend.release()
    rec.wait_event("paused")
    session.submit(Stop())
    assert session.join(TIMEOUT), "stop while paused did not end the session"
    assert session.state is S.FINISHED and session.stopped_early
    assert session.updates_done == 1


def test_stop_before_compile_finishes_runs_nothing():
    backend = FakeBackend()
    session, rec = make_session(backend, total_updates=10)
    session.stop()
    session.start()
    finish(session)
    assert session.state is S.FINISHED and session.stopped_early
    assert session.updates_done == 0 and backend.chunks == []


# --- failures ---------------------------------------------------------------------------


def test_exception_in_run_chunk_gives_error_state():
    clock = FakeClock()
    backend = FakeBackend(clock=clock, fail_at=3)
    session, rec = make_session(backend, total_updates=10, clock=clock)
    session.start()
    assert session.join(TIMEOUT), "session hung after an exception"
    assert session.state is S.ERROR
    assert session.error is not None and "boom at update 3" in session.error
    assert "ValueError" in session.error
    errors = rec.kinds("error")
    assert len(errors) == 1 and "boom at update 3" in errors[0].message
    assert "Traceback" in errors[0].data["traceback"]
    assert rec.states[-1] == (S.ERROR, session.error)
    assert S.FINISHED not in rec.state_seq
    assert "finished" not in [e.kind for e in rec.events]
    assert session.updates_done == 2


def test_a_failure_whose_message_runs_over_lines_is_one_line_and_its_traceback_keeps_the_rest():
    class AdvisingBackend(FakeBackend):
        def build(self, hparams):
            raise RuntimeError("RESOURCE_EXHAUSTED: out of memory\nadvice the library goes on with")

    session, rec = make_session(AdvisingBackend(), total_updates=10)
    session.start()
    assert session.join(TIMEOUT)
    assert session.error == "RuntimeError: RESOURCE_EXHAUSTED: out of memory"  # as every other message names one
    assert rec.kinds("error")[0].message == session.error
    assert "advice the library goes on with" in rec.kinds("error")[0].data["traceback"]


def test_exception_in_build_gives_error_state():
    backend = FakeBackend(fail_in_build=True)
    session, rec = make_session(backend, total_updates=10)
    session.start()
    assert session.join(TIMEOUT)
    assert session.state is S.ERROR
    assert "compile exploded" in session.error
    assert rec.state_seq == [S.COMPILING, S.ERROR]
    assert rec.states[-1][1] == session.error
    assert len(rec.kinds("error")) == 1 and rec.kinds("compiled") == []
    assert backend.chunks == [] and session.updates_done == 0


def test_a_q_learner_pauses_on_its_own_losses_and_not_on_a_policys_it_has_none_of(cleanup):
    # PQN reports no policy loss (NaN in every update); a NaN TD loss is its divergence.
    clock = FakeClock()
    backend = FakeBackend(clock=clock, bad_at=2, bad_metric="policy_loss", algo="pqn")
    session, rec = make_session(backend, total_updates=3, clock=clock)
    cleanup((session, backend))
    session.start()
    finish(session, backend)
    assert session.state is S.FINISHED and not rec.kinds("nonfinite")

    backend = FakeBackend(clock=clock, bad_at=2, bad_metric="td_loss", algo="pqn")
    session, rec = make_session(backend, total_updates=3, clock=clock)
    cleanup((session, backend))
    session.start()
    assert rec.wait_event("nonfinite").update == 2


@pytest.mark.parametrize(
    "metric,value",
    [("policy_loss", math.nan), ("value_loss", math.inf), ("entropy", math.nan), ("grad_norm", -math.inf)],
)
def test_nonfinite_loss_pauses_the_session(cleanup, metric, value):
    clock = FakeClock()
    backend = FakeBackend(clock=clock, bad_at=3, bad_metric=metric, bad_value=value)
    session, rec = make_session(backend, total_updates=8, clock=clock)
    cleanup((session, backend))
    session.start()
    event = rec.wait_event("nonfinite")
    assert event.update == 3
    rec.wait_for(lambda: S.PAUSED in rec.state_seq)
    assert session.state is S.PAUSED and session.nonfinite
    assert_no_chunk_starts_while_paused(session, backend)
    assert session.updates_done == 3
    bad = [r for r in rec.records if r.update == 3][0]
    assert bad.to_json()[metric] is None

    session.submit(SetHParams({"lr": 1e-5}))
    session.submit(Resume())
    finish(session, backend)
    assert session.state is S.FINISHED and session.updates_done == 8
    assert not session.nonfinite
    assert float(backend.seen[-1].lr) == pytest.approx(1e-5)


def test_nan_episode_return_alone_does_not_pause():
    clock = FakeClock()
    backend = FakeBackend(clock=clock, bad_at=2, bad_metric="episode_return", bad_value=math.nan)
    session, rec = make_session(backend, total_updates=5, clock=clock)
    session.start()
    finish(session)
    assert rec.kinds("nonfinite") == []
    assert S.PAUSED not in rec.state_seq
    assert session.state is S.FINISHED and session.updates_done == 5 and not session.nonfinite
    second = [r for r in rec.records if r.update == 2][0]
    assert second.to_json()["episode_return"] is None


# --- snapshots --------------------------------------------------------------------------


def test_snapshots_are_immutable_and_records_consecutive():
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    session, rec = make_session(backend, total_updates=12, clock=clock, chunk_seconds=3.0)
    session.start()
    finish(session)
    snaps = rec.snapshots
    assert len(snaps) > 2
    first = snaps[0]
    kept = (first.update, first.history_env_steps, dict(first.history))
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.update = 99
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.history = {}
    with pytest.raises(TypeError):
        first.history["episode_return"] = (1.0,)
    for snap in snaps:
        assert isinstance(snap.new_records, tuple)
        assert isinstance(snap.history_env_steps, tuple)
        assert all(isinstance(values, tuple) for values in snap.history.values())
    record = snaps[-1].new_records[-1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.update = 0
    with pytest.raises(TypeError):
        record.values["lr"] = 1.0
    # a snapshot kept by a client does not change as training goes on
    assert (first.update, first.history_env_steps, dict(first.history)) == kept
    assert len(first.history["episode_return"]) == first.update < snaps[-1].update

    updates = [r.update for s in snaps for r in s.new_records]
    assert updates == list(range(1, 13))
    for snap in snaps:
        if snap.new_records:
            assert snap.new_records[-1].update == snap.update


def test_snapshot_hparams_are_read_only():
    """The same snapshot goes to every listener: one listener must not be able to
    change what the others (or a kept snapshot) see."""
    backend = FakeBackend()
    session, rec = make_session(backend, total_updates=2)
    session.start()
    finish(session)
    snap = rec.snapshots[-1]
    with pytest.raises(TypeError):
        snap.hparams["lr"] = 1.0


def test_history_is_bounded():
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    session, rec = make_session(backend, total_updates=20, clock=clock, chunk_seconds=4.0, history=8)
    session.start()
    finish(session)
    last = rec.snapshots[-1]
    assert len(last.history["episode_return"]) == 8
    assert last.history["episode_return"] == tuple(float(u) for u in range(13, 21))
    assert last.history_env_steps == tuple(u * FakeBackend.steps_per_update for u in range(13, 21))


# --- chunk sizing -----------------------------------------------------------------------


def test_chunk_size_adapts_from_measured_time():
    backend = FakeBackend(sleep_per_update=0.005, max_chunk_updates=16)
    session, rec = make_session(backend, total_updates=120, chunk_seconds=0.05)
    session.start()
    finish(session)
    sizes = backend.chunks
    assert sum(sizes) == 120 and session.updates_done == 120
    assert sizes[0] == 1
    assert max(sizes[1:]) > 1, sizes
    assert max(sizes) <= 16, sizes
    # grows at most 8x per chunk
    assert all(b <= 8 * a for a, b in zip(sizes, sizes[1:])), sizes
    # about chunk_seconds per chunk, not one chunk per update
    assert len(sizes) < 60, sizes


def test_chunk_size_growth_and_cap_exact():
    clock = FakeClock()
    backend = FakeBackend(clock=clock, clock_per_update=2**-10, max_chunk_updates=100)
    session, rec = make_session(backend, total_updates=400, clock=clock, chunk_seconds=1.0)
    session.start()
    finish(session)
    # ~1 ms per update, 1 s target: 1024 wanted, limited to 8x growth, then to the cap
    assert backend.chunks[:5] == [1, 8, 64, 100, 100]
    assert sum(backend.chunks) == 400
    assert max(backend.chunks) == 100


def test_chunk_size_shrinks_when_updates_slow_down():
    clock = FakeClock()
    # 1/64 s per update for the first 41 updates (chunks 1, 8, 32), then 1 s per update
    backend = FakeBackend(clock=clock, clock_per_update=lambda u: 2**-6 if u <= 41 else 1.0, max_chunk_updates=512)
    session, rec = make_session(backend, total_updates=90, clock=clock, chunk_seconds=0.5)
    session.start()
    finish(session)
    sizes = backend.chunks
    assert sizes[:4] == [1, 8, 32, 32], sizes
    # after a slow chunk, one update per chunk so pause/edit latency stays bounded
    assert sizes[4:] == [1] * 17, sizes
    assert sum(sizes) == 90


@pytest.mark.parametrize("algo,warns", [("dqn", True), ("pqn", True), ("sac", False), ("ppo", False)])
def test_q_values_far_beyond_what_the_rewards_allow_warn_once_without_pausing(cleanup, algo, warns):
    # Every update's largest |reward| is 0.5 at gamma 0.99: |Q| <= 50. Update 3 reports 1e4,
    # update 4 too: one warning, naming update 3. SAC's soft values have no such bound.
    clock = FakeClock()
    backend = FakeBackend(clock=clock, bad_at=3, bad_metric="q_mean", bad_value=1e4, algo=algo)
    original = backend.run_chunk

    def chunk(num_updates, hparams):
        rows = original(num_updates, hparams)
        for i, row in enumerate(rows):
            if len(backend.seen) - len(rows) + i + 1 == 4:
                row["q_mean"] = -2e4
        return rows

    backend.run_chunk = chunk
    session, rec = make_session(backend, total_updates=6, clock=clock)
    cleanup((session, backend))
    session.start()
    finish(session, backend)
    assert session.state is S.FINISHED and session.updates_done == 6
    beyond = [e for e in rec.kinds("warning") if "Q values diverging" in e.message]
    if not warns:
        assert beyond == []
        return
    assert len(beyond) == 1, [e.message for e in beyond]
    assert beyond[0].update == 3  # the update it is about, not the end of its chunk
    hint = "lowering lr, or raising target_period," if algo == "dqn" else "lowering lr"
    assert beyond[0].message == (
        "Q values diverging: mean Q 1e+04 at update 3 is more than 2x the ±50 that the rewards seen allow "
        f"(largest |reward| 0.5 / (1 - gamma 0.99)); {hint} usually helps")
