"""Evaluation during training: eval_every_updates / eval_episodes / stop_at_eval_return,
eval_return in metrics.jsonl, checkpoints/best.msgpack, and a training trajectory that is
the same with evaluation on or off."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rltui.config.build import build_config
from rltui.config.keys import ConfigError
from rltui.runfiles.checkpoints import CheckpointStore
from rltui.runfiles.names import BEST_CHECKPOINT as BEST_NAME
from rltui.session import TrainingSession
from rltui.session.checkpoints import CheckpointPolicy
from rltui.session.evaluation import EvalResult, EvaluationPolicy
from rltui.session.metrics import TRAINER_METRICS
from rltui.session.recorder import RunRecorder
from trainers.hparams import DynamicHParams

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60


class ScriptedEvaluator:
    """Returns the scripted mean return for each evaluation, in order."""

    def __init__(self, means):
        self.means = list(means)
        self.updates: list[int] = []
        self.compiled = False

    def compile(self) -> None:
        self.compiled = True

    def evaluate(self, update: int) -> EvalResult:
        self.updates.append(update)
        mean = self.means[len(self.updates) - 1]
        return EvalResult(mean, 1.0)


class TinyBackend:
    """A pure-Python backend whose checkpoints are real checkpoint files (tiny state)."""

    steps_per_update = 8
    max_chunk_updates = 64

    def __init__(self):
        self.update = 0

    def build(self, hparams) -> None:
        pass

    def run_chunk(self, num_updates: int, hparams) -> list[dict]:
        rows = []
        for _ in range(num_updates):
            self.update += 1
            row = {name: 0.5 for name in TRAINER_METRICS}
            row["episode_return"] = float(self.update)
            rows.append(row)
        return rows

    def describe(self) -> dict:
        return {"env": "Fake-v0", "algo": "ppo", "devices": ["cpu:0"], "device_kind": "fake"}

    def encode_checkpoint(self, metadata: dict) -> bytes:
        from trainers import checkpoint
        from trainers.types import TrainState

        zero = np.zeros((), np.float32)
        state = TrainState(params={"w": np.full((2,), self.update, np.float32)}, opt_state={}, env_state={},
                           obs=zero, key=np.zeros((2,), np.uint32), update_idx=np.int32(self.update))
        return checkpoint.encode(state, metadata)

    def restore_checkpoint(self, data: bytes) -> dict:
        raise NotImplementedError


def run_session(tmp_path: Path, means, *, every=2, total=10, stop_at=None):
    evaluator = ScriptedEvaluator(means)
    store = CheckpointStore.for_run(tmp_path)
    session = TrainingSession(
        TinyBackend(), DynamicHParams.create(anneal_updates=float(total)), total, checkpoints=store,
        checkpoint_policy=CheckpointPolicy(every_minutes=0),
        evaluation=EvaluationPolicy(every_updates=every, episodes=4, stop_at_return=stop_at), evaluator=evaluator,
    )
    recorder = RunRecorder(tmp_path)
    session.add_listener(recorder)
    events = []

    class Events:
        def on_state(self, *args):
            pass

        def on_metrics(self, snapshot):
            pass

        def on_event(self, event):
            events.append(event)

    session.add_listener(Events())
    session.start()
    assert session.join(TIMEOUT)
    recorder.close()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return session, evaluator, records, events


def best_metadata(run_dir: Path) -> dict:
    from trainers.checkpoint import verify

    return verify((run_dir / "checkpoints" / BEST_NAME).read_bytes())


def test_evaluations_land_on_their_updates_in_metrics_jsonl(tmp_path):
    session, evaluator, records, _ = run_session(tmp_path, [1.0, 2.0, 3.0, 4.0, 5.0], every=2, total=10)
    assert session.error is None
    assert evaluator.compiled and evaluator.updates == [2, 4, 6, 8, 10]
    evaluated = {r["update"]: r["eval_return"] for r in records if r["eval_return"] is not None}
    assert evaluated == {2: 1.0, 4: 2.0, 6: 3.0, 8: 4.0, 10: 5.0}
    assert all(r["eval_return_std"] == 1.0 for r in records if r["eval_return"] is not None)
    assert [r["update"] for r in records] == list(range(1, 11))  # every update still recorded


def test_best_checkpoint_only_improves(tmp_path):
    means = [3.0, 1.0, 7.0, 7.0, 2.0]
    session, _, _, events = run_session(tmp_path, means, every=2, total=10)
    best = best_metadata(tmp_path)
    assert best["eval_return"] == 7.0 and best["update"] == 6  # the first 7.0; an equal one does not replace it
    assert best["reason"] == "best"
    saved = [e.data["eval_return"] for e in events if e.kind == "best"]
    assert saved == [3.0, 7.0]
    assert session.best_eval_return == 7.0
    # A later run into the same directory (a resume) keeps it unless it evaluates better.
    run_session(tmp_path, [6.0], every=2, total=2)
    assert best_metadata(tmp_path)["eval_return"] == 7.0
    run_session(tmp_path, [9.0], every=2, total=2)
    assert best_metadata(tmp_path)["eval_return"] == 9.0
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))


def test_store_refuses_a_worse_best(tmp_path):
    store = CheckpointStore.for_run(tmp_path)
    backend = TinyBackend()
    assert store.save_best(backend.encode_checkpoint({"eval_return": 5.0}), 5.0) == store.best_path
    assert store.save_best(backend.encode_checkpoint({"eval_return": 4.0}), 4.0) is None
    assert store.best_score() == 5.0
    assert store.latest() is None  # best.msgpack is not one of the periodic checkpoints


def test_stop_at_eval_return_stops_with_a_final_checkpoint_and_an_event(tmp_path):
    session, evaluator, records, events = run_session(tmp_path, [1.0, 5.0, 9.0], every=3, total=30, stop_at=5.0)
    assert session.stopped_early and session.target_reached
    assert evaluator.updates == [3, 6]
    assert records[-1]["update"] == 6
    kinds = [e.kind for e in events]
    assert "target_reached" in kinds
    reached = next(e for e in events if e.kind == "target_reached")
    assert "stop_at_eval_return" in reached.message
    assert (tmp_path / "checkpoints" / "checkpoint-000000006.msgpack").exists()
    assert [e.data["reason"] for e in events if e.kind == "checkpoint"] == ["final"]


@pytest.mark.parametrize("key, value", [("eval_every_updates", -1), ("eval_episodes", 0), ("eval_episodes", 10**6),
                                        ("stop_at_eval_return", "high")])
def test_out_of_range_values_are_refused(key, value):
    with pytest.raises(ConfigError, match=key):
        build_config({}, {key: value})


def test_stop_at_eval_return_is_optional():
    assert build_config().stop_at_eval_return is None
    assert "stop_at_eval_return" not in build_config().to_toml_dict()  # TOML has no null
    assert build_config({}, {"stop_at_eval_return": 475}).stop_at_eval_return == 475.0


# --- with JAX: the real trainer ---------------------------------------------------------------

TINY = dict(env="CartPole-v1", num_envs=4, num_steps=16, num_minibatches=2, update_epochs=1, hidden_sizes=[16],
            total_timesteps=4 * 16 * 6)


def train(eval_every: int):
    import jax

    from rltui.session.backend import JaxBackend
    from rltui.session.evaluation import JaxEvaluator

    config = build_config(TINY, {"eval_every_updates": eval_every, "eval_episodes": 4}, use_preset=False)
    backend = JaxBackend(config.static_config(), config.seed, jax.local_devices()[:1])
    evaluator = JaxEvaluator(backend, config.eval_episodes, config.seed) if eval_every else None
    policy = EvaluationPolicy(config.eval_every_updates, config.eval_episodes)
    session = TrainingSession(backend, config.dynamic_hparams(), config.total_updates, evaluation=policy,
                              evaluator=evaluator)
    records = []

    class Collect:
        def on_state(self, *args):
            pass

        def on_event(self, event):
            pass

        def on_metrics(self, snapshot):
            records.extend(snapshot.new_records)

    session.add_listener(Collect())
    session.start()
    assert session.join(300)
    assert session.error is None, session.error
    return records, backend.params_digest()


def test_training_is_bit_identical_with_evaluation_on_and_off():
    # Bit-exact: the same program on the same machine, with and without evaluation.
    off, digest_off = train(0)
    on, digest_on = train(2)
    assert len(on) == len(off) == 6
    for a, b in zip(off, on):
        for name in TRAINER_METRICS:
            x, y = a.get(name), b.get(name)
            assert (math.isnan(x) and math.isnan(y)) or x == y, (a.update, name, x, y)
    assert digest_on == digest_off
    evaluated = [r.get("eval_return") for r in on if math.isfinite(r.get("eval_return"))]
    assert len(evaluated) == 3 and all(1.0 <= v <= 500.0 for v in evaluated)
    assert all(math.isnan(r.get("eval_return")) for r in off)


def test_headless_run_keeps_best_and_eval_and_resume_accept_it(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    sets = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in TINY.items()]
    sets += ["eval_every_updates=2", "eval_episodes=4", "checkpoint_minutes=0"]
    args = ["launch", "--no-ui", "--no-preset", "--run-dir", "run", *[a for s in sets for a in ("--set", s)]]
    cli = [sys.executable, "-m", "rltui"]
    result = subprocess.run([*cli, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    best = tmp_path / "run" / "checkpoints" / BEST_NAME
    assert best.exists()
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    scores = [r["eval_return"] for r in records if r["eval_return"] is not None]
    assert len(scores) == 3 and best_metadata(tmp_path / "run")["eval_return"] == max(scores)
    result = subprocess.run([*cli, "eval", str(best), "--episodes", "2"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2 episodes (greedy)" in result.stdout
    result = subprocess.run([*cli, "launch", "--no-ui", "--resume", str(best), "--run-dir", "branch",
                             "--set", f"total_timesteps={4 * 16 * 8}"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "branch" / "metrics.jsonl").exists()
