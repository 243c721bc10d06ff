"""The headless progress display (`rltui.headless.ProgressListener`), fed snapshots by hand."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path
from types import MappingProxyType

import pytest
from rich.console import Console

from rltui.headless import GuardedOutput, ProgressListener
from rltui.runfiles.summary import return_text, summary_line
from rltui.session import MetricsSnapshot, SessionState

STEPS = 100  # env steps per update
TOTAL = 100  # updates


def snapshot(update: int, sps: float, seed_returns: tuple = ()) -> MetricsSnapshot:
    return MetricsSnapshot(
        state=SessionState.RUNNING,
        update=update,
        total_updates=TOTAL,
        env_steps=update * STEPS,
        total_env_steps=TOTAL * STEPS,
        elapsed=1.0,
        sps=sps,
        hparams=MappingProxyType({}),
        new_records=(),
        history=MappingProxyType({"episode_return": (20.0,)}),
        history_env_steps=(update * STEPS,),
        seed_returns=seed_returns,
    )


def bar(terminal: bool = True) -> tuple[ProgressListener, io.StringIO]:
    out = io.StringIO()
    return ProgressListener(Console(file=out, force_terminal=terminal, width=120), TOTAL * STEPS), out


def shown(listener: ProgressListener) -> tuple[str, str]:
    task = listener.progress.tasks[0]
    return task.description, task.fields["eta"]


def test_eta_waits_for_the_second_chunk():
    # The first chunk is one update paying start-up costs: its speed is not the run's.
    listener, _ = bar()
    listener.on_state(SessionState.RUNNING, None)
    listener.on_metrics(snapshot(1, sps=100.0))
    assert shown(listener) == ("running", "—")
    listener.on_metrics(snapshot(10, sps=1000.0))
    assert shown(listener) == ("running", "0:00:09")  # 90 updates x 100 steps at 1000 SPS


def test_eta_of_a_long_run_counts_hours():
    listener, _ = bar()
    listener.on_metrics(snapshot(1, sps=1.0))
    listener.on_metrics(snapshot(2, sps=1.0))
    assert shown(listener)[1] == "2:43:20"  # 9800 s


def test_stopped_run_says_stopped_and_drops_its_eta():
    listener, _ = bar()
    listener.on_state(SessionState.RUNNING, None)
    listener.on_metrics(snapshot(1, sps=1000.0))
    listener.on_metrics(snapshot(10, sps=1000.0))
    listener.on_state(SessionState.STOPPING, None)
    listener.on_state(SessionState.FINISHED, None)
    assert shown(listener) == ("stopped", "—")


def test_finished_run_says_finished():
    listener, _ = bar()
    listener.on_state(SessionState.RUNNING, None)
    listener.on_metrics(snapshot(1, sps=1000.0))
    listener.on_metrics(snapshot(TOTAL, sps=1000.0))
    listener.on_state(SessionState.FINISHED, None)
    assert shown(listener) == ("finished", "0:00:00")


def test_plain_lines_when_not_a_terminal():
    listener, out = bar(terminal=False)
    listener.on_metrics(snapshot(1, sps=100.0))
    listener.on_metrics(snapshot(TOTAL, sps=1000.0))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("update 1/100  steps 100  sps 100  return 20.0  eta —"), lines
    assert lines[-1].endswith("eta 0s"), lines


def test_return_of_several_seeds_says_it_is_their_mean():
    listener, out = bar(terminal=False)
    listener.on_metrics(snapshot(1, sps=100.0, seed_returns=((10.0,), (20.0,), (30.0,))))
    assert listener.progress.tasks[0].fields["ret"] == "20.0 (mean of 3 seeds)"
    assert "return 20.0 (mean of 3 seeds)" in out.getvalue()
    assert listener.latest_return == "20.0 (mean of 3 seeds)"  # the run's last line says it too


def test_seeds_return_is_each_seeds_latest_and_counts_those_that_have_one():
    nan = float("nan")
    # seed 0 finished an episode in update 1 only, seed 1 in both, seed 2 in neither
    seeds = ((10.0, nan), (20.0, 40.0), (nan, nan))
    assert return_text(snapshot(2, sps=100.0, seed_returns=seeds)) == "25.0 (mean of 2 of 3 seeds)"
    assert return_text(snapshot(2, sps=100.0, seed_returns=((nan,), (nan,)))) == "—"
    assert return_text(snapshot(2, sps=100.0)) == "20.0"  # one seed: the history's latest


def test_abort_leaves_the_bar_saying_aborted():
    listener, _ = bar()
    listener.progress.start()
    listener.on_metrics(snapshot(1, sps=1000.0))
    listener.on_metrics(snapshot(10, sps=1000.0))
    listener.abort()
    assert shown(listener) == ("aborted", "—")
    assert not listener.progress.live.is_started  # no redraw after the final message


def test_summary_line_counts_in_words_a_user_reads():
    assert summary_line("Stopped", 1, 512, "—") == "Stopped after 1 update (512 env steps), latest mean return —."
    assert summary_line("Finished", 21183, 10_845_696, "500.0") == (
        "Finished after 21,183 updates (10,845,696 env steps), latest mean return 500.0."
    )


class _ClosedPipe(io.StringIO):
    """A stream whose reader has gone: every write fails, as stderr into `| head -1` does."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self):
        raise io.UnsupportedOperation("no descriptor")  # nothing to point at the null device


def test_display_whose_output_goes_away_goes_quiet_and_says_so_once():
    # rich's own broken-pipe handling raises SystemExit, on the session thread here.
    closed = []
    output = GuardedOutput(_ClosedPipe(), lambda: closed.append(1))
    listener = ProgressListener(Console(file=output, force_terminal=False, width=120), TOTAL * STEPS, plain_interval=0)
    for update in (1, 2, 3):
        listener.on_metrics(snapshot(update, sps=100.0))
    listener.console.print("the last line")
    assert closed == [1] and output.closed_output


class _BusyTerminal(io.StringIO):
    """A terminal another process made non-blocking, its output queue full at first: the
    first write and the first flush fail with EAGAIN (one an interrupted call), then all works."""

    def __init__(self):
        super().__init__()
        self.failures = [BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable"),
                         InterruptedError(errno.EINTR, "Interrupted system call")]

    def write(self, text):
        if self.failures:
            raise self.failures.pop(0)
        return super().write(text)

    def flush(self):
        if self.failures:
            raise self.failures.pop(0)

    def fileno(self):
        raise io.UnsupportedOperation("no descriptor")


def test_a_terminal_that_would_block_is_waited_for_not_taken_for_gone():
    closed = []
    terminal = _BusyTerminal()
    output = GuardedOutput(terminal, lambda: closed.append(1))
    output.write("frame one\n")
    terminal.failures.append(BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable"))
    output.flush()
    output.write("frame two\n")
    assert terminal.getvalue() == "frame one\nframe two\n"
    assert closed == [] and not output.closed_output


@pytest.mark.parametrize("gone", [errno.EIO, errno.ENXIO, errno.EPIPE, errno.EBADF])
def test_a_terminal_that_hung_up_is_gone_for_good(gone):
    closed = []
    terminal = _BusyTerminal()
    terminal.failures = [OSError(gone, os.strerror(gone))]
    output = GuardedOutput(terminal, lambda: closed.append(1))
    output.write("frame\n")
    output.write("another\n")
    assert closed == [1] and output.closed_output and terminal.getvalue() == ""


def test_the_last_lines_say_how_to_train_on(tmp_path, monkeypatch):
    from rltui.runfiles.checkpoints import CheckpointStore
    from rltui.runfiles.summary import continue_line

    monkeypatch.chdir(tmp_path)
    for run in ("runs/a b", "runs/x"):
        CheckpointStore.for_run(Path(run)).save(b"a checkpoint", 7)
    assert continue_line("runs/a b", 500_224, True) == (
        "To train on: rltui launch --resume 'runs/a b' --set total_timesteps=1000448")
    assert continue_line("runs/x", 1_000, False) == "To go on: rltui launch --resume runs/x"
    # A run on an env object handed to the Python API: no other process can build its env,
    # so it goes on from Python, the env handed over again.
    assert continue_line("runs/x", 1_000, True, "object:Bandit") == (
        'To train on: rltui.train(env=<your env>, resume="runs/x", total_timesteps=2000)')
    assert continue_line("runs/a b", 1_000, False, "object:Bandit#2") == (
        'To go on: rltui.train(env=<your env>, resume="runs/a b")')
    # Diverged: the same checkpoint, seed and program would diverge again; half the rate,
    # to the total the run was training to (its checkpoint may hold a smaller one).
    assert continue_line("runs/x", 1_000, False, diverged=True, lr=3e-4, total_env_steps=4096) == (
        "To go on from update 7, at half the learning rate: rltui launch --resume runs/x --set lr=0.00015 "
        "--set total_timesteps=4096")
    assert continue_line("runs/x", 1_000, False, "object:Bandit", diverged=True, lr=3e-4, total_env_steps=4096) == (
        'To go on from update 7, at half the learning rate: rltui.train(env=<your env>, resume="runs/x", '
        'lr=0.00015, total_timesteps=4096)')
    # Without a checkpoint, a resume could not work: a new start from the run's configuration.
    assert continue_line("runs/new one", 1_000, False, diverged=True, lr=3e-4) == (
        "It diverged before its first checkpoint; to start again at half the learning rate: "
        "rltui launch --config 'runs/new one/config.toml' --set lr=0.00015")
    assert continue_line("runs/new one", 1_000, False, "object:Bandit", diverged=True, lr=3e-4) == (
        "It diverged before its first checkpoint: train again with rltui.train(env=<your env>, ...)")


def test_a_run_that_evaluates_shows_its_latest_evaluation_return():
    import dataclasses

    from rltui.session.metrics import UpdateRecord

    output = io.StringIO()
    listener = ProgressListener(Console(file=output, force_terminal=False, width=120), TOTAL * STEPS, plain_interval=0)
    listener.on_metrics(snapshot(1, 1000.0))
    assert "eval" not in output.getvalue()  # nothing evaluated yet: nothing said
    evaluated = UpdateRecord(update=2, env_steps=2 * STEPS, wall_time=1.0, sps=1000.0, values={"eval_return": 240.0})
    listener.on_metrics(dataclasses.replace(snapshot(2, 1000.0), new_records=(evaluated,)))
    listener.on_metrics(snapshot(3, 1000.0))  # the latest evaluation stays shown between evaluations
    lines = output.getvalue().splitlines()
    assert "return 20.0 · eval 240.0" in lines[-2] and "return 20.0 · eval 240.0" in lines[-1]


def test_a_member_edit_is_one_line_not_two():
    from rltui.session import SessionEvent

    listener, out = bar(terminal=False)
    edit = {"changes": {"lr": 5e-4}, "members": [1]}
    listener.on_event(SessionEvent("hparams", 7, "set lr -> 0.0005 for member 1", 0.1, edit))
    listener.on_event(SessionEvent("population", 7, "set lr -> 0.0005 for member 1", 0.1, {"action": "edit"}))
    listener.on_event(SessionEvent("population", 9, "froze member 2", 0.2, {"action": "freeze"}))
    lines = out.getvalue().splitlines()
    assert lines == ["[update 7] set lr -> 0.0005 for member 1", "[update 9] froze member 2"]


def test_a_tie_at_the_top_names_the_member_info_stars():
    # Every member at CartPole's 500: the summary, the member list and `rltui info` all
    # name the lowest index as the best.
    from types import MappingProxyType

    from rltui.commands.info import population_record
    from rltui.runfiles.summary import population_lines, population_return_text
    from rltui.session.population import MemberState, MemberView, PopulationView

    members = tuple(MemberView(m, MappingProxyType({"lr": 1e-3 * (m + 1)}), MemberState.TRAINING, 500.0, 500.0,
                               None, (), None) for m in range(3))
    view = PopulationView(keys=("lr",), num_seeds=1, members=members)
    assert population_return_text(view) == "500.0 (mean of 3 members; best 500.0, member 0)"
    assert population_lines(view)[0].split()[:2] == ["member", "0"]
    saved = {"members": [{"values": {"lr": m.values["lr"]}, "latest_return": 500.0} for m in members]}
    assert population_record(saved, {}, {"lr"})["best_member"] == 0
