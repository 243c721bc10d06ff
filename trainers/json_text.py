"""JSON text from a file (a checkpoint's metadata, a line of metrics.jsonl) read as data
that every reader can print and compute with: the one place such text is parsed.

JSON can say things Python's own values cannot carry on: an escaped lone surrogate
("\\ud800") is a `str` that no UTF-8 stream prints, an integer of hundreds of digits is an
`int` that `float()` and `math.isfinite` refuse, and nesting deeper than the parser's
recursion limit is a `RecursionError`. `loads` makes the first two ordinary values and the
third a `ValueError`, like any other unreadable text."""

from __future__ import annotations

import json
import math
import re
from typing import Any

# Longest integer text that is an `int` here: longer ones are beyond float range anyway
# (10**308 is the largest power of ten a float holds), so they read as floats (inf).
_INT_DIGITS = 308
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _int(text: str) -> int | float:
    return int(text) if len(text.lstrip("-")) <= _INT_DIGITS else float(text)


_DECODER = json.JSONDecoder()
# Only text holding a run of more than _INT_DIGITS digits can hold such an integer: that
# text alone is parsed with `_int` called on every integer, the rest at the parser's speed.
_GUARDED = json.JSONDecoder(parse_int=_int)
_AS_DIGIT_RUNS = bytes(48 if b in b"0123456789" else 32 for b in range(256))  # each digit "0", the rest " "
_LONG_RUN = b"0" * (_INT_DIGITS + 1)


def loads(text: str | bytes) -> Any:
    """`json.loads` of UTF-8 text, with integers beyond float range as (infinite) floats and
    lone surrogates in strings written as their escapes (`\\ud800`, printable as is).
    Raises ValueError for anything unreadable, nesting too deep to parse included."""
    if isinstance(text, bytes):
        raw, text = text, text.decode("utf-8")
    else:
        raw = text.encode("utf-8", "surrogatepass")
    decoder = _GUARDED if _LONG_RUN in raw.translate(_AS_DIGIT_RUNS) else _DECODER
    try:
        value = decoder.decode(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        value = _printable(value)
    return value


def printable(text: str) -> str:
    """`text` with any lone surrogate as its escape: printable on every UTF-8 stream."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _printable(value: Any) -> Any:
    """`value` with `printable` applied to every string in it, keys included; iterative, as
    the nesting comes from the file."""
    def fix(item: Any) -> Any:
        if isinstance(item, str):
            return printable(item)
        if isinstance(item, dict):
            copy = {printable(k): v for k, v in item.items()}
            pending.append(copy)
            return copy
        if isinstance(item, list):
            copy = list(item)
            pending.append(copy)
            return copy
        return item

    pending: list[Any] = []
    root = fix(value)
    while pending:
        node = pending.pop()
        keys = node.keys() if isinstance(node, dict) else range(len(node))
        for key in keys:
            node[key] = fix(node[key])
    return root


def is_count(value: Any) -> bool:
    """An integer >= 0 as JSON text reads (a boolean is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def is_number(value: Any) -> bool:
    """A finite number as JSON text reads (a boolean is not one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
