"""A rate allowance: a token bucket that lets `burst` things happen at once, then `rate` a
second (the control server's accepts, commands and parameters requests)."""

from __future__ import annotations

import time


class Allowance:
    """A token bucket: `burst` at once, then `rate` a second."""

    def __init__(self, rate: float, burst: int):
        self.rate, self.burst = rate, float(burst)
        self.tokens, self._mark = float(burst), time.monotonic()

    def available(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self._mark) * self.rate)
        self._mark = now
        return self.tokens >= 1

    def take(self) -> bool:
        if not self.available():
            return False
        self.tokens -= 1
        return True

    def next_at(self) -> float:
        """When the next token is there."""
        return self._mark + max(0.0, 1 - self.tokens) / self.rate
