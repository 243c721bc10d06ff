"""rltui: a terminal dashboard for training reinforcement-learning agents in JAX.

`rltui.train`, `rltui.make_config`, `rltui.TrainResult` and `rltui.export_policy` are the
Python API (`rltui.api`); `rltui.load_policy` loads an exported policy (`trainers.policy`).
Each is imported on first use so that `import rltui` stays cheap."""

__version__ = "0.1.0"

_API = ("train", "make_config", "TrainResult", "ApiError", "export_policy")
_POLICY = ("load_policy", "Policy", "PolicyStep", "PolicyFileError")


def __getattr__(name: str):
    if name in _API or name == "api":
        import importlib

        api = importlib.import_module("rltui.api")
        return api if name == "api" else getattr(api, name)
    if name in _POLICY:
        import importlib

        return getattr(importlib.import_module("trainers.policy"), name)
    raise AttributeError(f"module 'rltui' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_API) + list(_POLICY) + ["api"])
