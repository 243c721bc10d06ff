"""`rltui launch --coordinator HOST:PORT --num-processes N --process-id I`: one training run
over several processes (several hosts, or one process per GPU), with JAX's distributed
runtime.

The runtime aborts a process (SIGABRT, from C++) when a peer does not join in time or
stops sending heartbeats; Python cannot catch that. So the command the user started only
supervises: it runs the real launch in a child process and, if the runtime ended the
child, says in one line what that means. Until `initialize` JAX is not imported.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys

from rltui.errors import ExitCode, report

DEFAULT_PEER_TIMEOUT = 60  # seconds
_CHILD_ENV = "RLTUI_DISTRIBUTED_CHILD"  # set in the supervised child
_ADDRESS = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9_.-]+)):(?P<port>\d{1,5})$")
_OWN_CODES = (0, 1, 2, 3, 130)  # exit codes rltui itself gives (see the README)


@dataclasses.dataclass(frozen=True)
class DistributedSpec:
    coordinator: str  # HOST:PORT of process 0
    num_processes: int
    process_id: int
    peer_timeout: int  # seconds: to join, and without a peer's heartbeat

    @property
    def writer(self) -> bool:
        """Process 0 writes the run files and checkpoints and owns the control socket."""
        return self.process_id == 0

    @property
    def label(self) -> str:
        return f"process {self.process_id} of {self.num_processes}"


def spec_from_args(args) -> DistributedSpec | None:
    """The multi-process settings, None for an ordinary run; ValueError (one line) if
    they are incomplete or out of range."""
    given = {
        "--coordinator": args.coordinator,
        "--num-processes": args.num_processes,
        "--process-id": args.process_id,
    }
    missing = [flag for flag, value in given.items() if value is None]
    if len(missing) == len(given):
        if args.peer_timeout is not None:
            raise ValueError(
                "--peer-timeout: only for a multi-process run (--coordinator, --num-processes, --process-id)"
            )
        return None
    if missing:
        raise ValueError(
            f"{', '.join(missing)}: --coordinator, --num-processes and --process-id go together (a multi-process run)"
        )
    match = _ADDRESS.match(args.coordinator)
    if not match or not 1 <= int(match.group("port")) <= 65535:
        raise ValueError(f"--coordinator: expected HOST:PORT (e.g. 10.0.0.1:7777), got {args.coordinator!r}")
    if args.num_processes < 1:
        raise ValueError(f"--num-processes: must be at least 1, got {args.num_processes}")
    if not 0 <= args.process_id < args.num_processes:
        raise ValueError(f"--process-id: must be in [0, {args.num_processes}), got {args.process_id}")
    timeout = DEFAULT_PEER_TIMEOUT if args.peer_timeout is None else args.peer_timeout
    if timeout < 1:
        raise ValueError(f"--peer-timeout: must be at least 1 second, got {timeout}")
    if not args.no_ui:
        raise ValueError(
            "--coordinator: a multi-process run is headless only; add --no-ui (rltui attach works on process 0)"
        )
    if args.resume:
        raise ValueError(
            "--resume: not available in a multi-process run; resume its checkpoint in a single process "
            "(same num_envs), or start a new multi-process run"
        )
    return DistributedSpec(args.coordinator, args.num_processes, args.process_id, timeout)


def is_supervised() -> bool:
    return os.environ.get(_CHILD_ENV) == "1"


def supervise(spec: DistributedSpec, argv: list[str]) -> int:
    """Run `rltui <argv>` in a child and pass on its exit code; if JAX's runtime ended it,
    say so in one line and return ExitCode.PEER_LOST. Signals are passed to the child (its own
    process group, so a terminal's Ctrl+C reaches it once, through here)."""
    print(
        f"rltui: {spec.label}: joining the others at {spec.coordinator} "
        f"(waits up to {spec.peer_timeout} s for every process)",
        file=sys.stderr, flush=True,
    )
    child = subprocess.Popen(
        [sys.executable, "-m", "rltui", *argv], env={**os.environ, _CHILD_ENV: "1"}, start_new_session=True
    )

    forwarded: set[int] = set()

    def forward(signum, frame):
        forwarded.add(signum)
        child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if code in _OWN_CODES:
        return code
    if -code in forwarded:  # ended by a signal sent to us (e.g. the terminal closed): not a peer's doing
        return 128 - code
    how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    sys.stderr.flush()
    return report(
        f"{spec.label}: the JAX distributed runtime ended it ({how}): a peer process is missing, "
        f"died, or did not join {spec.coordinator} within {spec.peer_timeout} s; see the lines above",
        ExitCode.PEER_LOST,
    )


def initialize(spec: DistributedSpec) -> None:
    """Join the run. Call after `runtime.configure_jax` and before any other JAX use."""
    import jax

    jax.distributed.initialize(
        coordinator_address=spec.coordinator,
        num_processes=spec.num_processes,
        process_id=spec.process_id,
        initialization_timeout=spec.peer_timeout,
        heartbeat_timeout_seconds=spec.peer_timeout,
        shutdown_timeout_seconds=spec.peer_timeout,
    )


def select_devices(requested: int) -> list:
    """The run's devices, in the same order on every process: each process's first
    `requested` local devices (0: all of them), process by process."""
    import jax

    by_process: dict[int, list] = {}
    for device in jax.devices():
        by_process.setdefault(device.process_index, []).append(device)
    counts = {len(devices) for devices in by_process.values()}
    local = len(jax.local_devices())
    if requested > local:
        raise ValueError(f"devices: {requested} requested per process but only {local} device(s) on this process")
    if requested == 0 and len(counts) > 1:
        raise ValueError("devices: the processes have different device counts; set devices (per process)")
    take = requested or local
    return [device for index in sorted(by_process) for device in by_process[index][:take]]
