"""A fake TrainingSession for dashboard tests: the same client API, no trainer, no JAX.

It emits states, snapshots (real MetricsSnapshot/UpdateRecord objects) and events
through the listeners from its own thread, like the real session, and records every
command it is sent. Commands are answered the way the session answers them (PAUSED
after Pause, an 'hparams' event after SetHParams, ...) unless a chunk is "in flight":
`hold_chunk()` makes it sit on commands until `release_chunk()`, like a session that is
running a long chunk.
"""

from __future__ import annotations

import math
import queue
import threading
from concurrent.futures import Future
from types import MappingProxyType

from rltui.session import (
    MetricsSnapshot,
    Pause,
    Resume,
    SaveCheckpoint,
    SessionEvent,
    SessionState,
    SetHParams,
    Stop,
    UpdateRecord,
    validate_changes,
)
from rltui.session.commands import Rollback
from rltui.session.devices import DeviceStats, FixedDeviceStats, GpuStats, JaxDeviceStats
from rltui.session.interface import ParamsSnapshot, ParamsUnavailable
from rltui.session.metrics import RECORDED_METRICS, MetricsStore
from trainers.hparams import DynamicHParams

TIMEOUT = 10.0


def metric_values(update: int) -> dict[str, float]:
    """Deterministic, plausible metrics for update `update` (1-based)."""
    return {
        # NaN on every 5th update: no episode finished then, as happens in real runs.
        "episode_return": math.nan if update % 5 == 0 else min(500.0, 9.0 + 4.5 * update + 3 * math.sin(update)),
        "episode_length": min(500.0, 9.0 + 4.5 * update),
        "episodes": 4.0,
        "policy_loss": -0.01 + 0.004 * math.sin(update / 3),
        "value_loss": 40.0 / (1 + 0.1 * update),
        "entropy": 0.69 - 0.002 * update,
        "approx_kl": 0.002 + 0.001 * math.cos(update / 4),
        "clip_frac": 0.05,
        "grad_norm": 0.5 + 0.1 * math.sin(update),
        "lr": 2.5e-4 * (1 - update / 1000),
    }


def fixed_device_stats() -> FixedDeviceStats:
    """Device numbers that never change: snapshots must not show live CPU use."""
    return FixedDeviceStats(
        DeviceStats(
            cpu_percent=(12.0, 87.0, 50.0, 3.0),
            process_rss=812 * 2**20,
            memory_total=16 * 2**30,
            jax_devices=(JaxDeviceStats("cpu", 0, "cpu"),),
            gpus=(GpuStats(0, "Fake GPU", 93.0, 12 * 2**30, 80 * 2**30),),
            unavailable={},
        )
    )


class FakeSession:
    outlives_client = False  # like the in-process session: quitting the dashboard stops it

    def __init__(self, *, total_updates: int = 1000, steps_per_update: int = 512, env: str = "CartPole-v1"):
        self.total_updates = total_updates
        self.steps_per_update = steps_per_update
        self.env = env
        self.actions = "discrete"  # CartPole's; what the real session says once its env is built
        self.commands: list[object] = []
        self._hparams = DynamicHParams.create(anneal_updates=float(total_updates))
        self._listeners = []
        self._state = SessionState.IDLE
        self._store = MetricsStore(4096)
        self._update = 0
        self._saved = 0  # the update of the latest checkpoint (SaveCheckpoint)
        self._queue: queue.Queue = queue.Queue()
        self._chunk_done = threading.Event()
        self._chunk_done.set()
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fake-session", daemon=True)
        self.started = False
        # What request_params hands out: (params, obs_stats) of a real network, set by a
        # test that watches the policy; None answers ParamsUnavailable.
        self.acting = None
        self.params_requests = 0

    # --- the client API the dashboard uses -------------------------------------------
    def add_listener(self, listener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener) -> None:
        self._listeners = [known for known in self._listeners if known is not listener]

    def start(self) -> None:
        self.started = True
        self._thread.start()

    def submit(self, command) -> None:
        self.commands.append(command)
        self._queue.put(command)

    def stop(self) -> None:
        self.submit(Stop())

    def request_params(self) -> Future:
        """Answered at once (the fake has no chunks), with the current update."""
        self.params_requests += 1
        future: Future = Future()
        if self.acting is None:
            future.set_exception(ParamsUnavailable("this fake session has no parameters"))
        else:
            future.set_result(ParamsSnapshot(self._update, *self.acting))
        return future

    def join(self, timeout: float | None = None) -> bool:
        return self._ended.wait(timeout)

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def hparams(self) -> DynamicHParams:
        return self._hparams

    def describe(self) -> dict:
        # The real session knows its action space once its env is built (None: not yet).
        return {"env": self.env, "algo": "ppo", "devices": ["cpu:0"], "device_kind": "cpu",
                **({"actions": self.actions} if self.actions else {})}

    # --- test controls (any thread) ---------------------------------------------------
    def commands_of(self, kind: type) -> list:
        return [c for c in self.commands if isinstance(c, kind)]

    def set_state(self, state: SessionState, message: str | None = None) -> None:
        self._state = state
        for listener in self._listeners:
            listener.on_state(state, message)

    def event(self, kind: str, message: str, **data) -> SessionEvent:
        event = SessionEvent(kind=kind, update=self._update, message=message, wall_time=self._update * 0.01, data=data)
        for listener in self._listeners:
            listener.on_event(event)
        return event

    def rollback_to(self, update: int) -> MetricsSnapshot:
        """What the session does on a rollback to a checkpoint of `update`: forget the
        history after it, say so (with its env steps), publish the new position."""
        before, self._update = self._update, update
        self._store.drop_after(update * self.steps_per_update)
        self.event("rolled back", f"rolled back from update {before} to the checkpoint of update {update}",
                   env_steps=update * self.steps_per_update)
        return self.advance(0)

    def advance(self, updates: int, overrides: dict[int, dict[str, float]] | None = None) -> MetricsSnapshot:
        """Run `updates` fake updates (metrics from `metric_values`, with `overrides` per
        update index) and publish the snapshot, as the session does after a chunk."""
        records = []
        for _ in range(updates):
            self._update += 1
            values = metric_values(self._update)
            values.update((overrides or {}).get(self._update, {}))
            records.append(
                UpdateRecord(
                    update=self._update,
                    env_steps=self._update * self.steps_per_update,
                    wall_time=self._update * 0.01,
                    sps=51_200.0,
                    values={name: values.get(name, math.nan) for name in RECORDED_METRICS},
                )
            )
        self._store.extend(records)
        history, steps = self._store.history()
        snapshot = MetricsSnapshot(
            state=self._state,
            update=self._update,
            total_updates=self.total_updates,
            env_steps=self._update * self.steps_per_update,
            total_env_steps=self.total_updates * self.steps_per_update,
            elapsed=self._update * 0.01,
            sps=51_200.0,
            hparams=MappingProxyType(self._hparams.as_floats()),
            new_records=tuple(records),
            history=history,
            history_env_steps=steps,
        )
        for listener in self._listeners:
            listener.on_metrics(snapshot)
        return snapshot

    def on_thread(self, fn, *args, **kwargs) -> None:
        """Run `fn` on a separate thread (as the session thread would) and wait for it."""
        thread = threading.Thread(target=fn, args=args, kwargs=kwargs)
        thread.start()
        thread.join(TIMEOUT)

    def hold_chunk(self) -> None:
        """A chunk is in flight: commands wait until `release_chunk`."""
        self._chunk_done.clear()

    def release_chunk(self) -> None:
        self._chunk_done.set()

    # --- the fake session thread: answers commands at "chunk boundaries" ------------------
    def _serve(self) -> None:
        self.set_state(SessionState.RUNNING)
        try:
            while True:
                command = self._queue.get()
                self._chunk_done.wait(TIMEOUT * 3)
                if isinstance(command, Stop):
                    self.set_state(SessionState.STOPPING)
                    self.event("stopping", f"stop requested at update {self._update}")
                    self.event("finished", f"stopped at update {self._update}")
                    self.set_state(SessionState.FINISHED)
                    return
                if isinstance(command, Pause) and self._state is SessionState.RUNNING:
                    self.set_state(SessionState.PAUSED)
                    self.event("paused", f"paused at update {self._update}")
                elif isinstance(command, Resume) and self._state is SessionState.PAUSED:
                    self.set_state(SessionState.RUNNING)
                    self.event("resumed", f"resumed at update {self._update}")
                elif isinstance(command, SetHParams):
                    values = validate_changes(dict(command.changes))
                    old = self._hparams.as_floats()
                    self._hparams = self._hparams.with_updates(values)
                    text = ", ".join(f"{k} {old[k]:.6g} -> {v:.6g}" for k, v in values.items())
                    self.event("hparams", f"set {text}", changes=values, previous={k: old[k] for k in values})
                elif isinstance(command, SaveCheckpoint):
                    self._saved = self._update
                    self.event("checkpoint", f"checkpoint saved at update {self._update}")
                elif isinstance(command, Rollback):
                    self.rollback_to(self._saved)
        finally:
            self._ended.set()
