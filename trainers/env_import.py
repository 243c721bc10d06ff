"""Environments from outside gymnax's registry: by import path (`my_pkg.envs:make_env`,
called with `env_kwargs`), or a Python object handed over by the API (`register_env`).

Anything with gymnax 1.0's interface trains: `reset(key, params) -> (obs, state)`,
`step(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)`,
`observation_space(params)`, `action_space(params)` and `default_params` (or a factory that
returns `(env, params)`). Every failure is an `EnvImportError` (`env_source`) whose message
is one line for the user: the command line prints it as is. `env_adapter` adapts an
imported env to what the trainers step.

Nothing here imports JAX at module level: the config layer parses env ids with it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import json
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from trainers.env_source import LIBRARY_PATHS, EnvImportError, EnvSource, describe_call, one_line, split_env_id

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
IMPORT_PATH = re.compile(rf"^{_NAME}(\.{_NAME})*:{_NAME}(\.{_NAME})*$")
# Ids the API gives env objects: never an import path ('#' is not part of a Python name).
OBJECT_PREFIX = "object:"
INTERFACE = ("reset", "step", "observation_space", "action_space")
TRACING_HINT = "Python control flow on traced values (an if, while or int() on an array; use jnp.where or jax.lax.cond)"
PYTREE_HINT = ("params and states must be JAX pytrees of arrays and numbers: a flax.struct.dataclass, a NamedTuple "
               "or a dict (a plain @dataclass is not one)")


class EnvModuleNotFound(EnvImportError):
    """The env's module (or a package above it) is not installed in this process."""

    HINT = "install it, or run rltui in its directory or with it on PYTHONPATH"

    def __init__(self, module: str, missing: str, hint: str = HINT):
        super().__init__(f"env: cannot import {module}: no module named {missing!r} ({hint})")
        self.module, self.missing = module, missing


def is_import_path(env_id: str) -> bool:
    return bool(IMPORT_PATH.match(split_env_id(env_id).path))


def is_object_id(env_id: str) -> bool:
    return env_id.startswith(OBJECT_PREFIX)


def env_id_with_kwargs(path: str, kwargs: Mapping[str, Any] | None) -> str:
    """The id the trainers receive (`StaticConfig.env_id`): the import path, followed by
    its keyword arguments as JSON when there are any, so that one hashable string says how
    to rebuild the env in any process."""
    if not kwargs:
        return path
    return f"{path} {json.dumps(dict(kwargs), sort_keys=True, separators=(',', ':'))}"


# Env objects the Python API was given, by the id it assigned them. An object that its
# class's import path rebuilds (`importable_path`) has that path as its id, which any
# process can build; any other's id is `object:...`, per process: a run made that way can
# only be resumed by a script that hands the same env over again (`rltui.train(env=...,
# resume=...)`, which records the id this process gives it).
_OBJECTS: dict[str, EnvSource] = {}
_LOCK = threading.Lock()
NOT_IMPORTABLE_HINT = ("to make it so, define its class in a module that imports (not the script run as __main__), "
                       "building it with no arguments, or train with env='my_pkg.envs:make_env'")


def register_env(env: Any, params: Any = None) -> str:
    """Make `env` (or an `(env, params)` pair) available to the trainers under an id: its
    class's import path (`my_pkg.envs:Bandit`) where that rebuilds it, else an id of its own
    (`object:ClassName`, `object:ClassName#2`, ...); the same object gets the same id."""
    if params is None and isinstance(env, tuple) and len(env) == 2:
        env, params = env
    with _LOCK:
        for key, source in _OBJECTS.items():
            if source.env is env and source.params is params:
                return key
        base = f"{OBJECT_PREFIX}{type(env).__name__}"
        check_interface(env, base, params_given=params is not None)
        path = importable_path(env, params)
        if path is not None:
            _OBJECTS.setdefault(path, EnvSource(env, params if params is not None else env.default_params, path))
            return path
        key, n = base, 1
        while key in _OBJECTS:
            n += 1
            key = f"{base}#{n}"
        _OBJECTS[key] = EnvSource(env, params if params is not None else env.default_params, key)
    return key


def importable_path(env: Any, params: Any = None) -> str | None:
    """`module:Class` of `env`'s class where another process rebuilds `env` from it: the class
    is its module's (not `__main__`'s, not a function's own), and calling it with no
    arguments makes an env with the same attributes and, where `params` are given, the
    same default_params. None otherwise."""
    cls = type(env)
    path = f"{cls.__module__}:{cls.__qualname__}"
    if cls.__module__ == "__main__" or not IMPORT_PATH.match(path):
        return None
    found: Any = sys.modules.get(cls.__module__)
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    if found is not cls:
        return None
    try:
        with refusing_exit(f"{cls.__qualname__}()"):
            rebuilt = cls()
        same = _same_value(vars(rebuilt), vars(env)) and (
            params is None or _same_value(params, rebuilt.default_params))
    except Exception:  # noqa: BLE001 - the class may raise anything: the object keeps an id of its own
        return None
    return path if same else None


def _same_value(a: Any, b: Any) -> bool:
    """True when `a` and `b` are equal: dicts key by key, arrays element by element, anything
    else by `==` giving True. Never imports JAX (configured later, in `rltui.train`)."""
    import numpy as np

    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    if hasattr(a, "__array__") or hasattr(b, "__array__"):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))
    equal = a == b
    return isinstance(equal, (bool, np.bool_)) and bool(equal)


def announce_import(module: str) -> None:
    """One dim line on stderr naming the module an env comes from, so that a user whose
    run fails inside it knows which code ran."""
    dim, plain = ("\x1b[2m", "\x1b[0m") if sys.stderr.isatty() else ("", "")
    print(f"{dim}importing env module {module}{plain}", file=sys.stderr)


def _in_working_directory(module_name: str) -> Path | None:
    """The current directory, when the top package or module of `module_name` is there and
    the import system does not already look there."""
    top = module_name.partition(".")[0]
    cwd = Path.cwd()
    if str(cwd) in sys.path or "" in sys.path or "." in sys.path:
        return None
    return cwd if (cwd / f"{top}.py").is_file() or (cwd / top / "__init__.py").is_file() else None


class _ExitCalled(BaseException):
    """os._exit called by env code under `refusing_exit`; a BaseException, as SystemExit is,
    so that the env's own `except Exception` does not swallow it."""

    def __init__(self, code: Any):
        super().__init__(code)
        self.code = code


_real_exit = os._exit
_exit_guard = threading.local()
_exit_guards = 0
_exit_lock = threading.Lock()


def _guarded_exit(code: int) -> None:
    if getattr(_exit_guard, "what", None) is not None:
        raise _ExitCalled(code)
    _real_exit(code)


@contextlib.contextmanager
def refusing_exit(what: str) -> Iterator[None]:
    """Runs env code (its module's import, its factory, its tracing) so that `sys.exit` or
    `os._exit` in it is an EnvImportError naming `what`, not the end of rltui with exit code
    0 and nothing trained. os._exit ends the process without unwinding, so it is replaced,
    in this thread only, while the env code runs; other threads' calls go through."""
    global _exit_guards
    outer = getattr(_exit_guard, "what", None)
    with _exit_lock:
        _exit_guards += 1
        os._exit = _guarded_exit
    _exit_guard.what = what
    try:
        yield
    except SystemExit as err:
        raise EnvImportError(f"env: {what} called sys.exit({err.code!r}); an env must not end the process") from None
    except _ExitCalled as err:
        raise EnvImportError(f"env: {what} called os._exit({err.code!r}); an env must not end the process") from None
    finally:
        _exit_guard.what = outer
        with _exit_lock:
            _exit_guards -= 1
            if not _exit_guards:
                os._exit = _real_exit


def _import_env_module(module_name: str) -> Any:
    """Imports the env's module. As `python -m` does, a module in the current directory is
    found too: the console script's sys.path lacks that directory, and an env beside the
    user's notebook or script is where a first env lives. The directory goes last, so it
    never shadows an installed package."""
    here = _in_working_directory(module_name)
    if here is not None and importlib.util.find_spec(module_name.partition(".")[0]) is None:
        sys.path.append(str(here))
        announce_import(f"{module_name} (from the current directory)")
    else:
        announce_import(module_name)
    try:
        with refusing_exit(f"importing {module_name}"):
            return importlib.import_module(module_name)
    except EnvImportError:
        raise
    except ModuleNotFoundError as err:
        if err.name and (module_name == err.name or module_name.startswith(err.name + ".")):
            raise EnvModuleNotFound(module_name, err.name) from None
        raise EnvImportError(f"env: importing {module_name} raised {one_line(err)}") from None
    except Exception as err:  # noqa: BLE001 - the user's module may raise anything
        raise EnvImportError(f"env: importing {module_name} raised {one_line(err)}") from None


@functools.cache
def load(env_id: str) -> EnvSource:
    """The env an import-path id (with its JSON kwargs) or an API object id names. Cached:
    the same id gives the same object, so the trainers' compiled programs are reused. An
    object handed over in this process is used as it is, whichever its id."""
    with _LOCK:
        handed = _OBJECTS.get(env_id)
    if handed is not None:
        return handed
    if is_object_id(env_id):
        raise EnvImportError(
            f"env: {env_id} was an env object handed to rltui.train in another Python process, and only "
            "that process can build it: a run on it cannot be evaluated or watched from elsewhere, and "
            "resumes from Python only, given the env again: rltui.train(env=<your env>, resume=RUN_DIR); "
            + NOT_IMPORTABLE_HINT
        )
    from trainers import suites

    if suites.suite_of(env_id) is not None:
        return suites.load(env_id)
    ref = split_env_id(env_id)
    if not IMPORT_PATH.match(ref.path):
        raise EnvImportError(f"env: expected an import path like my_pkg.envs:make_env, got {ref.path!r}")
    module_name, _, attr = ref.path.partition(":")
    module = _import_env_module(module_name)
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise EnvImportError(f"env: module {module_name} has no attribute {attr!r}") from None
    if not callable(target):
        raise EnvImportError(f"env: {ref.path} is a {type(target).__name__}, not a class or function to call")
    try:
        with refusing_exit(describe_call(ref)):
            made = target(**ref.kwargs)
    except EnvImportError:
        raise
    except Exception as err:  # noqa: BLE001
        raise EnvImportError(f"env: {describe_call(ref)} raised {one_line(err)}") from None
    params = None
    if isinstance(made, tuple):
        if len(made) != 2:
            raise EnvImportError(
                f"env: {ref.path} returned a tuple of {len(made)}; expected an environment or (env, params)"
            )
        made, params = made
    check_interface(made, ref.path, params_given=params is not None)
    return EnvSource(made, params if params is not None else made.default_params, ref.path)


def check_interface(env: Any, origin: str, *, params_given: bool) -> None:
    """EnvImportError naming the first method of gymnax's interface `env` lacks."""
    needed = INTERFACE if params_given else INTERFACE + ("default_params",)
    for name in needed:
        if not hasattr(env, name) or (name != "default_params" and not callable(getattr(env, name))):
            what = "attribute" if name == "default_params" else "method"
            raise EnvImportError(
                f"env: {origin} gave a {type(env).__name__}, which has no {name} {what} "
                f"(an environment needs {', '.join(INTERFACE)} and default_params, as gymnax's do)"
            )


def traced_failure(err: BaseException, what: str, origin: str) -> EnvImportError:
    """The one-line message for an exception JAX raised while tracing `what` (reset or
    step): Python control flow on a traced value is by far the most common cause."""
    import jax

    location = _user_frame(err)
    at = f" at {location}" if location else ""
    tracer_errors = (
        jax.errors.ConcretizationTypeError,
        jax.errors.TracerBoolConversionError,
        jax.errors.TracerIntegerConversionError,
        jax.errors.TracerArrayConversionError,
    )
    if isinstance(err, tracer_errors):
        return EnvImportError(
            f"env: {origin}'s {what} cannot be traced by JAX{at}: {TRACING_HINT} ({type(err).__name__})"
        )
    if isinstance(err, TypeError) and ("as an abstract array" in str(err) or "not a valid JAX type" in str(err)):
        found = re.search(r"of type <class '([^']+)'>", str(err))
        kind = f" of type {found.group(1)}" if found else ""
        return EnvImportError(f"env: {origin}'s {what}: JAX cannot handle a value{kind}: {PYTREE_HINT}")
    return EnvImportError(f"env: {origin}'s {what} raised {one_line(err)}{at}")


def _user_frame(err: BaseException) -> str | None:
    """file:line of the innermost frame of the traceback outside JAX, gymnax and rltui."""
    tb = err.__traceback__
    found = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not any(part in filename for part in LIBRARY_PATHS):
            found = f"{filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found
