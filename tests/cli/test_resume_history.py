"""A resume's changes are part of the run's story: the configuration the run started with
is kept (config.original.toml), a changed live hyperparameter is an edit (an hparams event,
counted by `rltui info`), and every other changed key is a config event."""

from __future__ import annotations

import tomllib

import pytest
from test_resume_cli import STEPS, TINY, assert_ok, read_jsonl, rltui


def test_a_resume_that_changes_lr_is_recorded_and_the_original_config_kept(tmp_path):
    run_dir = tmp_path / "run"
    first = rltui(["launch", "--no-ui", "--run-dir", run_dir, *TINY, "--set", f"total_timesteps={4 * STEPS}"],
                  tmp_path, timeout=300)
    assert_ok(first)
    started_with = (run_dir / "config.toml").read_text()
    resumed = rltui(["launch", "--no-ui", "--resume", run_dir, "--set", "lr=1e-3",
                     "--set", f"total_timesteps={6 * STEPS}"], tmp_path, timeout=300)
    assert_ok(resumed)

    # The configuration the run started with is kept; config.toml is the one in effect now.
    assert (run_dir / "config.original.toml").read_text() == started_with
    assert tomllib.loads(started_with)["lr"] == pytest.approx(2.5e-4)
    now = tomllib.loads((run_dir / "config.toml").read_text())
    assert now["lr"] == pytest.approx(1e-3) and now["total_timesteps"] == 6 * STEPS

    events = read_jsonl(run_dir / "events.jsonl")
    (edit,) = [e for e in events if e["kind"] == "hparams"]
    assert edit["update"] == 4 and edit["data"]["changes"] == {"lr": pytest.approx(1e-3)}
    assert edit["data"]["previous"] == {"lr": pytest.approx(2.5e-4)}
    after = events[[e["kind"] for e in events].index("resumed"):]
    # In the order they happen, on the run's clock: the resume, the compile, its changes, then training.
    assert [e["kind"] for e in after[:4]] == ["resumed", "compiled", "config", "hparams"], after
    assert [e["wall_time"] for e in after[:4]] == sorted(e["wall_time"] for e in after[:4])
    (config,) = [e for e in events if e["kind"] == "config"]
    assert config["data"]["changes"] == {"total_timesteps": 6 * STEPS}
    assert config["data"]["previous"] == {"total_timesteps": 4 * STEPS}
    # The first update after the resume trains with the new lr already.
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["lr"] for r in records if r["update"] > 4] == [pytest.approx(1e-3)] * 2

    info = rltui(["info", run_dir], tmp_path, timeout=120)
    assert_ok(info)
    assert "lr" in info.stdout and "update 4" in info.stdout
    edits_line = [line for line in info.stdout.splitlines() if line.startswith("edits")]
    assert edits_line and edits_line[0].split()[-1] == "1", info.stdout

    # A second resume keeps the original as it was and records its own changes.
    again = rltui(["launch", "--no-ui", "--resume", run_dir, "--set", "lr=5e-4",
                   "--set", f"total_timesteps={7 * STEPS}"], tmp_path, timeout=300)
    assert_ok(again)
    assert (run_dir / "config.original.toml").read_text() == started_with
    edits = [e for e in read_jsonl(run_dir / "events.jsonl") if e["kind"] == "hparams"]
    assert [e["data"]["changes"]["lr"] for e in edits] == [pytest.approx(1e-3), pytest.approx(5e-4)]


def test_a_population_resume_says_when_a_set_key_replaces_the_members_own_values():
    from rltui.session.resume import PreparedResume, ResumeChanges

    def members(*lrs):
        return {"population": {"members": [{"values": {"lr": lr, "gamma": 0.99}} for lr in lrs]}}

    changes = ResumeChanges(live={"lr": 1e-3, "gamma": 0.95}, hparams_before=None, other={}, update=4)
    prepared = PreparedResume(run_dir=None, branched=None, changes=changes)
    # lr differed between the members, gamma did not: only lr's replacement is worth a word.
    assert prepared.notices(members(1e-4, 3e-3, 1e-4)) == [
        "lr = 0.001 now applies to all 3 members, in place of their own values (0.0001, 0.003); the dashboard's "
        "leaderboard edits one member's"]
    assert prepared.notices(members(1e-4, 1e-4)) == []
    assert prepared.notices({}) == []  # a single run


def test_a_population_resume_that_sets_the_base_value_again_still_sets_every_member():
    # lr is swept: the checkpoint's base lr is the default, each member trains with its own.
    # `--set lr=<the default>` is then a change for every member, not nothing.
    from rltui.config.build import build_config
    from rltui.session.resume import resume_changes

    config = build_config({}, {})
    saved = {"hparams": config.dynamic_hparams().as_floats()}
    population = {**saved, "population": {"members": [{"values": {"lr": 1e-4}}, {"values": {"lr": 1e-3}}]}}
    assert resume_changes(config, population).live == {}  # not given: the members keep theirs
    assert resume_changes(config, population, given={"lr"}).live == {"lr": pytest.approx(config.lr)}
    assert resume_changes(config, saved, given={"lr"}).live == {}  # one configuration: nothing to change
