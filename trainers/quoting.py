"""User values as error messages quote them: short whatever their size or depth, and
switches as TOML writes them; and the "did you mean" hint. Every message that quotes a
user's value goes through `quote`, so none can echo megabytes back."""

from __future__ import annotations

import reprlib
import sys
from typing import Any

QUOTE_LIMIT = 80  # characters of a quoted value in an error message


class _Quoter(reprlib.Repr):
    def __init__(self):
        super().__init__()
        # Depth and width bounds keep nested values short before the final cut.
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict, self.maxset = 3, 6, 6, 4, 6
        self.maxstring = self.maxlong = self.maxother = QUOTE_LIMIT

    def repr_bool(self, value: bool, level: int) -> str:
        return "true" if value else "false"  # as TOML and --set write it


_QUOTER = _Quoter()


def shorten(text: str, limit: int = QUOTE_LIMIT) -> str:
    """`text` cut to about `limit` characters, keeping its start and end."""
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return text[:half] + "..." + text[-half:]


def closest(name: str, choices, cutoff: float = 0.6) -> str | None:
    """The choice most like `name`, for a "did you mean" hint, or None. A name longer than
    any message quotes gets none: matching it would cost time in its length, for nothing."""
    if len(name) > QUOTE_LIMIT:
        return None
    import difflib

    found = difflib.get_close_matches(name, list(choices), n=1, cutoff=cutoff)
    return found[0] if found else None


def quote(value: Any) -> str:
    """A user's value as an error message shows it: its repr, shortened to about QUOTE_LIMIT
    characters (a long string says how long it is), whatever its size or depth. Every
    message that quotes a value goes through here, so none can echo megabytes back."""
    try:
        text = shorten(_QUOTER.repr(value))
    except ValueError:  # an int beyond sys.get_int_max_str_digits() has no decimal repr
        return f"an integer of more than {sys.get_int_max_str_digits():,} digits"
    if isinstance(value, (str, bytes)) and len(value) > QUOTE_LIMIT:
        text += f" ({len(value):,} characters)"
    elif isinstance(value, int) and not isinstance(value, bool) and len(text) >= QUOTE_LIMIT:
        text += f" ({len(str(abs(value))):,} digits)"
    return text
