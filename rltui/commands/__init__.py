"""The `rltui` commands: one module per command, each owning its parser; here, what
several of them check alike."""

from __future__ import annotations

from rltui.errors import UsageError


def check_member(member: int | None, members: int) -> None:
    """Refuse a `--member` the run did not train (a run of one configuration has member 0)."""
    if member is not None and member >= members:
        raise UsageError(f"--member {member}: this run trained {members} members (0 to {members - 1})" if members > 1
                         else f"--member {member}: this run trained one configuration, member 0")
