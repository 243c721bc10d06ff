"""The run directory: runs/<name>/ with config.toml, metrics.jsonl, events.jsonl."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from rltui.config import ConfigError, RunConfig, dump_toml


def default_run_name(config: RunConfig) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{config.env}-{config.algo}-{stamp}"


def prepare_run_dir(config: RunConfig, run_dir: str | None, runs_root: str = "runs", name: str | None = None) -> Path:
    """Create the run directory and write the effective config; ConfigError if impossible."""
    if run_dir:
        path = Path(run_dir)
        flag = "--run-dir"
    else:
        base = Path(runs_root) / (name or default_run_name(config))
        path, n = base, 1
        while path.exists():
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        flag = "--name" if name else "run directory"
    if (path / "metrics.jsonl").exists():
        raise ConfigError(f"{flag}: {path} already holds a run; choose another directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"{flag}: cannot create {path}: {err.strerror or err}") from None
    write_config(path, config, flag)
    return path


def write_config(path: Path, config: RunConfig, flag: str = "run directory") -> None:
    """Write the effective config atomically; ConfigError if the directory is not writable."""
    try:
        tmp = path / "config.toml.tmp"
        tmp.write_text(dump_toml(config), encoding="utf-8")
        os.replace(tmp, path / "config.toml")
    except OSError as err:
        raise ConfigError(f"{flag}: cannot write to {path}: {err.strerror or err}") from None
