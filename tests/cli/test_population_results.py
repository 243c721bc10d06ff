"""A population run read back: `rltui info` (a real checkpoint of a tiny population),
`rltui export` (per-member CSV columns and TensorBoard tags), `rltui compare` (a population
is compared by its best member) and the runs view (a population row, one line per member),
on run directories written by hand as the session writes them."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

import pytest

from rltui.cli import main
from rltui.runfiles.discovery import state_of
from rltui.runfiles.loading import load_run
from rltui.runfiles.reader import read_run
from rltui.runs_view.curves import metric_choices, overlay
from rltui.runs_view.rows import matches, row_of

from test_cli import rltui

STEPS = 128
UPDATES = 12
SWEEP = [1e-4, 1e-3, 3e-3]


def member_return(member: int, update: int) -> float | None:
    """Member 2 learns fastest; member 0 is frozen after update 8 (null from then on)."""
    if member == 0 and update > 8:
        return None
    return 10.0 * update * (member + 1)


def make_population_run(path: Path, *, seeds: int = 1) -> Path:
    import tomli_w

    path.mkdir(parents=True)
    config = {"env": "CartPole-v1", "algo": "ppo", "lr": 2.5e-4, "num_envs": 4, "num_steps": 32, "seed": 0,
              "num_seeds": seeds, "pbt_every_updates": 4, "pbt_fraction": 0.34, "sweep": {"lr": SWEEP}}
    (path / "config.toml").write_text(tomli_w.dumps(config))
    lines = []
    for u in range(1, UPDATES + 1):
        members = [member_return(m, u) for m in range(3)]
        finite = [v for v in members if v is not None]
        agents = [None if v is None else v + s for v in members for s in range(seeds)]
        rec = {"update": u, "env_steps": u * STEPS, "wall_time": 0.25 * u, "sps": 512.0,
               "episode_return": sum(finite) / len(finite), "policy_loss": -0.001 * u,
               "seeds": {"episode_return": agents, "policy_loss": [-0.001 * u] * (3 * seeds)},
               "members": {"episode_return": members,
                           "policy_loss": [None if v is None else -0.001 * u for v in members]}}
        lines.append(json.dumps(rec) + "\n")
    (path / "metrics.jsonl").write_text("".join(lines))

    def table(lrs, parents, states=("training",) * 3):
        return [{"member": m, "values": {"lr": lr, "gamma": 0.99}, "state": states[m], "parent": parents[m]}
                for m, lr in enumerate(lrs)]

    changes = [
        {"update": 0, "wall_time": 0.1, "message": "population of 3 members x 1 seed", "action": "start",
         "members": None, "replacements": [], "table": table(SWEEP, [None] * 3)},
        {"update": 4, "wall_time": 1.0, "message": "member 0 <- member 2 (lr=0.0024)", "action": "pbt",
         "members": None, "replacements": [{"target": 0, "source": 2, "values": {"lr": 0.0024},
                                            "previous": {"lr": 1e-4}}],
         "table": table([0.0024, 1e-3, 3e-3], [2, None, None])},
        {"update": 8, "wall_time": 2.0, "message": "froze member 0", "action": "freeze", "members": [0],
         "replacements": [], "table": table([0.0024, 1e-3, 3e-3], [2, None, None], ("frozen", "training", "training"))},
    ]
    (path / "population.jsonl").write_text("".join(json.dumps(c) + "\n" for c in changes))
    events = [{"kind": "compiled", "update": 0, "wall_time": 0.1, "message": "compiled in 0.1 s"}]
    events += [{"kind": "population", "update": c["update"], "wall_time": c["wall_time"], "message": c["message"],
                "data": {k: v for k, v in c.items() if k not in ("update", "wall_time", "message")}} for c in changes]
    events.append({"kind": "finished", "update": UPDATES, "wall_time": 3.0, "message": f"finished {UPDATES} updates"})
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


# --- export ---------------------------------------------------------------------------------


def test_csv_has_a_column_per_member_and_a_frozen_member_is_blank(tmp_path, capsys):
    run = make_population_run(tmp_path / "pop")
    assert main(["export", str(run), "--csv", "-"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == UPDATES
    header = list(rows[0])
    assert header[:2] == ["update", "env_steps"]
    for m in range(3):
        assert f"members/{m}/episode_return" in header and f"members/{m}/policy_loss" in header
    # one seed per member: the agents' series would repeat the members', so they are left out
    assert not [c for c in header if "/seed_" in c]
    assert header.index("members/0/episode_return") > header.index("policy_loss")  # members after the means
    assert float(rows[4]["members/2/episode_return"]) == pytest.approx(150.0)
    assert rows[9]["members/0/episode_return"] == ""  # frozen: no value
    assert float(rows[9]["members/1/episode_return"]) == pytest.approx(200.0)


def test_csv_of_a_population_with_several_seeds_names_each_members_seeds(tmp_path, capsys):
    run = make_population_run(tmp_path / "pop", seeds=2)
    assert main(["export", str(run), "--csv", "-"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    # agent 5 is member 2's seed 1
    assert float(rows[0]["members/2/episode_return/seed_1"]) == pytest.approx(31.0)
    assert float(rows[0]["members/0/episode_return/seed_0"]) == pytest.approx(10.0)
    assert "episode_return/seed_5" not in rows[0]
    assert read_run(run).column("members/2/episode_return/seed_1")[1][:2] == pytest.approx([31.0, 61.0])


def test_tensorboard_export_makes_each_member_a_run_and_keeps_population_events(tmp_path, capsys):
    pytest.importorskip("tensorboardX", reason="the tensorboard extra is not installed")
    from rltui.loggers.tensorboard import read_events

    run = make_population_run(tmp_path / "pop")
    assert main(["export", str(run), "--tensorboard", str(tmp_path / "tb")]) == 0
    capsys.readouterr()

    def read(directory: Path) -> tuple[dict[str, list[tuple[int, float]]], list[tuple[int, str]]]:
        scalars: dict[str, list[tuple[int, float]]] = {}
        texts = []
        for event in read_events(directory):
            for value in event.summary.value:
                if value.tag == "events/text_summary":
                    texts.append((event.step, b"".join(value.tensor.string_val).decode()))
                elif value.HasField("simple_value"):
                    scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
        return scalars, texts

    population, texts = read(tmp_path / "tb")
    members = [read(tmp_path / "tb" / f"member_{m}")[0] for m in range(3)]
    assert members[2]["train/episode_return"][:2] == [(STEPS, pytest.approx(30.0)), (2 * STEPS, pytest.approx(60.0))]
    assert [step for step, _ in members[0]["train/episode_return"]] == [u * STEPS for u in range(1, 9)]
    assert "train/episode_return" in population and not [tag for tag in population if "members/" in tag]
    assert (4 * STEPS, "**population pbt**: member 0 <- member 2 (lr=0.0024)") in texts
    assert (8 * STEPS, "**population freeze**: froze member 0") in texts


# --- compare ----------------------------------------------------------------------------------


def test_compare_takes_a_populations_best_member(tmp_path, capsys):
    from test_export import make_run

    pop = make_population_run(tmp_path / "pop")
    single = make_run(tmp_path / "single", UPDATES)
    assert main(["compare", str(single), str(pop), "--threshold", "300"]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith("pop "))
    # member 2: its last 10 values are 30 x (3..12), mean 225; best 360; reaches 300 at update 10
    cells = line.split()
    assert "225" in cells and "360" in cells and f"{10 * STEPS:,}" in cells, line
    assert "[population 3x1, best member 2 (lr=0.003)]" in line


# --- the runs view --------------------------------------------------------------------------


def test_runs_view_row_and_overlay_of_a_population(tmp_path):
    from test_export import make_run

    pop = load_run(make_population_run(tmp_path / "pop"))
    row = row_of(pop, state_of(pop.events, live=False))
    assert row.algo == "ppo, population 3x1" and row.population == "3x1"
    assert row.state.name == "finished"  # a member's freeze is not the run's end
    assert row.best_member == 2 and row.latest == pytest.approx(360.0) and row.best == pytest.approx(360.0)
    assert matches(row, pop.config, "population")

    lines = overlay([pop], "episode_return", smoothing=0.0).lines
    assert [line.label for line in lines] == ["pop m0", "pop m1", "pop m2"]
    assert len(lines[0].xs) == 8 and lines[2].ys[-1] == pytest.approx(360.0)
    choices = metric_choices([pop])
    assert choices[0] == "episode_return" and "members/1/episode_return" in choices
    assert not [c for c in choices if "/seed_" in c]

    single = load_run(make_run(tmp_path / "single", 4))
    plain = row_of(single, state_of(single.events, live=False))
    assert plain.algo == "ppo" and plain.population == "" and plain.best_member is None
    assert [line.label for line in overlay([single], "episode_return").lines] == ["single"]


def test_compare_groups_a_population_by_its_best_members_value(tmp_path, capsys):
    # The population's best member (2) trains at lr 0.003, not at the config's base 0.00025:
    # grouped by lr, it joins a single run at 0.003, and no group is labelled 0.00025.
    from test_export import make_run

    population = make_population_run(tmp_path / "pop")
    single = make_run(tmp_path / "single", UPDATES, config={"lr": 0.003})
    assert main(["compare", str(population), str(single), "--group-by", "lr", "--plot"]) == 0
    out = capsys.readouterr().out
    groups = [line.split() for line in out.splitlines() if line.startswith("lr=")]
    assert [g[:2] for g in groups] == [["lr=0.003", "2"]], out
    assert "lr=0.003 (2)" in out  # the plot's band
    # The runs view groups them alike, and draws the population's best member in the band.
    grouped = overlay([load_run(population), load_run(single)], "episode_return", group="lr", smoothing=0)
    (band,) = grouped.bands
    assert band.label == "lr=0.003 (2)"
    # member 2's returns (30 an update) reach past what the members' mean (20 an update) could
    assert max(band.high) > 20.0 * UPDATES


# --- info: a real checkpoint of a tiny population -------------------------------------------

TINY = ["--set", "num_envs=4", "--set", "num_steps=32", "--set", "num_minibatches=2", "--set", "update_epochs=1",
        "--set", "hidden_sizes=[16]", "--set", "total_timesteps=1024", "--set", "pbt_every_updates=4",
        "--set", "pbt_fraction=0.5"]


@pytest.fixture(scope="module")
def population_run(tmp_path_factory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("population")
    result = rltui(["launch", "--no-ui", "--run-dir", work / "run", "--sweep", "lr=[1e-3,3e-3]", *TINY], work,
                   timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return work, work / "run"


def test_info_shows_each_members_values_state_parent_and_returns(population_run):
    work, run = population_run
    result = rltui(["info", run], work, timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    out = result.stdout
    assert "population   2 members x 1 seed" in out.splitlines()
    assert "  sweep      lr [0.001, 0.003]" in out
    assert "every_updates 4, fraction 0.5" in out
    assert re.search(r"^  lr +per member, below$", out, re.M)  # the base lr would mislead
    header = next(line for line in out.splitlines() if line.strip().startswith("member "))
    assert header.split() == ["member", "lr", "state", "parent", "latest", "best"]
    rows = out.splitlines()[out.splitlines().index(header) + 1:][:2]
    assert [r.split()[0] for r in rows] == ["0", "1"]
    starred = [r.split()[1] == "*" for r in rows]
    assert all(" finished " in r for r in rows), rows

    record = json.loads(rltui(["info", run, "--json"], work, timeout=120).stdout)
    population = record["population"]
    assert population["num_members"] == 2 and population["num_seeds"] == 1
    assert population["swept"] == ["lr"] and population["keys"][0] == "lr"
    assert population["sweep"] == {"lr": [1e-3, 3e-3]} and population["pbt"]["pbt_every_updates"] == 4
    members = population["members"]
    assert [m["member"] for m in members] == [0, 1]
    for m in members:
        # the run's final checkpoint: a member that trained to the end is finished, not "training"
        assert m["state"] == "finished" and m["values"]["gamma"] == pytest.approx(0.99)
        assert "anneal_updates" not in m["values"]  # internal, not a config key
        assert isinstance(m["latest_return"], float) and m["best_return"] >= m["latest_return"] - 1e-6
    # the lineage the checkpoint keeps is population.jsonl's last table (PBT ran at updates 4 and 8)
    table = [json.loads(line) for line in (run / "population.jsonl").read_text().splitlines()][-1]["table"]
    assert [m["parent"] for m in members] == [row["parent"] for row in table]
    assert [m["values"]["lr"] for m in members] == pytest.approx([row["values"]["lr"] for row in table], rel=1e-6)
    assert any(row["parent"] is not None for row in table)
    latest = [m["latest_return"] for m in members]
    assert population["best_member"] == latest.index(max(latest)) and starred[population["best_member"]]
    assert not math.isnan(max(latest))


def test_eval_reports_every_member_of_a_population(population_run):
    work, run = population_run
    result = rltui(["eval", run, "--episodes", "4"], work, timeout=300)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    members = [line for line in lines if line.strip().startswith("member ")]
    assert len(members) == 2
    for m, line in enumerate(members):
        assert line.strip().startswith(f"member {m} (lr=") and "mean " in line
    assert lines[-1].startswith("mean ")  # every agent together

    # --member reports that member alone, on the same episodes: its line, then its returns.
    one = rltui(["eval", run, "--episodes", "4", "--member", "1"], work, timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    one_lines = one.stdout.splitlines()
    assert [line for line in one_lines if line.strip().startswith("member ")] == [members[1]]
    assert one_lines[-1] == "mean " + members[1].split("): mean ", 1)[1]


def test_eval_refuses_a_member_the_population_does_not_have(population_run):
    work, run = population_run
    result = rltui(["eval", run, "--member", "2"], work, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == "rltui: error: --member 2: this run trained 2 members (0 to 1)"


def test_info_of_a_single_run_has_no_population(tmp_path):
    from rltui.commands.info import population_record

    assert population_record(None, {}, set()) is None


def test_info_counts_a_populations_seeds_in_words():
    from rltui.commands.info import population_record, render_population

    saved = {"members": [{"values": {"lr": 1e-3}}, {"values": {"lr": 1e-2}}], "swept": ["lr"], "num_seeds": 1}
    assert render_population(population_record(saved, {}, {"lr"}))[0] == "population   2 members x 1 seed"
    saved["num_seeds"] = 3
    assert render_population(population_record(saved, {}, {"lr"}))[0] == "population   2 members x 3 seeds"


@pytest.mark.parametrize("update,reason,state", [(8, "final", "finished"), (5, "final", "stopped"),
                                                 (5, "periodic", "training")])
def test_info_says_whether_a_populations_run_finished_or_was_stopped(update, reason, state):
    # total_timesteps 1024 at 128 env steps an update: 8 updates. Stopped at update 5, the
    # final checkpoint's training members are stopped, not finished; a periodic one's train on.
    from rltui.commands.info import how_it_ended, population_record

    metadata = {"reason": reason, "update": update, "env_steps": 128 * update}
    config = {"total_timesteps": 1024}
    saved = {"members": [{"values": {"lr": 1e-3}}, {"values": {"lr": 3e-3}, "state": "frozen"}], "num_seeds": 1}
    record = population_record(saved, config, {"lr"}, ended=how_it_ended(metadata, config))
    assert [m["state"] for m in record["members"]] == [state, "frozen"]
