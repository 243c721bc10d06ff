"""Loggers with a population: each member's scalars under `members/<m>/NAME`, a member that
did not train has no point, and population changes (pbt, clone, freeze) as event text."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from rltui.loggers.base import event_kind, scalars
from rltui.loggers.listener import LoggerListener
from rltui.session.events import SessionEvent, SessionState

STEPS = 128


def population_record(update: int, seeds: int = 1) -> dict:
    members = [10.0 * update, None if update > 2 else 5.0, 30.0 * update]  # member 1 frozen after update 2
    return {
        "update": update, "env_steps": update * STEPS, "wall_time": 0.5 * update, "sps": 256.0,
        "episode_return": 20.0 * update, "policy_loss": -0.01,
        "seeds": {"episode_return": [None if v is None else v + s for v in members for s in range(seeds)]},
        "members": {"episode_return": members, "policy_loss": [-0.01, None if update > 2 else -0.01, -0.01]},
    }


def test_scalars_give_one_tag_per_member_and_leave_out_what_is_undefined():
    one = scalars(population_record(3))
    assert one["members/0/episode_return"] == 30.0 and one["members/2/episode_return"] == 90.0
    assert "members/1/episode_return" not in one and "members/1/policy_loss" not in one  # frozen
    assert one["episode_return"] == 60.0
    assert not [tag for tag in one if "seed_" in tag]  # one seed per member: the members' values already
    two = scalars(population_record(1, seeds=2))
    assert two["members/2/episode_return/seed_1"] == 31.0 and two["members/1/episode_return/seed_0"] == 5.0
    assert "episode_return/seed_5" not in two
    # several seeds without a population: as before
    assert scalars({"env_steps": 1, "seeds": {"episode_return": [1.0, 2.0]}})["episode_return/seed_1"] == 2.0


def test_event_kind_names_the_populations_change():
    assert event_kind("population", {"action": "pbt", "table": []}) == "population pbt"
    assert event_kind("population", {"action": "clone"}) == "population clone"
    assert event_kind("population", {}) == "population"
    assert event_kind("paused", {"action": "pbt"}) == "paused"


class Snapshot:
    def __init__(self, records):
        self.new_records = records


class Rec:
    def __init__(self, record):
        self.record = record

    def to_json(self):
        return self.record


def pbt_event(update: int, action: str = "pbt") -> SessionEvent:
    return SessionEvent("population", update, "member 1 <- member 2 (lr=0.0024)", 1.0,
                        {"action": action, "members": None, "replacements": [], "table": []})


def test_tensorboard_logger_writes_member_tags_and_population_events(tmp_path):
    pytest.importorskip("tensorboardX", reason="the tensorboard extra is not installed")
    from rltui.loggers.tensorboard import TensorBoardLogger, read_events

    warnings: list[str] = []
    listener = LoggerListener([TensorBoardLogger(tmp_path / "tb", {"env": "CartPole-v1"})], warnings.append, STEPS)
    listener.on_metrics(Snapshot(tuple(Rec(population_record(u)) for u in range(1, 3))))
    listener.on_event(pbt_event(2))  # a change comes after the records of the chunk it ends
    listener.on_metrics(Snapshot((Rec(population_record(3)), Rec(population_record(4)))))
    listener.on_event(pbt_event(4, "clone"))
    listener.on_state(SessionState.FINISHED, None)
    assert warnings == []

    scalars_by_tag: dict[str, list[tuple[int, float]]] = {}
    texts = []
    for event in read_events(tmp_path / "tb"):
        for value in event.summary.value:
            if value.tag == "events/text_summary":
                texts.append((event.step, b"".join(value.tensor.string_val).decode()))
            elif value.HasField("simple_value"):
                scalars_by_tag.setdefault(value.tag, []).append((event.step, value.simple_value))
    assert scalars_by_tag["members/2/episode_return"] == [(u * STEPS, pytest.approx(30.0 * u)) for u in range(1, 5)]
    assert [step for step, _ in scalars_by_tag["members/1/episode_return"]] == [STEPS, 2 * STEPS]
    assert (2 * STEPS, "**population pbt**: member 1 <- member 2 (lr=0.0024)") in texts
    assert (4 * STEPS, "**population clone**: member 1 <- member 2 (lr=0.0024)") in texts


def test_wandb_logger_logs_member_scalars(tmp_path, monkeypatch):
    logged: list[dict] = []

    class FakeRun:
        def define_metric(self, *args, **kwargs):
            pass

        def log(self, values):
            logged.append(dict(values))

        def finish(self):
            pass

    fake = types.SimpleNamespace(init=lambda **options: FakeRun(), Settings=dict)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    from rltui.loggers.wandb_logger import WandbLogger

    logger = WandbLogger(Path(tmp_path), {"env": "CartPole-v1"})
    warnings: list[str] = []
    listener = LoggerListener([logger], warnings.append, STEPS)
    listener.on_metrics(Snapshot((Rec(population_record(3)),)))
    listener.on_event(pbt_event(3))
    listener.on_state(SessionState.FINISHED, None)  # waits for the logger's thread to write them
    assert warnings == []
    assert logged[0]["members/2/episode_return"] == 90.0 and "members/1/episode_return" not in logged[0]
    assert logged[1] == {"event": "**population pbt**: member 1 <- member 2 (lr=0.0024)", "env_steps": 3 * STEPS}
