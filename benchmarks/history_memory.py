"""The memory the dashboard's curves hold, whatever the run's length: a curve buffer
(rltui.session.history) fed 10M updates of every metric and three seeds, and a whole
MetricsStore (recent values and curves) traced after 20k and 60k updates from the fake
session of tests/fakes.py.

    python benchmarks/history_memory.py [--updates 10000000]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, "tests")

from rltui.session.history import CurveBuffer
from rltui.session.metrics import _columns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--updates", type=int, default=10_000_000)
    args = parser.parse_args()
    columns = _columns(3)
    buffer = CurveBuffer(columns)
    started = time.perf_counter()
    for first in range(0, args.updates, 100_000):
        updates = np.arange(first + 1, min(first + 100_000, args.updates) + 1)
        buffer.extend(updates, updates * 512.0, updates * 0.01, np.random.rand(len(updates), len(columns)))
    print(f"curve buffer, {len(columns)} columns, {args.updates:,} updates: {len(buffer)} buckets of "
          f"{buffer.width} updates, {buffer.nbytes / 2**20:.2f} MiB ({time.perf_counter() - started:.1f} s)")

    from fakes import FakeSession

    fake = FakeSession(total_updates=10**8)
    tracemalloc.start()
    for count in (20_000, 60_000):
        while fake._update < count:
            fake.advance(5000)
        print(f"MetricsStore and fake session after {count:,} updates: "
              f"{tracemalloc.get_traced_memory()[0] / 2**20:.2f} MiB traced")


if __name__ == "__main__":
    main()
