"""The loggers the `loggers` key may name, declared once: the key's choices, the check that a
logger's library is installed, and which writer (a module of `rltui.loggers`) a run opens
all read this table."""

from __future__ import annotations

from typing import NamedTuple


class LoggerKind(NamedTuple):
    writer: str  # its module in rltui.loggers, imported when a run opens it: `open_logger(run_dir, config)`
    library: str  # what must be importable for it to write
    extra: str  # the optional dependency of rltui that installs the library
    start_timeout_variable: str | None = None  # the library's own bound on starting, where it has one


ALWAYS = "jsonl"  # metrics.jsonl and events.jsonl: written by the recorder whatever the key says
LOGGERS: dict[str, LoggerKind] = {
    "tensorboard": LoggerKind("tensorboard", "tensorboardX", "tensorboard"),
    "wandb": LoggerKind("wandb_logger", "wandb", "wandb", start_timeout_variable="WANDB_INIT_TIMEOUT"),
}
NAMES = (ALWAYS, *LOGGERS)  # what the `loggers` key accepts
