"""`rltui compare`, and the statistics it shares with the runs view: debiased EMA, IQM,
t and bootstrap intervals and grouped bands, each against a small hand-checked example."""

from __future__ import annotations

import io
import math
import re
import time
import warnings

import numpy as np
import pytest
from test_export import STEPS, make_run

from rltui.cli import main
from rltui.commands.compare import wants_colour
from rltui.formatting import fmt_duration
from rltui.runfiles.discovery import RunState
from rltui.runfiles.loading import load_run
from rltui.runfiles.reader import read_run
from rltui.runfiles.statistics import band, bootstrap, ema, iqm, mean, t_interval, t_quantile
from rltui.runs_view.rows import row_of

# --- statistics, hand-checked ---------------------------------------------------------------


def test_ema_is_debiased():
    # weight 0.5 on [1, 3]: 0.5/0.5 = 1, then (0.25 + 1.5)/0.75 = 7/3.
    assert ema([1.0, 3.0], 0.5) == pytest.approx([1.0, 7 / 3])
    assert ema([4.0, 4.0, 4.0], 0.9) == pytest.approx([4.0, 4.0, 4.0])  # no pull toward zero
    assert ema([1.0, 5.0], 0.0) == pytest.approx([1.0, 5.0])


def test_ema_passes_over_points_that_are_not_numbers():
    # The chart's series hold NaN where no episode ended: a gap stays a gap and weighs
    # nothing, so the points after it are smoothed as if it were not there.
    smoothed = ema([1.0, math.nan, 3.0, math.inf], 0.5)
    assert smoothed[[0, 2]] == pytest.approx([1.0, 7 / 3])
    assert np.isnan(smoothed[[1, 3]]).all()
    with pytest.raises(ValueError):
        ema([1.0], 1.0)


def test_iqm_trims_a_quarter_at_each_end():
    assert iqm([8, 1, 7, 2, 6, 3, 5, 4]) == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    # n = 5: the middle 50% is [1.25, 3.75) of the count: 0.75 x 2 + 3 + 0.75 x 4, over 2.5.
    assert iqm([1, 2, 3, 4, 100]) == pytest.approx(3.0)
    assert math.isnan(iqm([]))


def test_bootstrap_interval_of_two_runs_spans_them():
    # Resampled means of [0, 10] are 0, 5 or 10 (1/4, 1/2, 1/4): the 95% interval is [0, 10].
    interval = bootstrap([0.0, 10.0], mean, resamples=4000)
    assert (interval.center, interval.low, interval.high) == pytest.approx((5.0, 0.0, 10.0))
    assert (interval.kind, interval.n) == ("range", 2)  # all it can say: the runs' min to max
    assert bootstrap([3.0, 3.0, 3.0])[:3] == pytest.approx((3.0, 3.0, 3.0))
    assert bootstrap([7.0])[:4] == (7.0, 7.0, 7.0, "none")
    assert bootstrap([1, 2, 3, 4, 100], iqm) == bootstrap([1, 2, 3, 4, 100], iqm)  # seeded: stable
    assert bootstrap(list(range(40)), mean).kind == "bootstrap"  # inside the range: a bootstrap interval


def test_t_interval_of_a_few_runs_is_as_wide_as_they_warrant():
    # Student's t quantiles at 0.975, as printed in every table.
    for df, quantile in ((1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (29, 2.045), (1000, 1.962)):
        assert t_quantile(0.975, df) == pytest.approx(quantile, abs=5e-4)
    # Two runs, 18 and 19: 18.5 +- 12.706 x 0.7071 / 1.4142, far wider than their range.
    interval = t_interval([18.0, 19.0])
    assert interval[:3] == pytest.approx((18.5, 18.5 - 6.353, 18.5 + 6.353), abs=1e-3)
    assert (interval.kind, interval.n) == ("t", 2)
    one = t_interval([7.0])
    assert one.center == 7.0 and math.isnan(one.low) and (one.kind, one.n) == ("none", 1)


def test_band_of_two_runs_on_a_common_grid():
    a = ([0, 10, 20], [0.0, 10.0, 20.0])
    b = ([0, 10, 20, 30], [2.0, 12.0, 22.0, 32.0])  # longer: the band stops where a ends
    result = band([a, b], "mean", points=3, resamples=4000)
    assert result.steps == pytest.approx([0, 10, 20])
    assert result.center == pytest.approx([1, 11, 21])
    # The mean's t interval: the runs differ by 2, s = sqrt(2), so +- t(0.975, 1) x sqrt(2) / sqrt(2).
    half = t_quantile(0.975, 1)
    assert result.low == pytest.approx([1 - half, 11 - half, 21 - half])
    assert result.high == pytest.approx([1 + half, 11 + half, 21 + half])
    iqm_band = band([a, b], "iqm", points=3, resamples=4000)  # the IQM's bootstrap: here the range
    assert iqm_band.low == pytest.approx([0, 10, 20]) and iqm_band.high == pytest.approx([2, 12, 22])


# --- compare ---------------------------------------------------------------------------------


@pytest.fixture
def runs(tmp_path):
    # Returns 2u (null every third update): finite at u = 1 2 4 5 7 8 10 11 -> 2 4 8 10 14 16 20 22.
    a = make_run(tmp_path / "a", 12, config={"seed": 0})
    b = make_run(tmp_path / "b", 12, config={"seed": 1, "lr": 1e-3}, ret=lambda u: 3.0 * u)
    c = make_run(tmp_path / "c", 12, config={"seed": 2, "lr": 1e-3}, ret=lambda u: 3.0 * u + 1)
    return a, b, c


def test_compare_table(runs, capsys):
    a, b, c = runs
    assert main(["compare", str(a), str(b), str(c), "--threshold", "15"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # The final column says what it is: the mean of the last 10 values, not the latest one.
    assert lines[0].split() == ["run", "env", "algo", "env", "steps", "mean", "of", "last", "10", "episode_return",
                                "best", "episode_return", "steps", "to", "15", "wall", "time", "config", "vs", "first",
                                "run"]
    # a: final = mean of its 8 finite returns = 96/8 = 12, best 22, first >= 15 at update 8.
    assert lines[2].split() == ["a", "CartPole-v1", "ppo", "1,536", "12", "22", "1,024", "0:03", "(first)"]
    # b: 3u -> 3 6 12 15 21 24 30 33: final 18, best 33, 15 first at update 5.
    assert lines[3].split() == ["b", "CartPole-v1", "ppo", "1,536", "18", "33", "640", "0:03", "lr=0.001", "seed=1"]
    assert lines[4].split()[-2:] == ["lr=0.001", "seed=2"]


def test_compare_of_a_loss_takes_its_lowest_as_best_and_reaches_a_threshold_from_above(tmp_path, capsys):
    import json

    run = make_run(tmp_path / "dqn", 12, config={"algo": "dqn"})
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for record in records:
        record["td_loss"] = 10.0 / record["update"]  # 10, 5, 3.33, 2.5, 2, ... 0.833
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["compare", str(run), "--metric", "td_loss", "--threshold", "2"]) == 0
    row = capsys.readouterr().out.splitlines()[2].split()
    # final: the mean of 10/3 ... 10/12; best: the lowest, 10/12; at or below 2 from update 5.
    assert row[4] == f"{np.mean([10 / u for u in range(3, 13)]):.4g}" and row[5] == "0.8333", row
    assert row[6] == f"{5 * STEPS:,}", row


def test_compare_of_a_diagnostic_calls_its_highest_the_max(tmp_path, capsys):
    # A policy loss or an entropy has no better direction: its highest is no run's best.
    import json

    run = make_run(tmp_path / "ppo", 12)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for record in records:
        record["entropy"] = 1.0 / record["update"]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["compare", str(run), "--metric", "entropy"]) == 0
    header, _, row = capsys.readouterr().out.splitlines()[:3]
    assert "max entropy" in header and "best entropy" not in header
    assert row.split()[5] == "1", row
    assert main(["compare", str(run), "--metric", "episode_return"]) == 0
    assert "best episode_return" in capsys.readouterr().out.splitlines()[0]


def test_compare_across_algorithms_lists_only_the_keys_each_run_reads(tmp_path, capsys):
    dqn = make_run(tmp_path / "dqn", 12, config={"algo": "dqn", "double_q": True, "eps_end": 0.01, "lr": 1e-3})
    ppo = make_run(tmp_path / "ppo", 12, config={"algo": "ppo", "double_q": False, "eps_end": 0.2, "clip_eps": 0.1})
    assert main(["compare", str(dqn), str(ppo)]) == 0
    row = capsys.readouterr().out.splitlines()[3]
    # PPO reads neither double_q nor eps_end: that they differ from DQN's says nothing.
    assert row.split()[-3:] == ["algo=ppo", "clip_eps=0.1", "lr=0.0003"], row


def test_compare_leaves_out_a_key_for_the_other_action_space(tmp_path, capsys):
    # A continuous env's run holds log_std; a discrete env's config.toml leaves it out, as its
    # run does not read it.
    pendulum = make_run(tmp_path / "pendulum", 12, config={"env": "Pendulum-v1", "log_std": "state", "lr": 1e-3})
    cartpole = make_run(tmp_path / "cartpole", 12, config={"env": "CartPole-v1", "lr": 1e-3})
    assert main(["compare", str(pendulum), str(cartpole)]) == 0
    row = capsys.readouterr().out.splitlines()[3]
    assert row.split()[-1] == "env=CartPole-v1", row
    assert main(["compare", str(cartpole), str(pendulum)]) == 0
    row = capsys.readouterr().out.splitlines()[3]
    assert row.split()[-2:] == ["env=Pendulum-v1", "log_std=state"], row


def test_compare_groups_and_plots(runs, capsys):
    a, b, c = runs
    assert main(["compare", str(a), str(b), str(c), "--group-by", "lr", "--plot", "--smooth", "0"]) == 0
    out = capsys.readouterr().out
    group_rows = [line for line in out.splitlines() if line.startswith("lr=")]
    # lr=0.001: runs b and c, finals 18 and 19: mean 18.5, its t interval 18.5 +- 6.353 over
    # n = 2; one run has no interval.
    assert group_rows[0].split() == ["lr=0.0003", "1", "12", "-", "n=1", "22"]
    assert group_rows[1].split() == ["lr=0.001", "2", "18.5", "[12.15,", "24.85]", "95%", "t,", "n=2", "33.5"]
    assert "episode_return" in out and "env steps" in out  # the plot's title and axis
    assert "mean per group, 95% t band (.)" in out
    header = next(line for line in out.splitlines() if line.startswith("group"))
    assert header.split()[:9] == ["group", "runs", "mean", "of", "last", "10", "episode_return", "(mean)", "interval"]


def test_compare_iqm_of_a_few_runs_calls_its_interval_a_range(runs, capsys):
    a, b, c = runs
    assert main(["compare", str(a), str(b), str(c), "--group-by", "lr", "--statistic", "iqm"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("lr=0.001"))
    assert row.split()[3:7] == ["[18,", "19]", "range,", "n=2"]


def test_compare_plot_in_plain_text_draws_group_bands_sparsely(runs, capsys, monkeypatch):
    # Without colour a band's edges are a few dots: the groups' curves, each in its own
    # character, stay in sight.
    monkeypatch.setenv("COLUMNS", "80")
    a, b, c = runs
    assert main(["compare", str(a), str(b), str(c), "--group-by", "lr", "--plot", "--smooth", "0"]) == 0
    out = capsys.readouterr().out
    body = out[out.index("┌"):]
    legend = re.findall(r"[│┤] (\S)\1 lr=", body)
    assert len(legend) == 2 and legend[0] != legend[1]
    curves = [body.count(mark) - 2 for mark in legend]  # less the legend's two
    assert min(curves) > 20 and body.count(".") <= 2 * 2 * (100 // 8 + 1)  # two edges of two groups


def test_compare_plot_is_plain_text_with_readable_steps(tmp_path, capsys, monkeypatch):
    # Written to a file or a pipe (capsys is neither a terminal), the plot holds no escape
    # codes, and its env steps axis reads as the dashboard's: 0.2M ... 1.0M, not 1024000.
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    a = make_run(tmp_path / "a", 4000)  # 512,000 env steps
    b = make_run(tmp_path / "b", 8000, config={"seed": 1})  # 1,024,000
    assert main(["compare", str(a), str(b), "--plot"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not [line for line in lines if "\x1b" in line]
    axis = next(i for i, line in enumerate(lines) if line.strip() == "env steps")
    labels = lines[axis - 1].split()
    assert "1.0M" in labels and "0.4M" in labels, labels
    assert all(re.fullmatch(r"\d+(\.\d+)?[kM]|0", label) for label in labels), labels


def test_compare_plot_in_plain_text_tells_the_runs_apart(tmp_path, capsys, monkeypatch):
    # Without colour each curve has its own character, and the legend pairs it with the run.
    monkeypatch.setenv("COLUMNS", "80")
    a = make_run(tmp_path / "a", 40)
    b = make_run(tmp_path / "b", 40, config={"seed": 1}, ret=lambda u: 100.0 - u)
    assert main(["compare", str(a), str(b), "--plot", "--smooth", "0"]) == 0
    out = capsys.readouterr().out
    legend = dict((name, mark) for mark, name in re.findall(r"[│┤] (\S)\1 ([ab]) ", out))  # "│ ** a"
    assert legend.keys() == {"a", "b"} and legend["a"] != legend["b"], out
    marks = list(legend.values())
    body = out[out.index("┌"):]
    assert all(body.count(mark) > 10 for mark in marks)  # both curves are drawn


def test_compare_plot_colour_only_on_a_terminal_without_no_color(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert wants_colour(Terminal()) and not wants_colour(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not wants_colour(Terminal())


def test_compare_writes_wall_time_as_the_runs_view_does(tmp_path, capsys):
    # 11 updates of 0.25 s: 2.75 s, which `rltui runs` (and the launch summary) write 0:02.
    run = make_run(tmp_path / "a", 11)
    assert main(["compare", str(run)]) == 0
    row = capsys.readouterr().out.splitlines()[2].split()
    shown = fmt_duration(row_of(load_run(run), RunState("finished", "")).wall_time)
    assert row[-2] == shown == "0:02"


def test_compare_marks_a_damaged_run_and_shows_the_rest(runs, capsys):
    a, b, _ = runs
    with open(b / "metrics.jsonl", "r+b") as f:
        f.seek(40)
        f.write(b"\xff\xfe###")
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("b "))
    assert "[damaged: 1 damaged line in metrics.jsonl]" in row


def test_compare_refuses_a_path_that_is_not_a_run(runs, tmp_path, capsys):
    assert main(["compare", str(runs[0]), str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"rltui: error: RUN_DIR: {tmp_path / 'missing'} is not a directory"]
    assert main(["compare", str(runs[0]), "--metric", "nothing"]) == 2
    assert main(["compare", str(runs[0]), "--smooth", "1"]) == 2


def test_compare_reads_returns_and_steps_beyond_float_range(tmp_path, capsys):
    # JSON holds integers of any length: a return of 400 digits is more than a float holds,
    # and a record whose env steps are infinite has no place on the steps axis.
    run = make_run(tmp_path / "big", 12)
    with open(run / "metrics.jsonl", "a") as f:
        f.write(f'{{"update": 13, "env_steps": {13 * STEPS}, "wall_time": 3.25, "episode_return": 1{"0" * 400}}}\n')
        f.write('{"update": 14, "env_steps": Infinity, "episode_return": 1.0}\n')
    other = make_run(tmp_path / "other", 12, config={"seed": 1})
    assert main(["compare", str(run), str(other), "--threshold", "15", "--group-by", "seed", "--plot"]) == 0
    captured = capsys.readouterr()
    row = next(line for line in captured.out.splitlines() if line.startswith("big "))
    # the infinite return is no value; the record without finite steps is a damaged line
    assert row.split()[3:8] == ["1,664", "12", "22", "1,024", "0:03"]
    assert "[damaged: 1 damaged line in metrics.jsonl]" in row and captured.err == ""


def test_compare_and_group_by_of_returns_at_float_range_warn_of_nothing(tmp_path, capsys):
    # Sums of returns near the largest float overflow: the figures they make are shown as
    # missing, with no numpy RuntimeWarning lines, and the plot leaves their points out.
    huge = make_run(tmp_path / "huge", 12, ret=lambda u: 1.7e308)
    mixed = make_run(tmp_path / "mixed", 12, ret=lambda u: 1.7e308 * (-1) ** u)
    plain = make_run(tmp_path / "plain", 12, config={"seed": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for statistic in ("mean", "iqm"):
            assert main(["compare", str(huge), str(mixed), str(plain), "--group-by", "seed", "--plot",
                         "--statistic", statistic]) == 0
            out = capsys.readouterr().out
            rows = {line.split()[0]: line.split() for line in out.splitlines() if line.split()}
            assert rows["huge"][4:6] == ["-", "1.7e+308"]  # the mean of its last 10 overflows
            assert rows["seed=1"][1:5] == ["1", "12", "-", "n=1"]  # one run: no interval
        assert main(["compare", str(huge), str(plain), "--plot"]) == 0
    plot = capsys.readouterr().out.split("episode_return (EMA")[1]
    assert "plain" in plot and "huge" not in plot  # no point of it can be drawn


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_compare_refuses_a_threshold_that_is_not_a_finite_number(runs, capsys, value):
    assert main(["compare", str(runs[0]), f"--threshold={value}"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"rltui: error: --threshold: expected a finite number, got {value}"]


def test_a_huge_run_loads_quickly(tmp_path):
    run = make_run(tmp_path / "huge", 100_000)
    started = time.perf_counter()
    data = read_run(run)
    steps, values = data.column("episode_return")
    seconds = time.perf_counter() - started
    assert len(data.records) == 100_000 and steps[-1] == 100_000 * STEPS
    assert seconds < 10  # a generous bound for a shared CI machine; docs/loggers.md states the figure
    assert np.isfinite(values).all()


def test_config_differences_read_as_set_items():
    from rltui.runfiles.comparison import config_differences

    base = {"lr": 1e-3, "anneal_lr": True, "hidden_sizes": [64, 64]}
    other = {"lr": 1e-3, "anneal_lr": False, "hidden_sizes": [32], "sweep": {"lr": "loguniform(1e-5,1e-2)"}}
    assert config_differences(base, other) == (
        "anneal_lr=false", "hidden_sizes=[32]", "sweep.lr=loguniform(1e-5,1e-2)")


def test_a_swept_keys_plain_value_is_not_listed_beside_a_population():
    # No member trains at the plain lr: the sweep entry says what they train at.
    from rltui.runfiles.comparison import read_differences

    single = {"algo": "ppo", "env": "CartPole-v1", "lr": 1e-3, "ent_coef": 0.01}
    population = {"algo": "ppo", "env": "CartPole-v1", "lr": 2.5e-4, "ent_coef": 0.0, "sweep": {"lr": [1e-3, 3e-3]}}
    assert read_differences(single, population) == ("ent_coef=0", "sweep.lr=[0.001,0.003]")
    assert read_differences(population, single) == ("ent_coef=0.01", "lr=0.001", "sweep.lr=(unset)")


def test_the_runs_view_filter_does_not_match_a_swept_keys_plain_value(tmp_path):
    from rltui.runfiles.discovery import RunState
    from rltui.runs_view.rows import RunRow, matches

    row = RunRow(path=tmp_path, name="pop", env="CartPole-v1", algo="ppo", state=RunState("finished", ""), env_steps=0,
                 updates=0, latest=0.0, best=0.0, wall_time=0.0, started=None, problems=())
    population = {"algo": "ppo", "lr": 0.001, "ent_coef": 0.01, "sweep": {"lr": [3e-4, 1e-2]}}
    assert not matches(row, population, "lr=0.001")  # none of its members trains at it
    assert matches(row, population, "ent_coef=0.01") and matches(row, {**population, "sweep": {}}, "lr=0.001")


def test_grouping_offers_only_keys_every_selected_run_reads():
    import types

    from rltui.runfiles.comparison import show_value
    from rltui.runs_view.curves import group_keys

    dqn = types.SimpleNamespace(config={"algo": "dqn", "seed": 0, "lr": 1e-3, "double_q": False})
    pqn = types.SimpleNamespace(config={"algo": "pqn", "seed": 1, "lr": 1e-4, "q_lambda": 0.65})
    assert group_keys([dqn, pqn]) == ["seed", "algo", "lr"]  # not double_q nor q_lambda: one of them reads it
    assert show_value(None) == "(unset)"  # a group of runs without the key, as --group-by names it


def test_the_runs_view_lists_the_differences_compare_lists():
    # A PQN run's config.toml leaves out the replay keys: beside a DQN run they are not
    # "(unset)", they are keys it does not read.
    from rltui.runs_view.rows import differences

    dqn = {"algo": "dqn", "env": "CartPole-v1", "lr": 1e-3, "batch_size": 128, "buffer_size": 10_000}
    pqn = {"algo": "pqn", "env": "CartPole-v1", "lr": 1e-4, "q_lambda": 0.65}
    assert differences(dqn, pqn) == "algo=pqn lr=0.0001 q_lambda=0.65"
    assert differences(pqn, dqn) == "algo=dqn batch_size=128 buffer_size=10000 lr=0.001"
