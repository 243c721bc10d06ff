"""A population in the session: per-member records, freeze and clone commands, PBT with its
lineage in population.jsonl, a diverging member frozen while the others go on, and resume."""

from __future__ import annotations

import json
import math

import jax
import numpy as np
import pytest

from rltui.runfiles.checkpoints import CheckpointStore
from rltui.session import TrainingSession
from rltui.session.backend import JaxBackend
from rltui.session.checkpoints import CheckpointPolicy
from rltui.session.commands import CloneMember, FreezeMembers, Rollback, SaveCheckpoint, SetHParams
from rltui.session.controller import SessionListener
from rltui.session.events import SessionState
from rltui.session.population import MemberState, PBTPolicy, Population
from rltui.session.recorder import RunRecorder, truncate_metrics, truncate_population
from trainers.hparams import DynamicHParams, StaticConfig

from helpers import TINY

LRS = (1e-4, 1e-3, 1e-2)
STATIC = StaticConfig(**TINY, num_members=len(LRS))
BASE = DynamicHParams.create(anneal_updates=100)


class Events(SessionListener):
    def __init__(self):
        self.events, self.snapshots = [], []

    def on_event(self, event):
        self.events.append(event)

    def on_metrics(self, snapshot):
        self.snapshots.append(snapshot)

    def kinds(self, kind):
        return [e for e in self.events if e.kind == kind]


def run_population(tmp_path, total, *, commands=(), pbt=None, resume=None, lrs=LRS, base=BASE,
                   policy=CheckpointPolicy(), keep=3):
    population = Population(base, [{"lr": lr} for lr in lrs], num_seeds=1, pbt=pbt or PBTPolicy())
    backend = JaxBackend(STATIC, 0, jax.local_devices()[:1])
    session = TrainingSession(backend, base, total, chunk_seconds=0.01, population=population, resume=resume,
                              checkpoints=CheckpointStore.for_run(tmp_path, keep=keep), checkpoint_policy=policy)
    events, recorder = Events(), RunRecorder(tmp_path)
    session.add_listener(recorder)
    session.add_listener(events)
    for command in commands:
        session.submit(command)
    session.start()
    assert session.join(240)
    recorder.close()
    assert session.state is SessionState.FINISHED, session.error
    return session, events


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_member_is_recorded_and_the_population_file_holds_the_table(tmp_path):
    session, events = run_population(tmp_path, 4)
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["update"] for r in records] == [1, 2, 3, 4]
    assert all(len(r["members"]["policy_loss"]) == 3 for r in records)
    assert [row["lr"] for row in (r["members"] for r in records[:1])][0][0] == pytest.approx(1e-4 * (1 - 0 / 100))
    lines = read_jsonl(tmp_path / "population.jsonl")
    assert lines[0]["action"] == "start"
    assert [m["values"]["lr"] for m in lines[0]["table"]] == pytest.approx(LRS)
    view = events.snapshots[-1].population
    assert [m.state for m in view.members] == [MemberState.TRAINING] * 3
    assert view.keys == ("lr",)


def test_freeze_edit_and_clone_reach_the_chosen_members_only(tmp_path):
    commands = [FreezeMembers((1,)), SetHParams({"ent_coef": 0.05}, members=(2,)),
                CloneMember(0, (2,), factor=2.0)]
    session, events = run_population(tmp_path, 3, commands=commands)
    view = events.snapshots[-1].population
    assert view.members[1].state is MemberState.FROZEN
    assert view.members[2].parent == 0
    population = session.population
    assert population.values(2)["lr"] == pytest.approx(2e-4)  # member 0's lr, doubled
    assert population.values(2)["ent_coef"] == pytest.approx(0.01)  # the clone took member 0's values
    assert population.values(0)["ent_coef"] == pytest.approx(0.01)
    # The frozen member never updated: its counter stayed at 0 while the others reached 3.
    assert np.asarray(session.backend.train_state.update_idx)[0].tolist() == [3, 0, 3]
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert all(r["members"]["policy_loss"][1] is None for r in records)
    actions = [line["action"] for line in read_jsonl(tmp_path / "population.jsonl")]
    assert actions == ["start", "freeze", "edit", "clone"]
    assert read_jsonl(tmp_path / "population.jsonl")[0]["message"] == "population of 3 members x 1 seed"
    # the edit is in events.jsonl twice (hparams, and the population's record); the dashboard's log shows one
    from rltui.session.events import repeats_another_event

    edits = [e for e in events.events if "ent_coef" in e.message]
    assert [e.kind for e in edits] == ["hparams", "population"]
    assert [e.message for e in edits if not repeats_another_event(e)] == ["set ent_coef -> 0.05 for member 2"]


def test_pbt_replaces_the_worst_with_perturbed_clones_and_records_the_lineage(tmp_path):
    pbt = PBTPolicy(every_updates=4, fraction=0.34, perturb=(0.5, 2.0), seed=3)
    session, events = run_population(tmp_path, 12, pbt=pbt, lrs=(1e-5, 1e-3, 3e-2))
    lines = read_jsonl(tmp_path / "population.jsonl")
    steps = [line for line in lines if line["action"] == "pbt"]
    # Members start alike (same seeds), so an early step may find nothing better to exploit;
    # such a step is recorded too, as one that replaced nothing.
    assert [s["update"] for s in steps] and all(s["update"] % 4 == 0 for s in steps)
    skipped = [line for line in lines if line["action"] == "pbt_skipped"]
    assert all(s["replacements"] == [] for s in skipped)
    assert {4, 8} <= {s["update"] for s in steps + skipped}
    for step in steps:
        (change,) = step["replacements"]
        assert change["target"] != change["source"]
        table = {m["member"]: m for m in step["table"]}
        assert table[change["target"]]["parent"] == change["source"]
        assert table[change["target"]]["values"]["lr"] == pytest.approx(change["values"]["lr"])
        ratio = change["values"]["lr"] / table[change["source"]]["values"]["lr"]
        assert min(abs(ratio - 0.5), abs(ratio - 2.0)) < 1e-5


def test_a_pbt_step_with_nothing_better_to_exploit_is_recorded(tmp_path):
    # Alike members (same seeds, same lr) score alike: each step replaces nothing, and says so.
    pbt = PBTPolicy(every_updates=1, fraction=0.34)
    session, events = run_population(tmp_path, 2, pbt=pbt, lrs=(1e-3, 1e-3, 1e-3))
    skipped = [line for line in read_jsonl(tmp_path / "population.jsonl") if line["action"] == "pbt_skipped"]
    assert [s["update"] for s in skipped] == [1, 2] and all(s["replacements"] == [] for s in skipped)
    assert "nothing replaced" in skipped[0]["message"]
    assert not [line for line in read_jsonl(tmp_path / "population.jsonl") if line["action"] == "pbt"]


def test_a_diverging_member_is_frozen_and_reported_while_the_others_go_on(tmp_path):
    session, events = run_population(tmp_path, 4, lrs=(1e-4, 3e-4, 1e-3),
                                     commands=[SetHParams({"lr": 1e30}, members=(1,))])
    (diverged,) = [e for e in events.kinds("population") if e.data["action"] == "diverged"]
    assert diverged.data["members"] == [1]
    assert "member 1" in diverged.message
    assert session.population.state(1) is MemberState.DIVERGED
    state = session.backend.train_state
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(state.params))
    assert np.asarray(state.update_idx)[0].tolist() == [4, 0, 4]
    assert not session.nonfinite  # the run did not pause
    assert (tmp_path / "checkpoints").exists() and list((tmp_path / "checkpoints").glob("checkpoint-*.msgpack"))


def test_a_population_resumes_exactly_pbt_and_all(tmp_path):
    """Bit-exact on the same machine (the same compiled program), PBT steps included."""
    pbt = PBTPolicy(every_updates=2, fraction=0.34, perturb=(0.5, 2.0), seed=1)
    whole = tmp_path / "whole"
    whole.mkdir()
    run_population(whole, 4, pbt=pbt, commands=[FreezeMembers((2,))])
    first = tmp_path / "first"
    first.mkdir()
    run_population(first, 2, pbt=pbt, commands=[FreezeMembers((2,))])
    (checkpoint,) = sorted((first / "checkpoints").glob("checkpoint-*.msgpack"))
    session, _ = run_population(first, 4, pbt=pbt, resume=checkpoint.read_bytes())
    assert session.population.state(2) is MemberState.FROZEN
    a = read_jsonl(whole / "metrics.jsonl")
    b = read_jsonl(first / "metrics.jsonl")
    assert [r["update"] for r in b] == [1, 2, 3, 4]
    for x, y in zip(a, b):
        assert x["members"]["policy_loss"] == y["members"]["policy_loss"]
        assert x["members"]["lr"] == y["members"]["lr"]
    lineage = lambda d: [(s["update"], s["replacements"]) for s in read_jsonl(d / "population.jsonl")
                         if s["action"] == "pbt"]
    assert lineage(whole) == lineage(first)
    assert not any(math.isnan(v) for v in session.population.values(0).values())


def test_after_a_crash_and_a_resume_the_lineage_is_the_uninterrupted_runs(tmp_path):
    """Killed after the PBT step at update 6, resumed from the checkpoint of update 3: the
    PBT step the crash lost moves aside, and population.jsonl reads as if nothing happened."""
    pbt = PBTPolicy(every_updates=3, fraction=0.34, perturb=(0.5, 2.0), seed=1)
    whole, crashed = tmp_path / "whole", tmp_path / "crashed"
    whole.mkdir()
    crashed.mkdir()
    run_population(whole, 8, pbt=pbt)
    run_population(crashed, 7, pbt=pbt, policy=CheckpointPolicy(every_updates=1, every_minutes=0), keep=100)
    checkpoint = crashed / "checkpoints" / "checkpoint-000000003.msgpack"
    metadata = json.loads(json.dumps(trainers_metadata(checkpoint.read_bytes())))
    truncate_metrics(crashed, metadata["update"])  # as a resume does (rltui.session.resume.prepare_resume)
    truncate_population(crashed, metadata["population"]["changes"], metadata["update"])
    run_population(crashed, 8, pbt=pbt, resume=checkpoint.read_bytes())

    def lineage(run_dir):
        lines = read_jsonl(run_dir / "population.jsonl")
        return [{k: v for k, v in line.items() if k != "wall_time"} for line in lines]

    steps = [(line["update"], line["action"].split("_")[0]) for line in lineage(crashed)]  # pbt or pbt_skipped
    assert steps == [(0, "start"), (3, "pbt"), (6, "pbt")]
    assert lineage(crashed) == lineage(whole)
    assert [line["seq"] for line in lineage(crashed)] == [1, 2, 3]
    assert [line["update"] for line in read_jsonl(crashed / "population.discarded.jsonl")] == [6]


def trainers_metadata(data: bytes) -> dict:
    from trainers.checkpoint import read_metadata

    return read_metadata(data)


def test_a_population_resumed_for_longer_anneals_over_the_new_total(tmp_path):
    # Trained for 2 updates (the learning rate annealing to 0 at update 2), then resumed to 4:
    # as a single run does, each member's lr anneals over the new total from where it was.
    run_population(tmp_path, 2, base=DynamicHParams.create(anneal_updates=2))
    (checkpoint,) = sorted((tmp_path / "checkpoints").glob("checkpoint-*.msgpack"))[-1:]
    session, _ = run_population(tmp_path, 4, base=DynamicHParams.create(anneal_updates=4),
                                resume=checkpoint.read_bytes())
    resumed = {r["update"]: r["members"]["lr"] for r in read_jsonl(tmp_path / "metrics.jsonl") if r["update"] > 2}
    assert resumed[3] == pytest.approx([lr * (1 - 2 / 4) for lr in LRS], rel=1e-5)
    assert resumed[4] == pytest.approx([lr * (1 - 3 / 4) for lr in LRS], rel=1e-5)
    assert [session.population.values(m)["anneal_updates"] for m in range(3)] == [4, 4, 4]


def test_edits_to_members_are_refused_in_one_event_when_bad(tmp_path):
    session, events = run_population(tmp_path, 1, commands=[SetHParams({"lr": 1e-3}, members=(7,)),
                                                            CloneMember(0, (0,))])
    warnings = [e.message for e in events.kinds("warning")]
    assert "edit refused: member 7: expected a member index from 0 to 2" in warnings
    assert "clonemember refused: member 0: cannot clone a member into itself" in warnings
    assert SetHParams({"lr": 1e-3}).members is None  # an edit without members reaches every member


def test_a_rollback_restores_the_members_values_and_lineage(tmp_path):
    session, events = run_population(tmp_path, 2, commands=[SaveCheckpoint(), CloneMember(0, (2,), factor=2.0),
                                                            Rollback()])
    population = session.population
    assert population.values(2)["lr"] == pytest.approx(LRS[2])  # the clone undone
    assert population.view().members[2].parent is None
    actions = [line["action"] for line in read_jsonl(tmp_path / "population.jsonl")]
    assert actions == ["start", "rolled_back"]  # the clone undone is no longer the population's lineage
    assert [line["action"] for line in read_jsonl(tmp_path / "population.discarded.jsonl")] == ["clone"]
    last = read_jsonl(tmp_path / "population.jsonl")[-1]
    assert last["table"][2]["values"]["lr"] == pytest.approx(LRS[2]) and last["table"][2]["parent"] is None



def test_a_swept_switch_is_copied_by_a_clone_never_scaled():
    population = Population(BASE, [{"lr": 1e-3, "anneal_lr": 0.0}, {"lr": 3e-3, "anneal_lr": 1.0}], num_seeds=1)
    assert population.perturbed == ("lr",)
    (replacement,) = population.clone(1, [0], 2.0)
    assert dict(replacement.values) == {"lr": pytest.approx(6e-3)}
    assert population.values(0)["anneal_lr"] == 1.0  # the source's, as it is


def test_a_pbt_step_with_one_member_left_to_change_says_so(tmp_path):
    pbt = PBTPolicy(every_updates=1, fraction=0.34)
    run_population(tmp_path, 1, pbt=pbt, commands=[FreezeMembers((0, 1))])
    (skipped,) = [line for line in read_jsonl(tmp_path / "population.jsonl") if line["action"] == "pbt_skipped"]
    assert skipped["message"] == "PBT step: fewer than 2 members are not frozen; nothing replaced"
