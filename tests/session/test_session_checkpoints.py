"""Checkpoint files (rltui.runfiles.checkpoints) and the session's save / resume / rollback."""

import errno
import json
import math
import re
import threading
from pathlib import Path

import pytest

from rltui.runfiles import checkpoints as checkpoints_module
from rltui.runfiles.checkpoints import CheckpointStore, resolve_checkpoint
from rltui.session import Resume, SaveCheckpoint, SessionListener, SessionState, Stop, TrainingSession
from rltui.session.backend import NonFiniteState
from rltui.session.checkpoints import CheckpointPolicy
from rltui.session.commands import Rollback
from trainers.hparams import DynamicHParams


class CountingBackend:
    """Pure-Python backend whose whole state is a counter; NaN losses from `bad_from` on."""

    steps_per_update = 8
    max_chunk_updates = 4

    def __init__(self, bad_from=None):
        self.counter = 0
        self.bad_from = bad_from
        self.gate = threading.Semaphore(0)
        self.gated = False

    def build(self, hparams):
        pass

    def run_chunk(self, num_updates, hparams):
        if self.gated:
            self.gate.acquire(timeout=10)
        rows = []
        for _ in range(num_updates):
            self.counter += 1
            bad = self.bad_from is not None and self.counter >= self.bad_from
            rows.append({"policy_loss": math.nan if bad else 0.1, "value_loss": 0.2, "entropy": 0.5, "grad_norm": 1.0})
        return rows

    def describe(self):
        return {"algo": "ppo", "devices": ["cpu:0"], "device_kind": "cpu", "static": {}}

    def encode_checkpoint(self, metadata):
        if self.bad_from is not None and self.counter >= self.bad_from:
            raise NonFiniteState("nan")
        return json.dumps({"counter": self.counter, "metadata": metadata}).encode()

    def restore_checkpoint(self, data):
        payload = json.loads(data)
        self.counter = payload["counter"]
        return payload["metadata"]


class Events(SessionListener):
    def __init__(self):
        self.events = []

    def on_event(self, event):
        self.events.append(event)

    def kinds(self):
        return [e.kind for e in self.events]


def wait_until_paused(session, seconds: float = 4.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if session.state is SessionState.PAUSED:
            return
        session.join(0.02)


def run_session(tmp_path, backend, total, **kwargs):
    store = CheckpointStore.for_run(tmp_path, keep=kwargs.pop("keep", 3))
    session = TrainingSession(backend, DynamicHParams(), total, checkpoints=store, **kwargs)
    events = Events()
    session.add_listener(events)
    return session, store, events


def test_store_writes_atomically_keeps_last_n_and_cleans_stale_temps(tmp_path):
    store = CheckpointStore(tmp_path / "ck", keep=2)
    store.prepare()
    (tmp_path / "ck" / ".tmp-checkpoint-stale").write_bytes(b"half a checkpoint")
    store.prepare()
    assert list((tmp_path / "ck").iterdir()) == []
    for update in (1, 2, 3):
        store.save(f"state {update}".encode(), update)
    assert [p.name for p in store.paths()] == ["checkpoint-000000002.msgpack", "checkpoint-000000003.msgpack"]
    assert store.latest().read_bytes() == b"state 3"


def test_disk_full_during_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    store = CheckpointStore(tmp_path, keep=3)
    store.save(b"good", 1)

    def full_disk(f, data):
        f.write(data[:3])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoints_module, "write_all", full_disk)
    with pytest.raises(OSError):
        store.save(b"newer", 2)
    assert [p.name for p in store.paths()] == ["checkpoint-000000001.msgpack"]
    assert store.latest().read_bytes() == b"good"
    assert not list(tmp_path.glob(".tmp-*"))


def test_session_reports_disk_full_and_keeps_training(tmp_path, monkeypatch):
    backend = CountingBackend()
    session, store, events = run_session(tmp_path, backend, 12, checkpoint_policy=CheckpointPolicy(every_updates=4))

    calls = []

    def sometimes_full(f, data):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        f.write(data)

    monkeypatch.setattr(checkpoints_module, "write_all", sometimes_full)
    session.start()
    assert session.join(10)
    assert session.state is SessionState.FINISHED and session.updates_done == 12
    warnings = [e.message for e in events.events if e.kind == "warning"]
    assert any("No space left" in w for w in warnings)
    assert store.latest().name == "checkpoint-000000012.msgpack"


def test_a_periodic_checkpoint_due_on_the_last_update_is_the_final_one(tmp_path):
    backend = CountingBackend()
    backend.gated = True
    session, store, events = run_session(tmp_path, backend, 16, checkpoint_policy=CheckpointPolicy(every_updates=16))
    session.start()
    for _ in range(16):  # the one save due is at update 16, the last
        backend.gate.release()
    assert session.join(10)
    saved = [(e.update, e.data["reason"]) for e in events.events if e.kind == "checkpoint"]
    assert saved == [(16, "final")]
    assert json.loads(store.latest().read_bytes())["metadata"]["reason"] == "final"


class ClockedBackend(CountingBackend):
    """Each update takes a second of a fake clock, and each save `write_seconds` of it."""

    def __init__(self, write_seconds: float):
        super().__init__()
        self.now, self.write_seconds = 0.0, write_seconds

    def clock(self) -> float:
        return self.now

    def run_chunk(self, num_updates, hparams):
        self.now += num_updates
        return super().run_chunk(num_updates, hparams)

    def encode_checkpoint(self, metadata):
        self.now += self.write_seconds
        return super().encode_checkpoint(metadata)


@pytest.mark.parametrize(("write_seconds", "total", "expected"), [
    # the first after 10 s of training, then every minute: a crash costs at most a minute
    (0.0, 200, [(10, "periodic"), (70, "periodic"), (130, "periodic"), (190, "periodic"), (200, "final")]),
    # a save that takes 2 s waits 200 s for the next: saving stays within 1% of the run
    (2.0, 250, [(10, "periodic"), (210, "periodic"), (250, "final")]),
])
def test_by_default_a_crash_costs_at_most_a_minute_and_saving_at_most_1_percent(tmp_path, write_seconds, total,
                                                                                  expected):
    backend = ClockedBackend(write_seconds)
    session, _, events = run_session(tmp_path, backend, total, clock=backend.clock)
    session.start()
    assert session.join(10)
    saved = [(e.update, e.data["reason"]) for e in events.events if e.kind == "checkpoint"]
    assert saved == expected
    assert all(e.data["seconds"] == write_seconds for e in events.events if e.kind == "checkpoint")


def test_periodic_requested_and_final_checkpoints(tmp_path):
    backend = CountingBackend()
    backend.gated = True
    session, store, events = run_session(tmp_path, backend, 40, checkpoint_policy=CheckpointPolicy(every_updates=8))
    session.start()
    backend.gate.release()  # first chunk: 1 update
    session.submit(SaveCheckpoint())
    for _ in range(40):
        backend.gate.release()
    assert session.join(10)
    saved = [e for e in events.events if e.kind == "checkpoint"]
    reasons = [e.data["reason"] for e in saved]
    assert reasons[0] == "requested" and reasons[-1] == "final" and "periodic" in reasons
    assert saved[-1].update == 40
    metadata = json.loads(store.latest().read_bytes())["metadata"]
    assert metadata["update"] == 40 and metadata["env_steps"] == 320
    assert {"jax", "flax", "optax", "gymnax", "rltui"} <= set(metadata["versions"])
    assert len(store.paths()) <= 3


def test_nan_pauses_and_never_writes_a_checkpoint_of_the_diverged_state(tmp_path):
    backend = CountingBackend(bad_from=6)
    session, store, events = run_session(tmp_path, backend, 100, checkpoint_policy=CheckpointPolicy(every_updates=2))
    session.start()
    wait_until_paused(session)
    assert session.state is SessionState.PAUSED and session.nonfinite
    session.submit(SaveCheckpoint())
    session.submit(Stop())
    assert session.join(10)
    latest = json.loads(store.latest().read_bytes())
    assert latest["counter"] < 6  # every checkpoint predates the divergence
    assert "nonfinite" in events.kinds()


def test_rollback_restores_latest_checkpoint_and_keeps_edited_hparams(tmp_path):
    backend = CountingBackend(bad_from=6)
    session, store, events = run_session(tmp_path, backend, 100, checkpoint_policy=CheckpointPolicy(every_updates=2))
    session.start()
    wait_until_paused(session)
    assert session.nonfinite
    good = json.loads(store.latest().read_bytes())["counter"]
    backend.bad_from = None  # the lower learning rate "fixes" training
    from rltui.session import SetHParams

    session.submit(SetHParams({"lr": 1e-5}))
    session.submit(Rollback())
    session.submit(Resume())
    assert session.join(10)
    assert session.state is SessionState.FINISHED
    rolled = [e for e in events.events if e.kind == "rolled back"]
    assert rolled and rolled[0].update == good
    assert float(session.hparams.lr) == pytest.approx(1e-5)
    assert session.updates_done == 100


def test_rollback_takes_the_history_back_to_the_checkpoint(tmp_path):
    from rltui.runfiles.names import METRICS_DISCARDED as DISCARDED
    from rltui.session.recorder import RunRecorder

    class Snapshots(SessionListener):
        def __init__(self):
            self.seen = []

        def on_metrics(self, snapshot):
            self.seen.append(snapshot)

    backend = CountingBackend(bad_from=6)
    session, store, events = run_session(tmp_path, backend, 12, checkpoint_policy=CheckpointPolicy(every_updates=2))
    snapshots, recorder = Snapshots(), RunRecorder(tmp_path)
    session.add_listener(snapshots)
    session.add_listener(recorder)
    session.start()
    wait_until_paused(session)
    assert session.nonfinite
    diverged, good = session.updates_done, json.loads(store.latest().read_bytes())["counter"]
    assert diverged > good
    backend.bad_from = None
    session.submit(Rollback())
    for _ in range(200):  # still paused: the new position is published all the same
        if snapshots.seen[-1].update == good:
            break
        session.join(0.02)
    assert snapshots.seen[-1].update == good and session.state is SessionState.PAUSED
    assert max(snapshots.seen[-1].history_env_steps) == good * backend.steps_per_update
    session.submit(Resume())
    assert session.join(10)
    recorder.close()

    rolled = [e for e in events.events if e.kind == "rolled back"]
    assert rolled[0].message == f"rolled back from update {diverged} to the checkpoint of update {good}"
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["update"] for line in lines] == list(range(1, 13))  # one history, in order
    discarded = (tmp_path / DISCARDED).read_text().splitlines()
    assert [json.loads(line)["update"] for line in discarded] == list(range(good + 1, diverged + 1))
    steps = snapshots.seen[-1].history_env_steps
    assert list(steps) == sorted(set(steps))


def test_resume_continues_update_count_and_edit_log(tmp_path):
    backend = CountingBackend()
    session, store, _ = run_session(tmp_path, backend, 10)
    from rltui.session import SetHParams

    session.submit(SetHParams({"gamma": 0.9}))
    session.start()
    assert session.join(10)
    data = store.latest().read_bytes()

    second = CountingBackend()
    resumed, _, events = run_session(tmp_path, second, 16, resume=data)
    resumed.start()
    assert resumed.join(10)
    assert second.counter == 16  # restored at 10, then 6 more
    assert resumed.updates_done == 16
    assert [e.update for e in events.events if e.kind == "resumed"] == [10]
    # the resume says which edits came before it, so a dashboard marks them on its chart again
    resumed_event = next(e for e in events.events if e.kind == "resumed")
    assert [dict(edit) for edit in resumed_event.data["edits"]] == [{"update": 0, "changes": {"gamma": 0.9}}]
    metadata = json.loads(CheckpointStore.for_run(tmp_path).latest().read_bytes())["metadata"]
    assert metadata["edits"][0]["changes"] == {"gamma": 0.9}


def test_resolve_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such"):
        resolve_checkpoint(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="holds no checkpoints"):
        resolve_checkpoint(tmp_path)
    store = CheckpointStore.for_run(tmp_path)
    store.save(b"a", 5)
    store.save(b"b", 7)
    assert resolve_checkpoint(tmp_path).name == "checkpoint-000000007.msgpack"
    assert resolve_checkpoint(store.paths()[0]).name == "checkpoint-000000005.msgpack"


def test_resolve_checkpoint_of_something_that_is_not_a_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a checkpoint file or a run directory"):
        resolve_checkpoint(Path("/dev/null"))


# --- nothing ends the session unreported (issue 21) --------------------------------------


class RaisesAt(SessionListener):
    """A listener that raises `exc` from on_metrics once the session has reached `update`."""

    def __init__(self, exc: BaseException, update: int):
        self.exc, self.update = exc, update

    def on_metrics(self, snapshot):
        if snapshot.update >= self.update:
            raise self.exc


@pytest.mark.parametrize(
    "exc", [SystemExit(1), KeyboardInterrupt(), ValueError("display broke"), BaseException("odd")],
    ids=["SystemExit", "KeyboardInterrupt", "ValueError", "BaseException"],
)
def test_listener_exception_ends_in_error_with_an_event_and_a_checkpoint(tmp_path, exc):
    # A display's broken-pipe handling raises SystemExit on the session thread, where a
    # thread swallows it: the session must still say so, and save what it had trained.
    backend = CountingBackend()
    session, store, events = run_session(tmp_path, backend, 40)
    session.add_listener(RaisesAt(exc, 5))
    session.start()
    assert session.join(10)
    assert session.state is SessionState.ERROR
    assert type(exc).__name__ in session.error and "RaisesAt" in session.error
    errors = [e for e in events.events if e.kind == "error"]
    assert len(errors) == 1 and errors[0].data["checkpoint"].startswith("saved checkpoint-")
    latest = store.latest()
    assert latest is not None and json.loads(latest.read_bytes())["counter"] == session.updates_done >= 5
    assert json.loads(latest.read_bytes())["metadata"]["reason"] == "error"


def test_a_listener_that_keeps_raising_cannot_hide_the_error(tmp_path):
    class AlwaysRaises(SessionListener):
        def on_event(self, event):
            raise OSError(28, "No space left on device")

    states = []

    class States(SessionListener):
        def on_state(self, state, message):
            states.append(state)

    # First in line: the listeners after it must still hear of the error.
    session = TrainingSession(CountingBackend(), DynamicHParams(), 8, checkpoints=CheckpointStore.for_run(tmp_path))
    events = Events()
    for listener in (AlwaysRaises(), events, States()):
        session.add_listener(listener)
    session.start()
    assert session.join(10)
    assert session.state is SessionState.ERROR and states[-1] is SessionState.ERROR
    assert "No space left on device" in session.error
    assert "error" in events.kinds()


def test_warning_from_another_thread_becomes_an_event(tmp_path):
    backend = CountingBackend()
    backend.gated = True
    session, _, events = run_session(tmp_path, backend, 8)
    session.start()
    session.warn("output closed; training goes on")
    for _ in range(8):
        backend.gate.release()
    assert session.join(10)
    assert session.state is SessionState.FINISHED
    warnings = [e for e in events.events if e.kind == "warning"]
    assert [w.message for w in warnings] == ["output closed; training goes on"]
    assert events.kinds()[-1] == "finished"


def _failing_after(monkeypatch, good: int) -> None:
    calls = []

    def full_disk(f, data):
        calls.append(1)
        if len(calls) > good:
            raise OSError(errno.ENOSPC, "No space left on device")
        f.write(data)

    monkeypatch.setattr(checkpoints_module, "write_all", full_disk)


@pytest.mark.parametrize("good, on_disk", [
    (0, "no checkpoint on disk"),
    (1, "the latest checkpoint on disk is checkpoint-000000005.msgpack (update 5)"),  # chunks 1, 4, 4, 1
])
def test_failed_final_checkpoint_is_reported_with_what_is_on_disk(tmp_path, monkeypatch, good, on_disk):
    _failing_after(monkeypatch, good)
    backend = CountingBackend()
    session, _, events = run_session(tmp_path, backend, 10, checkpoint_policy=CheckpointPolicy(every_updates=4))
    session.start()
    assert session.join(10)
    assert session.state is SessionState.FINISHED and session.updates_done == 10
    failure = session.checkpoint_failure
    assert failure is not None and failure.reason == "No space left on device" and failure.on_disk == on_disk
    last_warning = [e.message for e in events.events if e.kind == "warning"][-1]
    assert last_warning == f"checkpoint of update 10 failed (No space left on device); {on_disk}"
    assert "earlier checkpoints kept" not in last_warning
    assert events.events[-1].kind == "finished" and events.events[-1].data["checkpoint_failed"]


def test_a_later_successful_save_clears_the_failure(tmp_path, monkeypatch):
    calls = []

    def once_full(f, data):
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        f.write(data)

    monkeypatch.setattr(checkpoints_module, "write_all", once_full)
    session, store, _ = run_session(
        tmp_path, CountingBackend(), 10, checkpoint_policy=CheckpointPolicy(every_updates=4)
    )
    session.start()
    assert session.join(10)
    assert session.checkpoint_failure is None
    assert store.latest().name == "checkpoint-000000010.msgpack"


def test_a_state_too_large_to_checkpoint_is_a_warning_and_training_goes_on(tmp_path, monkeypatch):
    from trainers import checkpoint

    backend = CountingBackend()
    session, store, events = run_session(tmp_path, backend, 12, checkpoint_policy=CheckpointPolicy(every_updates=4))
    encode, calls = backend.encode_checkpoint, []

    def grown_too_large(metadata):
        calls.append(1)
        if len(calls) == 2:
            raise checkpoint.CheckpointError(checkpoint.too_large_message(5 << 30))
        return encode(metadata)

    monkeypatch.setattr(backend, "encode_checkpoint", grown_too_large)
    session.start()
    assert session.join(10)
    assert session.state is SessionState.FINISHED and session.updates_done == 12
    warnings = [e.message for e in events.events if e.kind == "warning"]
    assert len(warnings) == 1 and re.fullmatch(
        r"checkpoint of update \d+ failed \(the training state is 5.0 GiB, more than the 4 GiB a checkpoint holds; "
        r"lower the sweep's size, num_seeds, num_envs or hidden_sizes\); the latest checkpoint on disk is "
        r"checkpoint-\d{9}\.msgpack \(update \d+\)", warnings[0]), warnings
    assert store.latest().name == "checkpoint-000000012.msgpack"
