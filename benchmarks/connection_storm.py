"""What a connection storm on the control socket costs training, in one run, on CartPole-v1
with the default configuration, served as `rltui launch --no-ui` serves it:

  env steps per second while --loops client processes connect to the run's control
  socket, read the first line of its greeting and hang up, as fast as the run lets them,
  against the same run with no client at all (the processes are started once, before the
  first window, and idle between storms). One session trains throughout; rounds of
  quiet, storm, storm, quiet windows of --seconds each (so a linear drift in machine load
  cancels out of each round's ratio); the ratio storm/quiet is the median over rounds
  (target >= 0.95: no client can slow training). Compile and warm-up are excluded.
  Also reported: the connections served per second, the connects that failed, and the
  CPU the control server's thread used in the storm windows and in the quiet ones.

    python benchmarks/connection_storm.py [--loops 10] [--seconds 5] [--repeats 3]

The storm's own processes use CPU too: on a machine with fewer cores than training uses
plus one, part of any slowdown is theirs, not the server's (the server's share is printed).
On a shared machine the SPS of a few-second window moves by tens of percent from other
load alone: the quiet/quiet figure shows how much; use more --repeats to read a ratio.
"""

from __future__ import annotations

import argparse
import io
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import StepClock


def storm_client(path: str, flag: str) -> None:
    """One connect/disconnect loop, run while the file `flag` exists; each time it goes,
    prints 'served failed' for that storm. Exits once `flag`.stop exists. Standard library
    only, and started before any window: its start-up costs no window anything."""
    served = failed = 0
    while not os.path.exists(flag + ".stop"):
        if not os.path.exists(flag):
            if served or failed:
                print(served, failed, flush=True)
                served = failed = 0
            time.sleep(0.02)
            continue
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(5.0)
        try:
            while True:
                try:
                    sock.connect(path)
                    break
                except BlockingIOError:  # the listen backlog is full: retry, as rltui's clients do
                    time.sleep(0.005)
            data = b""
            while b"\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    raise ConnectionError("closed before the greeting")
                data += chunk
            served += 1
        except OSError:
            failed += 1
        finally:
            sock.close()


def thread_cpu(thread: threading.Thread) -> float:
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loops", type=int, default=10, help="client processes connecting and disconnecting")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each measurement window")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds before each window starts")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds after the first chunk before measuring")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of quiet, storm x2, quiet")
    parser.add_argument("--storm-client", nargs=2, metavar=("SOCKET", "FLAG"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.storm_client:
        storm_client(*args.storm_client)
        return

    from rltui import runtime
    from rltui.config import RunConfig

    config = RunConfig(total_timesteps=10**10)  # never finishes during the measurement
    runtime.configure_jax(host_devices=config.devices, compile_cache=True)
    cpus = runtime.start_backend(runtime.resolve_cpu_threads(config))
    import jax
    from harness import fmt, repeat
    from rich.console import Console

    from rltui.headless import ProgressListener
    from rltui.session import TrainingSession
    from rltui.session.backend import JaxBackend
    from rltui.session.control_server import ControlServer

    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, {os.cpu_count()} cores, XLA CPU worker threads "
          f"{cpus}; CartPole-v1, {config.num_envs} envs x {config.num_steps} steps; {args.loops} storm loops")
    session = TrainingSession(JaxBackend(config.static_config(), config.seed), config.dynamic_hparams(),
                              config.total_updates, chunk_seconds=config.chunk_seconds)
    clock = StepClock()
    progress = ProgressListener(Console(file=io.StringIO()), config.total_updates * config.steps_per_update)
    session.add_listener(progress)  # what `--no-ui` attaches
    session.add_listener(clock)
    quiet, storm, ratios, rates, failures, server_cpu, quiet_cpu = [], [], [], [], [], [], []
    noise = []  # the second quiet window of a round over the first: how far load alone moves a figure
    with progress, tempfile.TemporaryDirectory(prefix="storm") as run_dir:
        server = ControlServer(session, Path(run_dir), config=config.to_toml_dict())
        path = str(server.start())
        session.start()
        deadline = time.monotonic() + 600
        while not clock.marks:
            if time.monotonic() > deadline:
                raise TimeoutError("the session did not start")
            time.sleep(0.05)
        time.sleep(args.warmup)

        def quiet_window() -> None:
            time.sleep(args.settle)
            start, cpu = time.monotonic(), thread_cpu(server._thread)
            time.sleep(args.seconds)
            end = time.monotonic()
            quiet_cpu.append((thread_cpu(server._thread) - cpu) / (end - start))
            quiet.append(clock.sps_between(start, end))

        flag = str(Path(run_dir) / "storm")
        clients = [subprocess.Popen([sys.executable, __file__, "--storm-client", path, flag],
                                    stdout=subprocess.PIPE, text=True) for _ in range(args.loops)]
        time.sleep(args.settle)

        def storm_window() -> None:
            Path(flag).touch()
            time.sleep(args.settle)
            start, cpu = time.monotonic(), thread_cpu(server._thread)
            time.sleep(args.seconds)
            end = time.monotonic()
            server_cpu.append((thread_cpu(server._thread) - cpu) / (end - start))
            storm.append(clock.sps_between(start, end))
            os.unlink(flag)
            counts = [tuple(map(int, client.stdout.readline().split())) for client in clients]
            rates.append(sum(c[0] for c in counts) / (end - start + args.settle))
            failures.append(sum(c[1] for c in counts))

        for round_number in range(args.repeats):
            # ABBA: a linear drift in machine load cancels out of each round's ratio.
            quiet_window()
            storm_window()
            storm_window()
            quiet_window()
            ratios.append(sum(storm[-2:]) / sum(quiet[-2:]))
            noise.append(quiet[-1] / quiet[-2])
            print(f"  round {round_number + 1}: quiet {quiet[-2]:>9,.0f} {quiet[-1]:>9,.0f} SPS   storm "
                  f"{storm[-2]:>9,.0f} {storm[-1]:>9,.0f} SPS   ratio {ratios[-1]:.3f}   "
                  f"({statistics.mean(rates[-2:]):,.0f} connections/s, {sum(failures[-2:])} failed; server thread "
                  f"{statistics.mean(server_cpu[-2:]):.1%} of a core)", flush=True)
        Path(flag + ".stop").touch()
        for client in clients:
            client.wait(30)
        session.stop()
        session.join(60)
        server.close()

    print()
    print(
        f"SPS, no clients  {fmt(repeat(iter(quiet).__next__, len(quiet)))}"
        f"  ({len(quiet)} windows of {args.seconds:g} s)"
    )
    print(f"SPS, storm       {fmt(repeat(iter(storm).__next__, len(storm)))}")
    print(f"ratio storm / no clients: median of rounds {statistics.median(ratios):.3f} "
          f"(rounds {', '.join(f'{r:.3f}' for r in ratios)}; target >= 0.95)")
    print(f"  for scale, quiet/quiet within a round: {', '.join(f'{r:.3f}' for r in noise)}")
    print(f"storm: {statistics.median(rates):,.0f} connections/s served (median), {sum(failures)} failed connects; "
          f"the server thread used {statistics.median(server_cpu):.1%} of one core (median; "
          f"{statistics.median(quiet_cpu):.1%} with no clients); "
          f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
