"""When a session writes a checkpoint (`CheckpointPolicy`), and what a checkpoint's metadata
holds beside its arrays (`checkpoint_metadata`). The files themselves, their store and their
verified reading, are the run directory's: `rltui.runfiles.checkpoints`.
"""

from __future__ import annotations

import dataclasses
import datetime

from trainers.algorithms import DEFAULT_ALGORITHM

# A session's first checkpoint by time comes this soon, so that a run killed early on has
# one to resume from.
FIRST_CHECKPOINT_SECONDS = 10.0
# The time trigger waits at least this many times the last write's duration, so that writing
# checkpoints takes at most 1% of the run whatever their size or the disk's speed.
WRITE_SHARE_FACTOR = 100.0


@dataclasses.dataclass(frozen=True)
class CheckpointPolicy:
    every_updates: int = 0  # 0: no update-count trigger
    every_minutes: float = 1.0  # 0: no time trigger
    keep: int = 3
    first_seconds: float = FIRST_CHECKPOINT_SECONDS

    def seconds_between(self, saved: bool, write_seconds: float) -> float | None:
        """Seconds from the last checkpoint (or the session's start, before its first) to the
        next one by time; None: never by time. `saved`: whether this session has saved one;
        `write_seconds`: how long the last save took."""
        if self.every_minutes <= 0:
            return None
        interval = self.every_minutes * 60
        if not saved:
            return min(self.first_seconds, interval)
        return max(interval, write_seconds * WRITE_SHARE_FACTOR)


def library_versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for name in ("jax", "jaxlib", "flax", "optax", "gymnax", "rltui"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


def checkpoint_metadata(*, run, backend, hparams, update, env_steps, elapsed, edits, reason) -> dict:
    """Readable facts stored beside the arrays (`rltui info` prints them)."""
    return {
        "trainer": backend.get("algo", DEFAULT_ALGORITHM),
        "config": run.get("config", {}),
        "static": backend.get("static", {}),
        "hparams": hparams,
        "update": update,
        "env_steps": env_steps,
        "elapsed": round(elapsed, 3),
        "edits": list(edits),
        "reason": reason,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "versions": library_versions(),
        "device_kind": backend.get("device_kind", "unknown"),
        "device_count": len(backend.get("devices", [])),
        **({"actions": backend["actions"]} if backend.get("actions") else {}),
        # what presets.toml set for the run, where it set anything (`rltui.config.presets.applied`)
        **({"preset": run["preset"]} if run.get("preset") else {}),
    }
