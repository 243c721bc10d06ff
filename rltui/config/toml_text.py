"""Configuration as TOML text: a `--config` file and `--set key=value` items read into
values for `build.build_config`, and a `RunConfig` written back as the run's config.toml.
Files and values are read as data (tomllib), never executed; every bad one raises
`ConfigError` with one line naming the field, or the file."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from rltui.config.keys import ConfigError, TableEntries, coerce_value, known_key
from trainers.quoting import quote


def parse_set_value(text: str) -> Any:
    """Read a `--set` value as a TOML value (numbers, booleans, arrays, quoted strings);
    anything that is not valid TOML is taken as a bare string (e.g. Acrobot-v1, or a list of
    bare names, [lr, ent_coef], which its key reads). A value that opens or closes like an
    array or a table must open and close it (`[64,64` is a typo, not a name). A value TOML
    reads as a number or array but Python cannot hold raises ConfigError."""
    try:
        return _parse_toml(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError as err:
        if text and (text[0] in "[{" or text[-1] in "]}") and not _encloses(text):
            kind = "a table" if text[:1] == "{" or text[-1:] == "}" else "an array"
            reason = re.sub(r" \(at .*\)$", "", str(err))  # its position counts a prefix the user never typed
            raise ConfigError(f"{quote(text)} is not {kind} TOML can read: {reason[:1].lower()}{reason[1:]}") from None
        return text


def _encloses(text: str) -> bool:
    """`text` is one bracketed array or braced table, its brackets or braces balanced."""
    for opening, closing in ("[]", "{}"):
        if text[:1] == opening and text[-1:] == closing:
            depth = 0
            for i, char in enumerate(text):
                depth += (char == opening) - (char == closing)
                if depth == 0 and i < len(text) - 1 or depth < 0:
                    return False
            return depth == 0
    return False


def _parse_toml(text: str) -> dict[str, Any]:
    """tomllib.loads, with the inputs it fails on outside TOMLDecodeError as ConfigError
    (the message lacks the field; callers add it)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except RecursionError:  # the parser recurses once per level of nested arrays
        raise ConfigError("arrays are nested too deeply to read") from None
    except ValueError:  # an integer longer than Python converts from text
        raise ConfigError(
            f"a number has more than {sys.get_int_max_str_digits():,} digits, too many to read"
        ) from None


# Table keys whose entries can be set one at a time (`--set sweep.lr=[1e-4,3e-4]`, or
# `rltui launch --sweep "lr=[1e-4,3e-4]"`): such entries merge over the table of the sources
# below them, entry by entry, where a whole table (`--set sweep={...}`) replaces it.
ENTRY_TABLES = ("sweep",)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        table, dot, entry = key.partition(".")
        if not sep or not key or (dot and table in ENTRY_TABLES and not entry):
            raise ConfigError(f"--set: expected key=value, got {quote(item)}")
        try:
            value = parse_set_value(text.strip())
        except ConfigError as err:
            raise ConfigError(f"{key if dot and table in ENTRY_TABLES else known_key(key, None)}: {err}") from None
        if dot and table in ENTRY_TABLES:
            entries = out.get(table)
            if isinstance(entries, dict):
                out[table] = type(entries)({**entries, entry: value})
            else:
                out[table] = TableEntries({entry: value})
        else:
            out[key] = value
    return out


def load_toml(path: Path) -> dict[str, Any]:
    from rltui.infra.read_limits import TEXT_FILE_BYTES, read_text

    try:
        text = read_text(path, TEXT_FILE_BYTES, "a configuration")
    except FileNotFoundError:
        raise ConfigError(f"--config: no such file: {path}") from None
    except OSError as err:
        raise ConfigError(f"--config: cannot read {path}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"--config: {path} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
            "TOML files are UTF-8"
        ) from None
    try:
        values = _parse_toml(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"--config: {path} is not valid TOML: {err}") from None
    except ConfigError as err:
        raise ConfigError(f"--config: {path} is not readable as TOML: {err}") from None
    try:  # checked here so that an error names the file it is in, not only the key
        for key, value in values.items():
            coerce_value(key, value)
    except ConfigError as err:
        raise ConfigError(f"--config: {path}: {err}") from None
    return values


def written_number(value: Any) -> Any:
    """A float with no fractional part as the integer a person writes (`learning_starts =
    10000`, not `10000.0`): every key that holds a float reads an integer as that float,
    so the file reads back to the same configuration. Other values as they are."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def dump_toml(config: Any) -> str:
    """`config` (a RunConfig) as the TOML of a run's config.toml: the keys its algorithm reads
    (the others would have no effect, and would read as if they had), whole numbers as a
    person writes them (`written_number`). Elsewhere (checkpoint metadata, the loggers'
    configs) every key is kept and a float key stays a float, so that runs compare alike."""
    import tomli_w

    return tomli_w.dumps({name: written_number(value)
                          for name, value in config.to_toml_dict(only_read=True).items()})


def show_setting(value: Any, *, compact: bool = False) -> str:
    """A configuration value as the reports show it: true/false, floats short; `compact`
    without spaces, as one word of a `--set` item (`[64,64]`)."""
    comma, equals = ("," if compact else ", "), ("=" if compact else " = ")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + comma.join(show_setting(v, compact=compact) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + comma.join(f"{k}{equals}{show_setting(v, compact=compact)}" for k, v in value.items()) + "}"
    return str(value)
