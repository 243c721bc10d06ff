"""Weights & Biases: the run's records against env steps, its configuration and its events.

wandb's own environment variables apply (WANDB_MODE=offline, WANDB_PROJECT, WANDB_ENTITY,
WANDB_DIR, WANDB_RUN_ID, WANDB_INIT_TIMEOUT...): rltui passes a value only where its
variable is unset. The W&B run id is kept in the run directory, so a resumed run goes on in
the same W&B run (a population's members in theirs: `<id>-<m>`). Series are named as in
TensorBoard (`rltui.loggers.layout`). It starts beside training (rltui.loggers.listener): a
server it cannot reach within WANDB_INIT_TIMEOUT seconds (START_TIMEOUT unless set) leaves
the run without it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rltui.infra.owner_only import mkdir_private, open_private
from rltui.infra.read_limits import NOTE_BYTES, read_text
from rltui.loggers.base import START_TIMEOUT, event_text
from rltui.loggers.layout import member_run, member_values, record_scalars
from rltui.runfiles.names import WANDB, WANDB_RUN_ID

STEP = "env_steps"
MEMBER = "member"  # a member's index, in its run's config


class WandbLogger:
    """One W&B run, or for a population one per member (named `<run>/member_<m>`, in the
    group of the population's name, each with its own values in its config), so W&B's
    grouping compares them; the population's events are logged in each member's run."""

    label = "wandb"

    def __init__(self, run_dir: Path, config: Mapping[str, Any]):
        import wandb

        run_dir = Path(run_dir)
        options: dict[str, Any] = {"resume": "allow"}
        if not os.environ.get("WANDB_PROJECT"):
            options["project"] = "rltui"
        if not os.environ.get("WANDB_DIR"):
            options["dir"] = str(run_dir)
            mkdir_private(run_dir / WANDB)  # where wandb writes, before wandb makes it with its own mode
        members = member_values(config)
        base_id = os.environ.get("WANDB_RUN_ID") or _run_id(run_dir)
        if members and not os.environ.get("WANDB_RUN_GROUP"):
            options["group"] = run_dir.name
        if not os.environ.get("WANDB_INIT_TIMEOUT"):
            # wandb gives up on its server when rltui does (rltui.loggers.base.START_TIMEOUT).
            options["settings"] = wandb.Settings(init_timeout=START_TIMEOUT)
        self._wandb = wandb
        self.runs: list[Any] = []
        if not members:
            if not os.environ.get("WANDB_RUN_ID"):
                options["id"] = base_id
            self.runs.append(wandb.init(config=dict(config), name=run_dir.name, **options))
        else:
            for member, values in enumerate(members):
                self.runs.append(wandb.init(
                    config={**config, **values, MEMBER: member}, name=f"{run_dir.name}/{member_run(member)}",
                    id=f"{base_id}-{member}", reinit="create_new", **options))
        self._population = bool(members)
        for run in self.runs:
            # Env steps as every metric's x-axis, rather than wandb's own step, which may
            # only grow: a rolled-back run logs env steps it has logged before.
            run.define_metric(STEP)
            run.define_metric("*", step_metric=STEP)

    @property
    def run(self) -> Any:
        """The run (for a population: member 0's)."""
        return self.runs[0]

    def write_records(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            step = int(record["env_steps"])
            values = record_scalars(record)
            if not self._population:
                self.run.log({**values.run, STEP: step})
                continue
            for run, member_values_now in zip(self.runs, values.members):
                if member_values_now:  # a frozen member has no point
                    run.log({**member_values_now, STEP: step})

    def write_event(self, step: int, kind: str, message: str) -> None:
        for run in self.runs:
            run.log({"event": event_text(kind, message), STEP: step})

    def flush(self) -> None:
        pass  # wandb sends in the background

    def close(self) -> None:
        for run in self.runs:
            run.finish()


def _run_id(run_dir: Path) -> str:
    """The W&B run id kept in the run directory (made there on first use): a resumed run goes
    on in the same W&B run."""
    id_file = run_dir / WANDB_RUN_ID
    run_id = read_text(id_file, NOTE_BYTES, "a run id").strip() if id_file.exists() else ""
    if not run_id:
        run_id = secrets.token_hex(6)  # letters and digits, as W&B run ids take
        with open_private(id_file, "w", encoding="utf-8") as out:
            out.write(run_id + "\n")
    return run_id


def open_logger(run_dir: Path, config: Mapping[str, Any]) -> WandbLogger:
    """The `wandb` logger of a run."""
    return WandbLogger(run_dir, config)
