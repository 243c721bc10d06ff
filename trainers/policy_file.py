"""A trained policy as one self-contained file, written and read as data (never pickle).

A file is one msgpack map:

    {"format": "rltui-policy", "version": 1, "header": <JSON text>,
     "sha256": <hex digest of the header and arrays>, "arrays": <flax msgpack bytes>}

The header says everything needed to act without rltui's run directory, its config or the
env: the network (the class in `trainers.networks` and its fields), the observation and
action spaces, how a sampled action is drawn, and where the policy came from (env id,
algorithm, update). The arrays are the network's parameters and, where the run normalised
observations, their running statistics (`obs_stats`: count, mean, var).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import msgpack
import numpy as np
from flax import serialization

from trainers import file_table, json_text, networks
from trainers.hparams import quote

FORMAT = "rltui-policy"
VERSION = 1
# The module fields of a flax Module that are its place in a tree, not its description.
_MODULE_INTERNALS = ("parent", "name")
_DTYPES = {"bfloat16": jnp.bfloat16, "float32": jnp.float32}


class PolicyFileError(ValueError):
    """A policy file that cannot be used; the message says why in one line."""


class PolicyArrays(NamedTuple):
    """What a policy computes with: the network's parameters (a flax params tree) and the
    observation statistics (`normalize.RunningStats`; None when the run did not normalise)."""

    params: Any
    obs_stats: Any


def describe_network(module: nn.Module) -> dict[str, Any]:
    """`module` as JSON data: its class (one of `trainers.networks`) and its fields."""
    fields = {}
    for field in dataclasses.fields(module):
        if field.name in _MODULE_INTERNALS:
            continue
        value = getattr(module, field.name)
        if field.name == "dtype":
            value = None if value is None else jnp.dtype(value).name
        elif isinstance(value, tuple):
            value = list(value)
        fields[field.name] = value
    return {"class": type(module).__name__, "fields": fields}


def build_network(description: Any) -> nn.Module:
    """The flax module `describe_network` described; PolicyFileError for anything else."""
    if not isinstance(description, dict) or not isinstance(description.get("fields"), dict):
        raise PolicyFileError(f"policy file is damaged: its network is {quote(description)}")
    name = description.get("class")
    cls = getattr(networks, name, None) if isinstance(name, str) else None
    if not (isinstance(cls, type) and issubclass(cls, nn.Module) and cls.__module__ == networks.__name__):
        raise PolicyFileError(f"policy file names a network this rltui does not have: {quote(name)}; upgrade rltui")
    known = {f.name for f in dataclasses.fields(cls)} - set(_MODULE_INTERNALS)
    fields = dict(description["fields"])
    unknown = sorted(set(fields) - known)
    if unknown:
        raise PolicyFileError(f"policy file's {name} has fields this rltui does not know: {', '.join(unknown)}")
    if "dtype" in fields:
        if fields["dtype"] is not None and fields["dtype"] not in _DTYPES:
            raise PolicyFileError(f"policy file's network computes in {quote(fields['dtype'])}, which rltui does not")
        fields["dtype"] = None if fields["dtype"] is None else _DTYPES[fields["dtype"]]
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    try:
        return cls(**fields)
    except (TypeError, ValueError) as err:
        raise PolicyFileError(f"policy file's network cannot be built: {err}") from None


def _digest(header_text: str, arrays: bytes) -> str:
    digest = hashlib.sha256()
    for part in (FORMAT.encode(), header_text.encode("utf-8", "surrogatepass"), arrays):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


def encode(header: dict[str, Any], arrays: PolicyArrays) -> bytes:
    """The policy file of `header` (JSON data) and `arrays`."""
    stored = {"params": serialization.to_state_dict(arrays.params)}
    if arrays.obs_stats is not None:
        stored["obs_stats"] = serialization.to_state_dict(arrays.obs_stats)
    stored = jax.tree.map(np.asarray, stored)
    array_bytes = serialization.msgpack_serialize(stored)
    header_text = json.dumps(header, sort_keys=True)
    return msgpack.packb({"format": FORMAT, "version": VERSION, "header": header_text,
                          "sha256": _digest(header_text, array_bytes), "arrays": array_bytes}, use_bin_type=True)


class PolicyFile(NamedTuple):
    """A policy file read and checked: its header, and its arrays as stored (state dicts)."""

    header: dict[str, Any]
    stored: dict[str, Any]


def read(data: bytes) -> PolicyFile:
    """Check format, version and checksum and parse the header; PolicyFileError otherwise."""
    outer = file_table.open_table(
        data, file_format=FORMAT, newest_version=VERSION, noun="policy file", error=PolicyFileError,
        not_ours="not an rltui policy file (rltui export RUN --policy FILE writes one)",
        fields={"header": str, "arrays": bytes, "sha256": str})
    header_text, array_bytes = outer["header"], outer["arrays"]
    if _digest(header_text, array_bytes) != outer["sha256"]:
        raise PolicyFileError("policy file is corrupted or edited (checksum mismatch)")
    try:
        header = json_text.loads(header_text)
        stored = serialization.msgpack_restore(array_bytes)
    except Exception:  # noqa: BLE001 - JSON and msgpack raise several types for damaged input
        raise PolicyFileError("policy file is damaged: its header or arrays cannot be read") from None
    if not isinstance(header, dict) or not isinstance(stored, dict) or "params" not in stored:
        raise PolicyFileError("policy file is damaged: it holds no header table or no parameters")
    return PolicyFile(header, stored)


def restore_arrays(stored: dict[str, Any], template: PolicyArrays) -> PolicyArrays:
    """`stored` (`PolicyFile.stored`) in the structure of `template` (shapes and dtypes, from
    `jax.eval_shape`), every array checked against it and finite."""
    target = {"params": template.params}
    if template.obs_stats is not None:
        if "obs_stats" not in stored:
            raise PolicyFileError("policy file is damaged: its header says it normalises observations, "
                                  "but it holds no observation statistics")
        target["obs_stats"] = template.obs_stats
    try:
        restored = serialization.from_state_dict(target, {k: stored[k] for k in target})
    except (KeyError, ValueError, TypeError) as err:
        raise PolicyFileError(f"policy file's arrays do not fit its network: {err}") from None
    want = jax.tree_util.tree_leaves_with_path(target)
    got = jax.tree.leaves(restored)
    if len(want) != len(got):
        raise PolicyFileError("policy file's arrays do not fit its network (a different structure)")
    arrays = []
    for (path, spec), leaf in zip(want, got):
        array = np.asarray(leaf)
        if array.shape != tuple(spec.shape) or not np.issubdtype(array.dtype, np.floating):
            raise PolicyFileError(f"policy file's arrays do not fit its network: {jax.tree_util.keystr(path)} is "
                                  f"{array.dtype}{list(array.shape)}, expected {spec.dtype}{list(spec.shape)}")
        if not np.all(np.isfinite(array)):
            raise PolicyFileError(f"policy file's {jax.tree_util.keystr(path)} holds NaN or inf")
        arrays.append(array.astype(spec.dtype))
    restored = jax.tree.unflatten(jax.tree.structure(target), arrays)
    return PolicyArrays(restored["params"], restored.get("obs_stats"))


