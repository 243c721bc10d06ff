"""Weights & Biases: the run's records against env steps, its configuration and its events.

wandb's own environment variables apply (WANDB_MODE=offline, WANDB_PROJECT, WANDB_ENTITY,
WANDB_DIR, WANDB_RUN_ID, WANDB_INIT_TIMEOUT...): rltui passes a value only where its
variable is unset. The W&B run id is kept in the run directory, so a resumed run goes on in
the same W&B run. It starts beside training (rltui.loggers.listener): a server it cannot reach
within WANDB_INIT_TIMEOUT seconds (START_TIMEOUT unless set) leaves the run without it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rltui.infra.owner_only import mkdir_private, open_private
from rltui.infra.read_limits import NOTE_BYTES, read_text
from rltui.loggers.base import START_TIMEOUT, event_text, scalars
from rltui.runfiles.names import WANDB, WANDB_RUN_ID

STEP = "env_steps"


class WandbLogger:
    label = "wandb"

    def __init__(self, run_dir: Path, config: Mapping[str, Any]):
        import wandb

        run_dir = Path(run_dir)
        options: dict[str, Any] = {"config": dict(config), "name": run_dir.name, "resume": "allow"}
        if not os.environ.get("WANDB_PROJECT"):
            options["project"] = "rltui"
        if not os.environ.get("WANDB_DIR"):
            options["dir"] = str(run_dir)
            mkdir_private(run_dir / WANDB)  # where wandb writes, before wandb makes it with its own mode
        if not os.environ.get("WANDB_RUN_ID"):
            id_file = run_dir / WANDB_RUN_ID
            run_id = read_text(id_file, NOTE_BYTES, "a run id").strip() if id_file.exists() else ""
            if not run_id:
                run_id = secrets.token_hex(6)  # letters and digits, as W&B run ids take
                with open_private(id_file, "w", encoding="utf-8") as out:
                    out.write(run_id + "\n")
            options["id"] = run_id
        if not os.environ.get("WANDB_INIT_TIMEOUT"):
            # wandb gives up on its server when rltui does (rltui.loggers.base.START_TIMEOUT).
            options["settings"] = wandb.Settings(init_timeout=START_TIMEOUT)
        self._wandb = wandb
        self.run = wandb.init(**options)
        # Env steps as every metric's x-axis, rather than wandb's own step, which may only
        # grow: a rolled-back run logs env steps it has logged before.
        self.run.define_metric(STEP)
        self.run.define_metric("*", step_metric=STEP)

    def write_records(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self.run.log({**scalars(record), STEP: int(record["env_steps"])})

    def write_event(self, step: int, kind: str, message: str) -> None:
        self.run.log({"event": event_text(kind, message), STEP: step})

    def flush(self) -> None:
        pass  # wandb sends in the background

    def close(self) -> None:
        self.run.finish()


def open_logger(run_dir: Path, config: Mapping[str, Any]) -> WandbLogger:
    """The `wandb` logger of a run."""
    return WandbLogger(run_dir, config)
