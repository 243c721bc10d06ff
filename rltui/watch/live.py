"""The watch view inside the training dashboard: a Player on a running session's latest
parameters, each new episode taking the newest copy, on a device training does not use.
"""

from __future__ import annotations

import sys

from rltui.watch.params import acting_template, adopt_params
from rltui.watch.player import Player


def watch_device(busy: list[str]):
    """The device a live watch view steps on: one training does not use (`busy`, as
    "platform:id"), so that its steps never queue behind a chunk on a device that runs
    computations in order (a GPU run's view goes on the host CPU); else the first one."""
    import jax

    candidates = [*jax.local_devices(), *jax.devices("cpu")]
    free = [d for d in candidates if f"{d.platform}:{d.id}" not in set(busy)]
    return free[0] if free else candidates[0]


class LivePolicy:
    """A training run's latest parameters for a Player, through its session's
    `request_params`: a copy is asked for as an episode ends and taken as the next begins
    (waiting at most `wait` seconds for it, else the episode plays the previous ones)."""

    def __init__(self, session, wait: float = 1.0):
        self.session = session
        self.wait = wait
        self._future = None
        self.problem: str | None = None  # why the latest request failed

    def ask(self) -> None:
        if self._future is None:
            self._future = self.session.request_params()

    def take(self, wait: float | None = None):
        """The snapshot asked for, or None (none asked for, not there within `wait`
        seconds, or failed)."""
        import concurrent.futures

        if self._future is None:
            return None
        try:
            snapshot = self._future.result(timeout=self.wait if wait is None else wait)
        except concurrent.futures.TimeoutError:
            return None  # still coming: the next episode takes it
        except Exception as err:  # noqa: BLE001 - ParamsUnavailable, or a lost connection
            self._future = None
            self.problem = str(err)
            return None
        self._future = None
        self.problem = None
        return snapshot


def live_imports(config) -> str | None:
    """The env module watching `config` imports (an import-path env), or None."""
    from trainers.env_import import is_import_path, is_object_id

    return config.env.split(":", 1)[0] if is_import_path(config.env) and not is_object_id(config.env) else None


def prepare_jax(on_cpu: bool) -> None:
    """Before this process first imports JAX (an attached dashboard has not): the compile
    cache, and with `on_cpu` the CPU only, so that a client beside a GPU run takes none
    of the GPU's memory. A process that already uses JAX keeps its settings."""
    import os

    if "jax" in sys.modules:
        return
    if on_cpu:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    from rltui.infra import runtime
    runtime.configure_jax(host_devices=0, compile_cache=True)


def live_player(config, session, seed: int = 0, cancelled=lambda: False, on_cpu: bool = False) -> Player | None:
    """A Player on `config`'s env, playing `session`'s latest parameters (each new episode
    takes the newest copy). Blocks until the first copy comes (a run still compiling has
    none yet), or returns None once `cancelled()`: call it from a worker thread.
    PolicyMismatch or ParamsUnavailable if the parameters cannot be played. `on_cpu`: see
    `prepare_jax` (an attached client)."""
    prepare_jax(on_cpu)
    from rltui.session.interface import ParamsUnavailable
    from trainers.parallel import build

    device = watch_device([] if on_cpu else list(session.describe().get("devices", ())))
    parallel = build(config.static_config(), [device])
    template = acting_template(config, parallel)
    live = LivePolicy(session)
    live.ask()
    snapshot = None
    while snapshot is None:
        if cancelled():
            return None
        snapshot = live.take(wait=0.2)
        if snapshot is None and live.problem is not None:
            raise ParamsUnavailable(live.problem)
    acting = adopt_params(template, snapshot.params, snapshot.obs_stats)
    return Player(config, acting, seed=seed, live=live, policy_update=snapshot.update, parallel=parallel,
                  template=template, device=device)
