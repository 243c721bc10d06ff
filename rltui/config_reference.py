"""The configuration reference page (docs/configuration.md), generated from the key table.

    python -m rltui.config_reference > docs/configuration.md

The page is rendered from `rltui.config.KEYS` (each key's meaning and whether it is
editable live) and `RunConfig`'s defaults, so the documentation cannot drift from the code;
tests/test_docs.py fails when the committed page differs from what this renders.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple

from rltui.config import KEYS, RunConfig

REGENERATE = "python -m rltui.config_reference > docs/configuration.md"

_INTRO = f"""\
# Configuration reference

<!-- Generated from the key table in rltui/config.py; do not edit by hand.
     Regenerate with: {REGENERATE} -->

This page is generated from the key table in `rltui/config.py`; regenerate it with
`{REGENERATE}`.

Every key is set the same way in a TOML file (`--config FILE`, flat keys: `lr = 3e-4`) and
with `--set KEY=VALUE` (read as TOML: `--set hidden_sizes=[128,128]`,
`--set anneal_lr=false`; a bare word is a string: `--set env=Acrobot-v1`). Precedence,
lowest first: built-in defaults < the algorithm's defaults (REINFORCE) < the
environment's tuned preset ([presets](presets.md)) < `--config` < `--set`. A run writes
its effective configuration to `config.toml` in its run directory.

**Live** keys are traced arguments of the compiled step: they change between chunks (the
dashboard's editor `e`, or a `set_hparams` command on the [control
socket](control-protocol.md)) without recompiling. The others change shapes or the
program; changing them means a new run (or, for some, a resume: see
[run directory](run-directory.md#resume)).
"""

_OUTRO = """\
## Allowed values

`lr > 0`, `0 < gamma <= 1`, `0 <= gae_lambda <= 1`, `clip_eps > 0`, `ent_coef >= 0`,
`vf_coef >= 0`, `max_grad_norm > 0`, `reward_scale > 0`, `-5 <= log_std_init <= 2`,
`0.01 <= chunk_seconds <= 60`, `checkpoint_minutes >= 0`; integers `>= 1` for sizes and
counts (`noise_hold` too), `>= 0` for `seed`, `devices`, `cpu_threads` and
`checkpoint_every_updates`; every integer fits the type it becomes (32-bit counts, a
32-bit seed). `num_minibatches` must divide `num_steps`
(PPO with `network = "gru"`: the environments of each device instead); `num_envs` must be
a multiple of the device count; `network = "cnn"` needs image observations (the MinAtar
games). A bad value is one line naming the key and what is allowed, and exit code 2,
before anything starts.

With `anneal_lr` the learning rate at update u is `lr x (1 - u / total updates)`,
computed inside the compiled step, so an edited `lr` is annealed from the current update
on.
"""


class KeyRow(NamedTuple):
    """One row of the reference: a key, its default as TOML, its meaning, whether it is live."""

    name: str
    default: str
    meaning: str
    live: bool


def toml_value(value: Any) -> str:
    """A default as it is written in a TOML file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def rows() -> Iterator[KeyRow]:
    """Every key of the table, in its order, with RunConfig's default."""
    defaults = RunConfig()
    for name, info in KEYS.items():
        yield KeyRow(name, toml_value(getattr(defaults, name)), info.meaning, bool(info.dynamic))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown() -> str:
    """The whole page, ending in one newline."""
    table = ["| key | default | live | meaning |", "|---|---|---|---|"]
    for row in rows():
        live = "live" if row.live else "restart"
        table.append(f"| `{row.name}` | `{_cell(row.default)}` | {live} | {_cell(row.meaning)} |")
    return "\n".join([_INTRO, "## Keys", "", *table, "", _OUTRO]).rstrip("\n") + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
