"""The configuration reference page (docs/configuration.md), generated from the key table.

    python -m rltui.config.reference > docs/configuration.md

The page is rendered from `rltui.config.keys.KEYS` (each key's meaning, rule and kind),
`RunConfig`'s defaults and each algorithm's declaration (`trainers.algorithms`: the keys only
it reads, its own defaults), so the documentation cannot drift from the code;
tests/cli/test_docs.py fails when the committed page differs from what this renders.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple

from rltui.config.build import RunConfig
from rltui.config.keys import KEYS
from rltui.config.toml_text import written_number
from trainers.algorithms import ALGORITHMS

REGENERATE = "python -m rltui.config.reference > docs/configuration.md"

_INTRO = f"""\
# Configuration reference

<!-- Generated from the key tables; do not edit by hand.
     Regenerate with: {REGENERATE} -->

This page is generated from the key tables (`trainers/hparams.py` for the trainer's shared
keys, each algorithm's package under `trainers/algorithms/` for its own, and
`rltui/config/keys.py` for the run's); regenerate it with
`{REGENERATE}`.

Every key is set the same way in a TOML file (`--config FILE`, flat keys: `lr = 3e-4`) and
with `--set KEY=VALUE` (read as TOML: `--set hidden_sizes=[128,128]`,
`--set anneal_lr=false`; a bare word is a string: `--set env=Acrobot-v1`; a value that
opens or closes with a bracket or a brace must be a whole array or table). Precedence,
lowest first: built-in defaults < the algorithm's defaults ([below](#algorithms)) < the
environment's family defaults < its tuned preset ([presets](presets.md)) < `--config` <
`--set`; `--no-preset` skips the family and the preset. A run writes
its effective configuration to `config.toml` in its run directory: the keys its algorithm
reads (on a built-in environment, less those for the other action space). A key given that
the run does not read (`--set clip_eps=0.3` with `algo = "dqn"`) has no effect, and the
launch says so in one line.

**Live** keys are traced arguments of the compiled step: they change between chunks (the
dashboard's editor `e`, or a `set_hparams` command on the [control
socket](control-protocol.md)) without recompiling. The others change shapes or the
program, or the run around it: "on resume" keys may change when a run is resumed (see
[run directory](run-directory.md#resume)), the others only in a new run.
"""

_ALGORITHMS = """\
Each algorithm ([algorithms](algorithms.md)) reads every key above except those another
algorithm reads alone (listed here), and may declare its own defaults for shared keys,
which replace the built-in ones in a run of it (still below the environment's preset, a
file and `--set`)."""

_OUTRO = """\
## Rules across keys

`num_minibatches` must divide `num_steps` (PPO with `network = "gru"`: the environments
of each device instead); `num_envs` must be a multiple of the device count; `network =
"cnn"` needs image observations (the MinAtar games); env steps per update and the number
of updates fit 32-bit integers, and so does the last agent's seed (`seed + num_seeds -
1`). A bad value is one line naming the key and what is allowed, and exit code 2, before
anything starts.

With `anneal_lr` the learning rate at update u is `lr x (1 - u / total updates)`,
computed inside the compiled step, so an edited `lr` is annealed from the current update
on.
"""

_WHEN = {"live": "live", "resume": "on resume", "restart": "new run"}


class KeyRow(NamedTuple):
    """One row of the reference: a key, its default as TOML, what it allows, when it can
    change (live, on resume, or only in a new run), what it means."""

    name: str
    default: str
    allowed: str
    when: str
    meaning: str


def toml_value(value: Any) -> str:
    """A default as it is written in a TOML file (unset: TOML has no null)."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(written_number(value))


def rows() -> Iterator[KeyRow]:
    """Every key of the table, in its order, with RunConfig's default."""
    defaults = RunConfig()
    for name, key in KEYS.items():
        when = "live" if key.live else "resume" if key.can_resume_with_change else "restart"
        yield KeyRow(name, toml_value(getattr(defaults, name)), key.rule.describe(), when, key.meaning)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


class AlgorithmRow(NamedTuple):
    """One row of the algorithms' table: an algorithm, the keys only it reads, and its own
    defaults for shared keys (as TOML)."""

    name: str
    keys: tuple[str, ...]
    defaults: tuple[str, ...]


def algorithm_rows() -> Iterator[AlgorithmRow]:
    for name, algorithm in ALGORITHMS.items():
        defaults = tuple(f"{key} = {toml_value(value)}" for key, value in algorithm.defaults.items())
        yield AlgorithmRow(name, tuple(key.name for key in algorithm.keys if key.config), defaults)


def render_markdown() -> str:
    """The whole page, ending in one newline."""
    table = ["| key | default | allowed | changes | meaning |", "|---|---|---|---|---|"]
    for row in rows():
        default = "unset" if row.default == "unset" else f"`{_cell(row.default)}`"
        table.append(
            f"| `{row.name}` | {default} | {_cell(row.allowed)} | {_WHEN[row.when]} | {_cell(row.meaning)} |"
        )
    algorithms = ["| `algo` | keys only it reads | its own defaults |", "|---|---|---|"]
    for row in algorithm_rows():
        keys = ", ".join(f"`{key}`" for key in row.keys) or "-"
        defaults = ", ".join(f"`{_cell(default)}`" for default in row.defaults) or "-"
        algorithms.append(f"| `{row.name}` | {keys} | {defaults} |")
    return "\n".join([_INTRO, "## Keys", "", *table, "", "## Algorithms", "", _ALGORITHMS, "", *algorithms, "",
                      _OUTRO]).rstrip("\n") + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
