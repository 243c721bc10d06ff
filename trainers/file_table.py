"""The outer table of rltui's own files (checkpoints, policy files): a msgpack table that
names its format and version beside its contents. It is read as data and checked before
anything in it is used; each file's module gives its noun, its error type and its fields."""

from __future__ import annotations

from typing import Any

import msgpack

from trainers.quoting import quote


def open_table(data: bytes, *, file_format: str, newest_version: int, noun: str, error: type[Exception],
               not_ours: str, fields: dict[str, type]) -> dict[str, Any]:
    """The table in `data`, its format `file_format`, its version a whole number from 1 to
    `newest_version`, each of `fields` of its kind; `error` naming the `noun` otherwise
    (`not_ours` where the format is another's)."""
    try:
        outer = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception:  # noqa: BLE001 - msgpack raises several types for truncated/garbage input
        raise error(f"not a readable {noun}: truncated, damaged, or not a {noun} at all") from None
    if not isinstance(outer, dict) or outer.get("format") != file_format:
        raise error(not_ours)
    version = outer.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise error(f"{noun} is damaged: its format version is {quote(version)}, not a whole number")
    if version > newest_version:
        raise error(f"{noun} format version {version} is newer than this rltui understands ({newest_version}); "
                    "upgrade rltui")
    if version < 1:
        raise error(f"{noun} is damaged: format version {version} does not exist (versions start at 1)")
    for field, kind in fields.items():
        if not isinstance(outer.get(field), kind):
            raise error(f"{noun} is missing its {field}")
    return outer
