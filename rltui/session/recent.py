"""What a process built last, kept for the next session that asks for the same thing."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class Recent:
    """The last `keep` values made, by key, the most recent last. Safe to share between
    threads; two threads asking for a new key at once may both make it (one is kept)."""

    def __init__(self, keep: int):
        self.keep = keep
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        value = make()
        with self._lock:
            self._values[key] = value
            while len(self._values) > self.keep:
                self._values.popitem(last=False)
        return value


def is_builtin_env(env_id: str) -> bool:
    """Whether `env_id` is one of rltui's built-in envs, whose code cannot change while the
    process runs (an env given by import path or as an object may have)."""
    from trainers.envs import SUPPORTED_ENVS

    return env_id in SUPPORTED_ENVS
