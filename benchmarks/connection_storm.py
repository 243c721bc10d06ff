"""What a connection storm on the control socket costs training, and how long it locks new
clients out, in one run, on CartPole-v1 with the default configuration, served as
`rltui launch --no-ui` serves it:

  training updates per second while one process of --threads threads connects to the run's
  control socket and hangs up at once, as fast as it can (a storm: a full listen backlog is
  retried at once; with --storm wait, each connect waits for room instead; with --storm
  read, each reads the greeting's first line before it hangs up), against the same
  run with no load at all and under a CPU burner of the same shape (one process of
  --threads threads, always runnable, releasing the GIL around short C calls as the
  storm's threads do around their system calls), and under the same storm aimed at a
  socket nobody serves (its backlog full, every connect refused at once: the storm's own
  cost, with nothing of the server's in it). Each window's load process is started before
  the window and ended after it. One session trains throughout; rounds of quiet, storm,
  unserved storm, burner, burner, unserved storm, storm, quiet windows of --seconds each
  (so a linear drift in machine load cancels out of each round's ratios); the ratios
  storm/burner and storm/unserved are medians over rounds (target >= 0.9 for the first:
  a storm costs training little more than CPU load of its shape; the second is what the
  server's part of it costs). Compile and warm-up are excluded. After each
  storm: the seconds from its end until a new client (connecting as rltui's clients do)
  reads the run's greeting (target <= 2 s). Also reported: the connections the storm
  made, and the CPU the control server's thread and each load process used.

    python benchmarks/connection_storm.py [--threads 4] [--seconds 5] [--repeats 2] [--storm retry]

On a shared machine the rate of a few-second window moves by tens of percent from other
load alone: the quiet/quiet figure shows how much; use more --repeats to read a ratio.
"""

from __future__ import annotations

import argparse
import hashlib
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


def load_process(kind: str, threads: int, path: str) -> None:
    """The load of one window, until stdin closes: `threads` threads connecting to the
    socket at `path` and hanging up (retry: retrying at once while the backlog is full;
    wait: waiting in `connect` for room; read: as retry, reading a line before hanging
    up), or burning CPU (burn). Prints 'ready' once running, then 'connects failures
    cpu_seconds' at the end. Standard library only."""
    stop = threading.Event()
    counts = [0, 0]

    def storm() -> None:
        while not stop.is_set():
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if kind != "wait":
                sock.settimeout(5.0)  # a full backlog answers at once (EAGAIN), and is retried at once
            try:
                sock.connect(path)
                if kind == "read":
                    with sock.makefile("rb") as reader:
                        if not reader.readline():
                            raise ConnectionError("closed before the greeting")
                counts[0] += 1
            except BlockingIOError:
                pass
            except OSError:
                counts[1] += 1
            finally:
                sock.close()

    def burn() -> None:
        # Always runnable, and releasing the GIL around short C calls as a storm's thread
        # does around its system calls.
        data = bytes(1 << 12)
        while not stop.is_set():
            hashlib.sha256(data).digest()

    workers = [threading.Thread(target=burn if kind == "burn" else storm, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    print("ready", flush=True)
    sys.stdin.read()
    stop.set()
    for worker in workers:
        worker.join(10)
    print(counts[0], counts[1], time.process_time(), flush=True)


def thread_cpu(thread: threading.Thread) -> float:
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def first_reply_seconds(path: str, limit: float = 300.0) -> float:
    """Seconds until a new client, connecting as rltui's clients do, reads the greeting."""
    from rltui.control.remote import connect_retrying

    start = time.monotonic()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(limit)
        connect_retrying(sock, path, limit)
        with sock.makefile("rb") as reader:
            if not reader.readline():
                raise ConnectionError("closed before the greeting")
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=4, help="threads of the storm, and of the burner")
    parser.add_argument("--storm", choices=("retry", "wait", "read"), default="retry",
                        help="what each connect of the storm does when the backlog is full (retry at once, or wait "
                             "for room) and before it hangs up (read: the greeting's first line)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each measurement window")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds of load before each window starts")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds after the first chunk before measuring")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of 8 windows (see above)")
    parser.add_argument("--load", nargs=3, metavar=("KIND", "THREADS", "SOCKET"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        load_process(args.load[0], int(args.load[1]), args.load[2])
        return

    from rltui.config.build import RunConfig
    from rltui.infra import runtime

    config = RunConfig(total_timesteps=10**10)  # never finishes during the measurement
    runtime.configure_jax(host_devices=config.devices, compile_cache=True)
    cpus = runtime.start_backend(runtime.resolve_cpu_threads(config))
    import jax
    from rich.console import Console

    from rltui.control.server import ControlServer
    from rltui.headless import ProgressListener
    from rltui.session import TrainingSession
    from rltui.session.backend import JaxBackend

    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, {os.cpu_count()} cores, XLA CPU worker threads "
          f"{cpus}; CartPole-v1, {config.num_envs} envs x {config.num_steps} steps; load of {args.threads} threads")
    session = TrainingSession(JaxBackend(config.static_config(), config.seed), config.dynamic_hparams(),
                              config.total_updates, chunk_seconds=config.chunk_seconds)
    clock = StepClock()
    progress = ProgressListener(Console(file=io.StringIO()), config.total_updates * config.steps_per_update)
    session.add_listener(progress)  # what `--no-ui` attaches
    session.add_listener(clock)
    kinds = ("quiet", "storm", "unserved", "burn")
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    server_cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
    load_cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
    connects, failures, lockouts, storm_ratios, unserved_ratios, burn_ratios, noise = [], [], [], [], [], [], []
    with (progress, tempfile.TemporaryDirectory(prefix="storm") as run_dir,
          socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle):
        server = ControlServer(session, Path(run_dir), config=config.to_toml_dict())
        path = str(server.start())
        idle_path = str(Path(run_dir) / "unserved.sock")
        idle.bind(idle_path)
        idle.listen()  # never accepted from
        session.start()
        deadline = time.monotonic() + 600
        while not clock.marks:
            if time.monotonic() > deadline:
                raise TimeoutError("the session did not start")
            time.sleep(0.05)
        time.sleep(args.warmup)

        def window(kind: str) -> None:
            load = None
            if kind != "quiet":
                shape = "burn" if kind == "burn" else args.storm
                target = idle_path if kind == "unserved" else path
                load = subprocess.Popen([sys.executable, __file__, "--load", shape, str(args.threads), target],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                assert load.stdout.readline().strip() == "ready"
            time.sleep(args.settle)
            start, cpu = time.monotonic(), thread_cpu(server._thread)
            time.sleep(args.seconds)
            end = time.monotonic()
            server_cpu[kind].append((thread_cpu(server._thread) - cpu) / (end - start))
            rates[kind].append(clock.sps_between(start, end) / config.steps_per_update)
            if load is None:
                return
            out, _ = load.communicate("", timeout=60)  # closing stdin ends it
            made, failed, used = out.split()
            load_cpu[kind].append(float(used) / (end - start + args.settle))
            if kind == "storm":
                connects.append(int(made) / (end - start + args.settle))
                failures.append(int(failed))
                lockouts.append(first_reply_seconds(path))

        for round_number in range(args.repeats):
            for kind in ("quiet", "storm", "unserved", "burn", "burn", "unserved", "storm", "quiet"):
                window(kind)
            quiet, storm, unserved, burn = (sum(rates[kind][-2:]) for kind in kinds)
            storm_ratios.append(storm / burn)
            unserved_ratios.append(storm / unserved)
            burn_ratios.append(burn / quiet)
            noise.append(rates["quiet"][-1] / rates["quiet"][-2])
            print(f"  round {round_number + 1}: updates/s quiet {quiet / 2:6.1f}  storm {storm / 2:6.1f}  "
                  f"unserved {unserved / 2:6.1f}  burner {burn / 2:6.1f}   storm/burner {storm_ratios[-1]:.3f}  "
                  f"storm/unserved {unserved_ratios[-1]:.3f}   first reply after the storm "
                  f"{max(lockouts[-2:]):.2f} s", flush=True)
        session.stop()
        session.join(60)
        server.close()

    def median(values: list[float]) -> float:
        return statistics.median(values)

    print()
    windows = f"{len(rates['quiet'])} windows of {args.seconds:g} s"
    print(f"updates/s, no load     {median(rates['quiet']):8.1f}  ({windows})")
    print(f"updates/s, storm       {median(rates['storm']):8.1f}  ({', '.join(f'{r:.1f}' for r in rates['storm'])})")
    print(f"updates/s, unserved    {median(rates['unserved']):8.1f}  "
          f"({', '.join(f'{r:.1f}' for r in rates['unserved'])})")
    print(f"updates/s, CPU burner  {median(rates['burn']):8.1f}  ({', '.join(f'{r:.1f}' for r in rates['burn'])})")
    print(f"ratio storm / burner: median of rounds {median(storm_ratios):.3f} "
          f"(rounds {', '.join(f'{r:.3f}' for r in storm_ratios)}; target >= 0.9)")
    print(f"ratio storm / unserved storm: median of rounds {median(unserved_ratios):.3f} "
          f"(rounds {', '.join(f'{r:.3f}' for r in unserved_ratios)})")
    print(f"  for scale, burner / no load {', '.join(f'{r:.3f}' for r in burn_ratios)}; "
          f"quiet/quiet within a round {', '.join(f'{r:.3f}' for r in noise)}")
    print(f"seconds until a new client is served after the storm: max {max(lockouts):.2f} "
          f"({', '.join(f'{s:.2f}' for s in lockouts)}; target <= 2)")
    print(f"storm: {median(connects):,.0f} connections/s made, {sum(failures)} failed; CPU of the load process "
          f"{median(load_cpu['storm']):.2f} cores (storm), {median(load_cpu['unserved']):.2f} (unserved), "
          f"{median(load_cpu['burn']):.2f} (burner); the server thread "
          f"{median(server_cpu['storm']):.1%} of a core under the storm, {median(server_cpu['burn']):.1%} under the "
          f"burner, {median(server_cpu['quiet']):.1%} with no load; load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
