"""Make docs/images/runs-overlay.svg and runs-grouped.svg: the runs view (rltui runs) on
six made-up CartPole runs (two learning rates, three seeds each), with three runs
overlaid, then all six grouped by lr into a mean with its bootstrap band.

    python docs/images/make_runs_screenshots.py
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import tomli_w

from rltui.ui.screens.runs import RunsApp

HERE = Path(__file__).resolve().parent
STEPS = 2048


def make_run(path: Path, lr: float, seed: int, updates: int = 240) -> None:
    path.mkdir(parents=True)
    config = {"env": "CartPole-v1", "algo": "ppo", "lr": lr, "seed": seed, "num_envs": 8, "num_steps": 256}
    (path / "config.toml").write_text(tomli_w.dumps(config))
    rng = np.random.default_rng(seed + int(lr * 1e6))
    rate = 40 if lr > 5e-4 else 110
    lines = []
    for u in range(1, updates + 1):
        mean = 500 / (1 + np.exp(-(u - rate * (0.8 + 0.1 * seed)) / 18))
        value = float(np.clip(mean + rng.normal(0, 35 + 0.15 * mean), 8, 500))
        lines.append(json.dumps({"update": u, "env_steps": u * STEPS, "wall_time": 0.9 * u, "episode_return": value,
                                 "policy_loss": float(-0.02 * np.exp(-u / 80) + rng.normal(0, 0.004))}) + "\n")
    (path / "metrics.jsonl").write_text("".join(lines))
    events = [{"kind": "compiled", "update": 0, "wall_time": 2.0, "message": "compiled in 2.0 s"},
              {"kind": "finished", "update": updates, "wall_time": 0.9 * updates,
               "message": f"finished {updates} updates"}]
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    for name in ("config.toml", "metrics.jsonl", "events.jsonl"):
        os.utime(path / name, (1_760_000_000 + 3600 * seed + int(lr * 1e7), ) * 2)


async def shoot(root: Path) -> None:
    app = RunsApp(root, refresh_interval=0, probe=lambda path: False, user_theme_dir=root / "no-themes")
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.runs_screen
        while not screen.loaded:
            await pilot.pause(0.05)
        table = screen.query_one("DataTable")
        while screen.sort_key != "name":
            await pilot.press("s")
        await pilot.press("S")
        names = [r.name for r in screen.shown]

        async def settle(predicate):
            while not predicate():
                await pilot.pause(0.05)
            screen.scan_seconds, screen.overlay = 0.0, screen.overlay._replace(seconds=0.0)
            screen._status()
            await pilot.pause()

        for name in ("lr3e-4-seed0", "lr1e-3-seed0", "lr1e-3-seed1"):
            table.move_cursor(row=names.index(name))
            await pilot.press("space")
        await pilot.press("w", "w")
        await settle(lambda: screen.overlay is not None and len(screen.overlay.lines) == 3
                     and screen.overlay.smoothing == 0.9)
        app.save_screenshot("runs-overlay.svg", str(HERE))
        for name in names:
            if root / name not in screen.selected:
                table.move_cursor(row=names.index(name))
                await pilot.press("space")
        await pilot.press("g", "g")  # seed, then lr
        await settle(lambda: screen.overlay is not None and screen.overlay.group == "lr")
        app.save_screenshot("runs-grouped.svg", str(HERE))


def main() -> None:
    os.environ["TZ"] = "UTC"
    time.tzset()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"
        for lr, label in ((3e-4, "3e-4"), (1e-3, "1e-3")):
            for seed in range(3):
                make_run(root / f"lr{label}-seed{seed}", lr, seed)
        asyncio.run(shoot(root))
    print(f"wrote {HERE / 'runs-overlay.svg'} and {HERE / 'runs-grouped.svg'}")


if __name__ == "__main__":
    main()
