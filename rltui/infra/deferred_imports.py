"""Defers the plotting libraries gymnax imports when it is imported.

gymnax's environment modules import matplotlib and seaborn (and through seaborn, scipy and
pandas) at the top, for their `render` methods only. Importing them is most of the time it
takes to import gymnax, and every rltui process that trains or evaluates pays it before its
first step without ever drawing a figure.

While gymnax's package runs its `__init__`, imports of those libraries in the importing
thread yield placeholder modules. A placeholder imports the real module the first time
anything reads an attribute of it, and forwards reads and writes from then on, so a
`render` call works as it always did. The placeholders live in `sys.modules` only during
gymnax's import: afterwards any other import of matplotlib or seaborn gets the real
module. Where matplotlib or seaborn is already imported, or an attribute is read while
gymnax is being imported, nothing more is deferred."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types

DEFERRED = ("matplotlib", "seaborn")  # top-level packages; their submodules too
TRIGGER = "gymnax"  # the package whose import defers them

_lock = threading.RLock()

# What the import system reads of a module it creates, and may set when missing.
IMPORT_SYSTEM_NAMES = frozenset(("__spec__", "__loader__", "__package__", "__path__", "__file__", "__cached__"))


class Placeholder(types.ModuleType):
    """Stands in for the module of the same name until an attribute is read."""

    def __getattr__(self, name: str):
        # Only called for attributes the placeholder itself lacks: everything but the
        # import system's own and its submodules' placeholders.
        if _window.open and _window.importing():
            if name in IMPORT_SYSTEM_NAMES:
                raise AttributeError(name)
            if _window.is_submodule(self, name):
                # `from matplotlib import colors` asks for the attribute before it imports
                # the submodule: a placeholder too.
                return importlib.import_module(f"{self.__name__}.{name}")
        return getattr(self.real_module(), name)

    def __setattr__(self, name: str, value) -> None:
        real = self.__dict__.get("_real")
        if real is None or name in IMPORT_SYSTEM_NAMES:
            super().__setattr__(name, value)
        else:
            setattr(real, name, value)

    def __reduce__(self):  # pickled as a reference to the module, as a real module is
        return importlib.import_module, (self.__name__,)

    def real_module(self) -> types.ModuleType:
        real = self.__dict__.get("_real")
        if real is None:
            with _lock:
                real = self.__dict__.get("_real")
                if real is None:
                    _window.close()  # a read during gymnax's import: defer nothing more
                    real = importlib.import_module(self.__name__)
                    self.__dict__["_real"] = real
        return real

    def __dir__(self):
        return dir(self.real_module())

    def __repr__(self) -> str:
        state = "imported" if "_real" in self.__dict__ else "not imported yet"
        return f"<deferred module {self.__name__!r} ({state})>"


class _PlaceholderLoader(importlib.abc.Loader):
    def create_module(self, spec):
        module = Placeholder(spec.name)
        if spec.submodule_search_locations is not None:
            # a package's placeholder: its submodules are found where the real ones are
            module.__path__ = list(spec.submodule_search_locations)
        return module

    def exec_module(self, module) -> None:
        _window.placed.append(module.__name__)


class _Window(importlib.abc.MetaPathFinder):
    """Open while the trigger package runs its `__init__`: finds placeholders for DEFERRED."""

    def __init__(self) -> None:
        self.open = False
        self.thread: int | None = None  # the thread importing the trigger
        self.placed: list[str] = []

    def importing(self) -> bool:
        """Whether the calling thread is the one importing the trigger: other threads'
        imports are never deferred."""
        return threading.get_ident() == self.thread

    def find_spec(self, fullname, path, target=None):
        if not (self.open and self.importing()) or fullname.partition(".")[0] not in DEFERRED:
            return None
        real = importlib.machinery.PathFinder.find_spec(fullname, path)
        if real is None:
            return None  # not installed: let the import fail as it would
        spec = importlib.util.spec_from_loader(fullname, _PlaceholderLoader(),
                                               is_package=real.submodule_search_locations is not None)
        if real.submodule_search_locations is not None:
            spec.submodule_search_locations = list(real.submodule_search_locations)
        return spec

    def is_submodule(self, module: types.ModuleType, name: str) -> bool:
        path = module.__dict__.get("__path__")
        return (path is not None
                and importlib.machinery.PathFinder.find_spec(f"{module.__name__}.{name}", path) is not None)

    def close(self) -> None:
        """Take the placeholders out of sys.modules; the modules that imported them keep them."""
        with _lock:
            self.open, self.thread = False, None
            for name in self.placed:
                if isinstance(sys.modules.get(name), Placeholder):
                    del sys.modules[name]
            self.placed.clear()


_window = _Window()


class _TriggerLoader(importlib.abc.Loader):
    """The trigger package's own loader, with the window open while it executes."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        already = any(name in sys.modules for name in DEFERRED)
        with _lock:
            _window.open, _window.thread = not already, threading.get_ident()
        try:
            self.loader.exec_module(module)
        finally:
            _window.close()
            # the package keeps its own loader, as if it had been imported plainly, and
            # later imports meet the import system as it was
            module.__loader__ = module.__spec__.loader = self.loader
            with _lock:
                for finder in (_window, _TRIGGER_FINDER):
                    if finder in sys.meta_path:
                        sys.meta_path.remove(finder)

    def __getattr__(self, name):  # get_code, get_source, is_package, ... as the real loader
        return getattr(self.loader, name)


class _TriggerFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != TRIGGER:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _TriggerLoader(spec.loader)
        return spec


def install() -> None:
    """Defer DEFERRED while TRIGGER is imported in this process, if it has not been yet.
    Idempotent."""
    if TRIGGER in sys.modules:
        return
    with _lock:
        for finder in (_window, _TRIGGER_FINDER):
            if finder not in sys.meta_path:
                sys.meta_path.insert(0, finder)


_TRIGGER_FINDER = _TriggerFinder()
