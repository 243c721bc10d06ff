"""What `env_import` and the suites' adapters (`trainers.suites`) share: an env as its author
made it (`EnvSource`), an env id split into what to call and with what (`EnvRef`), and the
one-line error every env failure is (`EnvImportError`, with `one_line` for the exception
behind it). Both import it; it imports neither.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

# Where the frames of JAX, gymnax and rltui come from: a message names the innermost frame
# outside them, the env author's own line.
LIBRARY_PATHS = ("/jax/", "/jaxlib/", "/gymnax/", "/flax/", "/trainers/", "/rltui/", "<frozen", "/functools.py",
                 "/contextlib.py", "/threading.py")


class EnvImportError(ValueError):
    """An env that cannot be imported or trained on; the message is one line."""


class EnvSource(NamedTuple):
    """An environment as its author made it, before rltui wraps it."""

    env: Any
    params: Any
    origin: str  # how messages name it: 'my_pkg.envs:make_env' or 'object:Bandit'


class EnvRef(NamedTuple):
    """An env id split into what to import and how to call it."""

    path: str
    kwargs: dict[str, Any]


def split_env_id(env_id: str) -> EnvRef:
    path, _, rest = env_id.partition(" ")
    return EnvRef(path, json.loads(rest) if rest else {})


def describe_call(ref: EnvRef) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in ref.kwargs.items())
    return f"{ref.path}({args})"


def one_line(err: BaseException) -> str:
    """`err` as one line, for every message that names an exception: its type and the first
    line of its message (a library's may go on with advice over several); for one raised
    by code a compiled program called back (an env's own check), that code's exception and
    where it was raised (`callback_failure`)."""
    called_back = callback_failure(err)
    if called_back:
        return called_back
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^ *File "(?P<file>[^"]+)", line (?P<line>\d+)', re.MULTILINE)


def callback_failure(err: BaseException) -> str | None:
    """One line for an exception raised by Python code that a compiled program called back
    (`jax.debug.callback`, `jax.pure_callback`, `jax.experimental.io_callback`: an env's
    check or print), naming that code's file and line; None for any other error. XLA hands
    such an exception back as a runtime error whose text is the Python traceback."""
    text = str(err)
    if not isinstance(err, RuntimeError) or "allback" not in text or _TRACEBACK not in text:
        return None
    text = text.rpartition(_TRACEBACK)[2]
    frames = list(_FRAME.finditer(text))
    if not frames:
        return None
    user = [f"{m['file'].rsplit('/', 1)[-1]}:{m['line']}" for m in frames
            if not any(p in m["file"] for p in LIBRARY_PATHS)]
    # The exception's own line follows the last frame (and that frame's indented source line, if any).
    rest = [line for line in text[frames[-1].end():].splitlines()[1:] if line.strip() and not line.startswith(" ")]
    raised = rest[0].strip() if rest else "an exception"
    at = f" at {user[-1]}" if user else ""
    return f"a JAX callback raised {raised}{at}"
