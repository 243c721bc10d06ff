"""Loggers with a population: each member's scalars under `members/<m>/NAME`, a member that
did not train has no point, and population changes (pbt, clone, freeze) as event text."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

from rltui.config.build import build_config
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


SWEEP = [1e-3, 2e-3, 3e-3]
# A whole configuration, as a launch gives the loggers.
POPULATION = build_config({"env": "CartPole-v1", "algo": "ppo", "lr": 2.5e-4, "sweep": {"lr": SWEEP}}).to_toml_dict()


def hparams_of(accumulator) -> dict:
    """A TensorBoard run's HParams session: its hyperparameters by name ({} without one)."""
    from tensorboard.plugins.hparams import metadata

    try:
        content = accumulator.PluginTagToContent("hparams").get("_hparams_/session_start_info")
    except KeyError:  # no summary of the HParams plugin at all
        return {}
    if content is None:
        return {}
    values = metadata.parse_session_start_info_plugin_data(content).hparams
    return {name: getattr(value, value.WhichOneof("kind")) for name, value in values.items()}


def test_a_population_is_one_tensorboard_run_per_member_under_its_name(tmp_path):
    """`tensorboard --logdir runs/` lists each run by its name and a population's members as
    runs under it, each with its own hyperparameters, so HParams compares them."""
    pytest.importorskip("tensorboardX", reason="the tensorboard extra is not installed")
    multiplexer = pytest.importorskip("tensorboard.backend.event_processing.event_multiplexer",
                                      reason="tensorboard (the reader) is not installed")
    from rltui.loggers.tensorboard import TensorBoardLogger

    runs = tmp_path / "runs"
    warnings: list[str] = []
    listener = LoggerListener([TensorBoardLogger(runs / "pop", POPULATION)], warnings.append, STEPS)
    listener.on_metrics(Snapshot(tuple(Rec(population_record(u, seeds=2)) for u in range(1, 3))))
    listener.on_event(pbt_event(2))  # a change comes after the records of the chunk it ends
    listener.on_metrics(Snapshot((Rec(population_record(3, seeds=2)), Rec(population_record(4, seeds=2)))))
    listener.on_event(pbt_event(4, "clone"))
    listener.on_state(SessionState.FINISHED, None)
    single = TensorBoardLogger(runs / "single", {**POPULATION, "sweep": {}, "algo": "pqn"})
    single.close()
    assert warnings == []

    tensorboard = multiplexer.EventMultiplexer()
    tensorboard.AddRunsFromDirectory(str(runs))
    tensorboard.Reload()
    assert set(tensorboard.Runs()) == {"pop", "pop/member_0", "pop/member_1", "pop/member_2", "single"}

    def series(run: str, tag: str) -> list[tuple[int, float]]:
        return [(e.step, pytest.approx(e.value)) for e in tensorboard.Scalars(run, tag)]

    assert series("pop/member_2", "train/episode_return") == [(u * STEPS, 30.0 * u) for u in range(1, 5)]
    assert series("pop/member_2", "train/episode_return/seed_1") == [(u * STEPS, 30.0 * u + 1) for u in range(1, 5)]
    assert [step for step, _ in series("pop/member_1", "train/episode_return")] == [STEPS, 2 * STEPS]  # then frozen
    assert series("pop/member_0", "loss/policy_loss")[0] == (STEPS, -0.01)
    # The population's own run: the means over members, the best member, and the events.
    assert series("pop", "train/episode_return")[-1] == (4 * STEPS, 80.0)
    assert series("pop", "population/best_episode_return")[-1] == (4 * STEPS, 120.0)
    assert not [tag for tag in tensorboard.GetAccumulator("pop").Tags()["scalars"] if "seed_" in tag]
    texts = [(e.step, b"".join(e.tensor_proto.string_val).decode())
             for e in tensorboard.Tensors("pop", "events/text_summary")]
    assert texts == [(2 * STEPS, "**population pbt**: member 1 <- member 2 (lr=0.0024)"),
                     (4 * STEPS, "**population clone**: member 1 <- member 2 (lr=0.0024)")]

    # HParams: each member's own lr, and the keys PPO reads; none for the population's run.
    members = [hparams_of(tensorboard.GetAccumulator(f"pop/member_{m}")) for m in range(3)]
    assert [member["lr"] for member in members] == pytest.approx(SWEEP)
    assert {"clip_eps", "gae_lambda", "ent_coef", "seed"} <= set(members[0])
    assert not {"q_lambda", "loggers", "checkpoint_minutes", "sweep"} & set(members[0])
    assert hparams_of(tensorboard.GetAccumulator("pop")) == {}
    pqn = hparams_of(tensorboard.GetAccumulator("single"))
    assert pqn["lr"] == pytest.approx(2.5e-4) and "q_lambda" in pqn and "clip_eps" not in pqn


def test_wandb_logger_logs_each_members_series_in_its_own_run(tmp_path, monkeypatch):
    runs: list[FakeRun] = []

    class FakeRun:
        def __init__(self, options):
            self.options = options
            self.logged: list[dict] = []
            runs.append(self)

        def define_metric(self, *args, **kwargs):
            pass

        def log(self, values):
            self.logged.append(dict(values))

        def finish(self):
            pass

    fake = types.SimpleNamespace(init=lambda **options: FakeRun(options), Settings=dict)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    for name in ("WANDB_RUN_ID", "WANDB_RUN_GROUP"):
        monkeypatch.delenv(name, raising=False)
    from rltui.loggers.wandb_logger import WandbLogger

    logger = WandbLogger(Path(tmp_path), POPULATION)
    warnings: list[str] = []
    listener = LoggerListener([logger], warnings.append, STEPS)
    listener.on_metrics(Snapshot((Rec(population_record(3)),)))
    listener.on_event(pbt_event(3))
    listener.on_state(SessionState.FINISHED, None)  # waits for the logger's thread to write them
    assert warnings == []
    assert [run.options["name"] for run in runs] == [f"{tmp_path.name}/member_{m}" for m in range(3)]
    assert {run.options["group"] for run in runs} == {tmp_path.name}
    assert [run.options["config"]["lr"] for run in runs] == SWEEP
    assert runs[2].logged[0] == {"train/episode_return": 90.0, "loss/policy_loss": -0.01, "env_steps": 3 * STEPS}
    assert runs[1].logged[0]["event"] == "**population pbt**: member 1 <- member 2 (lr=0.0024)"  # frozen: no point
    assert all(run.logged[-1]["event"].startswith("**population pbt**") for run in runs)


def test_wandb_offline_makes_one_run_per_member_in_the_populations_group(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb", reason="the wandb extra is not installed")
    for name in list(os.environ):
        if name.startswith("WANDB_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("WANDB_MODE", "offline")  # never the network
    monkeypatch.setenv("WANDB_SILENT", "true")
    from rltui.loggers.wandb_logger import WandbLogger

    logger = WandbLogger(tmp_path / "pop", {**POPULATION, "sweep": {"lr": SWEEP[:2]}})
    try:
        assert [(run.name, run.group, run.config["lr"], run.config["member"]) for run in logger.runs] == [
            ("pop/member_0", "pop", SWEEP[0], 0), ("pop/member_1", "pop", SWEEP[1], 1)]
        assert len({run.id for run in logger.runs}) == 2
        logger.write_records([{"update": 1, "env_steps": STEPS, "episode_return": 15.0,
                               "members": {"episode_return": [10.0, 20.0]}}])
    finally:
        logger.close()
        wandb.teardown()


def test_a_rollback_cuts_back_every_members_run(tmp_path):
    pytest.importorskip("tensorboardX", reason="the tensorboard extra is not installed")
    from rltui.loggers.tensorboard import TensorBoardLogger, read_events

    logger = TensorBoardLogger(tmp_path, POPULATION)
    logger.write_records([population_record(u) for u in range(1, 5)])
    logger.write_event(2 * STEPS, "rolled back", "rolled back from update 4 to the checkpoint of update 2")
    logger.write_records([population_record(u) for u in range(3, 6)])  # trained on again from update 2
    logger.close()
    resumed = TensorBoardLogger(tmp_path, POPULATION)  # a resume reads what each run holds
    resumed.write_records([population_record(6)])
    resumed.close()
    for run in (tmp_path, tmp_path / "member_0", tmp_path / "member_2"):
        steps = [e.step for e in read_events(run) if any(v.tag == "train/episode_return" for v in e.summary.value)]
        assert steps == [u * STEPS for u in range(1, 7)], run
    hparams = [e for e in read_events(tmp_path / "member_0") if any("_hparams_" in v.tag for v in e.summary.value)]
    assert len(hparams) == 1  # written once, kept through the cut and the resume
