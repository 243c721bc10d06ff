"""A small timing harness: repeat a measurement, report min / median / max."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path


def repeat(measure: Callable[[], float], repeats: int) -> dict[str, float]:
    values = [measure() for _ in range(repeats)]
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "values": values}


def fmt(stats: dict[str, float], unit: str = "") -> str:
    return f"{stats['median']:>12,.0f}{unit}  (min {stats['min']:,.0f}, max {stats['max']:,.0f})"


class StepClock:
    """A session listener that timestamps every snapshot's env steps, so that SPS over a
    window is measured the same way in every benchmark that runs the session."""

    def __init__(self):
        self.marks: list[tuple[float, int]] = []
        self.lock = threading.Lock()

    def on_state(self, state, message):
        pass

    def on_event(self, event):
        pass

    def on_metrics(self, snapshot):
        with self.lock:
            self.marks.append((time.monotonic(), snapshot.env_steps))

    def first_metrics(self) -> bool:
        with self.lock:
            return bool(self.marks)

    def sps_between(self, start: float, end: float) -> float:
        with self.lock:
            window = [m for m in self.marks if start <= m[0] <= end]
        if len(window) < 2:
            raise RuntimeError("too few chunks in the window; use more --seconds")
        (t0, s0), (t1, s1) = window[0], window[-1]
        return (s1 - s0) / (t1 - t0)


def run_marked_process(script: str, job: dict) -> tuple[dict, dict]:
    """Run `python SCRIPT --reference-process JOB` (a reference's whole process, which prints
    its clock marks as JSON on its last line: imported, compiled, trained, updates, solved_at)
    and time it: its phases in seconds (total, start_up, compile, training, teardown and,
    where it solved, to_solve: start-up, compile and its training pro rata to the update that
    solved), and the marks it printed."""
    start = time.time()
    done = subprocess.run([sys.executable, script, "--reference-process", json.dumps(job)],
                          capture_output=True, text=True)
    end = time.time()
    if done.returncode:
        sys.exit(f"the reference exited {done.returncode}:\n{done.stderr[-2000:]}")
    marks = json.loads(done.stdout.splitlines()[-1])
    phases = {
        "total": end - start,
        "start_up": marks["imported"] - start,
        "compile": marks["compiled"] - marks["imported"],
        "training": marks["trained"] - marks["compiled"],
        "teardown": end - marks["trained"],
    }
    if marks["solved_at"] is not None:
        phases["to_solve"] = (marks["compiled"] - start) + phases["training"] * marks["solved_at"] / marks["updates"]
    return phases, marks


def run_timed_launch(command: list[str], run_dir: Path, env: dict) -> tuple[dict, dict | None]:
    """Run an `rltui launch --no-ui` command writing to `run_dir` and time the whole process
    from its run files: its phases in seconds (total, start_up, compile, training, teardown)
    and its `target_reached` event (None where it did not reach the target)."""
    start = time.time()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    end = time.time()
    if done.returncode:
        sys.exit(f"rltui exited {done.returncode}:\n{done.stderr[-2000:]}")
    events = {}
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        record = json.loads(line)
        events.setdefault(record["kind"], record)
    compiled, finished = events["compiled"], events["finished"]
    session_start = (run_dir / "config.toml").stat().st_mtime
    phases = {
        "total": end - start,
        "start_up": session_start - start,
        "compile": compiled["data"]["seconds"],
        "training": finished["wall_time"] - compiled["wall_time"],
        "teardown": end - (session_start + finished["wall_time"]),
    }
    return phases, events.get("target_reached")


def session_reference_session(command: list[str], label: str) -> dict[str, list[dict]]:
    """Run `command --measure session`, then `--measure reference`, then the session again,
    each a process of its own that prints one `RESULT {json}` line: their results by side,
    each echoed as it comes (`label` names the case)."""
    results: dict[str, list[dict]] = {"session": [], "reference": []}
    for which in ("session", "reference", "session"):
        done = subprocess.run([*command, "--measure", which], capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode or not lines:
            sys.exit(f"{label} {which} failed:\n{done.stderr[-2000:]}")
        results[which].append(json.loads(lines[-1][len("RESULT "):]))
        print(f"  {label} {which}: {json.dumps(results[which][-1])}", flush=True)
    return results


def timed_backend(static, devices):
    """An rltui `JaxBackend` that records how long each build (trace and compile) took, in
    `build_seconds`. Imported here: a reference's process imports nothing of rltui's."""
    from rltui.session.backend import JaxBackend

    class TimedBackend(JaxBackend):
        build_seconds: list[float] = []

        def build(self, hparams):
            started = time.perf_counter()
            super().build(hparams)
            self.build_seconds.append(time.perf_counter() - started)

    return TimedBackend(static, seed=0, devices=devices)
