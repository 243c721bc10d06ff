"""Every configuration key is declared once (a `Key`); everything else derives from it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rltui.config.build import RunConfig, build_config, run_config_type
from rltui.config.keys import KEYS, RESUMABLE_KEYS, RUN_KEYS, coerce_value
from rltui.config.reference import render_markdown
from trainers import metrics_spec
from trainers.algorithms import ALGORITHMS
from trainers.algorithms.algorithm import Algorithm, placed
from trainers.hparams import (
    ALGO_HPARAMS,
    LIVE_HPARAMS,
    SHARED_KEYS,
    TRAINER_KEYS,
    DynamicHParams,
    StaticConfig,
    hparam_rule,
)
from trainers.keys import (
    RUN,
    STATIC,
    TRACED,
    Key,
    Number,
    static_config_type,
    traced_fields_type,
)
from trainers.metric import MetricSpec


def test_run_config_has_one_field_per_key_with_the_declared_default():
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    assert list(fields) == list(KEYS)
    defaults = RunConfig()
    for name, key in KEYS.items():
        assert getattr(defaults, name) == key.default, name


def test_trainer_types_have_one_field_per_trainer_key():
    static = [k for k in TRAINER_KEYS if k.kind == STATIC]
    traced = [k for k in TRAINER_KEYS if k.kind == TRACED]
    assert [f.name for f in dataclasses.fields(StaticConfig)] == [k.attr for k in static]
    assert list(DynamicHParams._fields) == [k.attr for k in traced]
    hp = DynamicHParams()
    for key in traced:
        leaf = getattr(hp, key.attr)
        assert isinstance(leaf, np.float32), key.name  # a Python float would recompile
        assert float(leaf) == pytest.approx(float(key.rule.to_trainer(key.default))), key.name


def test_live_resumable_and_editor_sets_follow_the_table():
    assert set(LIVE_HPARAMS) == {k.name for k in TRAINER_KEYS if k.live}
    # replay_in_checkpoint is static (a trainer key) but changes no program: a resume may change it.
    assert RESUMABLE_KEYS == {name for name, k in KEYS.items() if k.kind != STATIC} - {
        "seed", "env_kwargs", "sweep", "sweep_size", "sweep_seed"
    } | {"replay_in_checkpoint"}
    for algo in ALGORITHMS:
        assert ALGO_HPARAMS[algo] == tuple(k.name for k in TRAINER_KEYS if k.live and k.reads(algo))
    assert "clip_eps" not in ALGO_HPARAMS["reinforce"] and "baseline" not in ALGO_HPARAMS["ppo"]
    assert hparam_rule("lr") == KEYS["lr"].rule.describe()
    assert hparam_rule("baseline") == "0 or 1"  # a switch is 0/1 where the trainer holds it


def test_every_key_is_validated_by_its_rule_and_documented():
    page = render_markdown()
    for name, key in KEYS.items():
        assert coerce_value(name, key.default) == key.default, name
        assert f"| `{name}` |" in page and key.rule.describe() in page, name
    assert {k.name for k in RUN_KEYS} <= set(KEYS)
    assert all(k.kind == RUN for k in RUN_KEYS)


def test_a_new_key_is_one_declaration():
    """Adding a key is one `Key` in a table: the run configuration, the trainer's types,
    the validator and the live set pick it up from that declaration alone."""
    new = Key("kl_coef", 0.25, "weight of a KL penalty", Number(0, float32=True), TRACED, live=True)
    run_type = run_config_type({**KEYS, "kl_coef": new})
    assert run_type().kl_coef == 0.25 and run_type(kl_coef=0.5).kl_coef == 0.5
    fields_type = traced_fields_type((*TRAINER_KEYS, new))
    assert fields_type._fields[-1] == "kl_coef" and fields_type().kl_coef == np.float32(0.25)
    assert new.coerce(3) == 3.0 and new.live and new.can_resume_with_change
    with pytest.raises(ValueError, match="kl_coef: expected a number >= 0"):
        new.coerce(-1)
    static = Key("depth", 2, "layers", Number(1), STATIC)
    base = type("Methods", (), {})
    assert static_config_type((*TRAINER_KEYS, static), base)().depth == 2


def test_the_resolved_config_reaches_the_trainer_as_declared():
    config = build_config({}, {"lr": 1e-3, "anneal_lr": False, "normalize_obs": True, "env": "Acrobot-v1"},
                          use_preset=False)
    static, hp = config.static_config(), config.dynamic_hparams()
    assert static.env_id == "Acrobot-v1" and static.normalize_obs is True  # static switches stay booleans
    assert hp.lr == np.float32(1e-3) and hp.anneal_lr == np.float32(0.0)  # traced switches are 0/1
    assert hp.anneal_updates == np.float32(config.total_updates)


def test_each_algorithm_declares_its_own_keys_metrics_and_defaults_once():
    """An algorithm's package declares the keys and metrics only it has (marked as its own in
    the shared tables; one it lists with other algorithms, as their own), and its own
    defaults, which a run of it starts from."""
    table = {key.name: key for key in TRAINER_KEYS}
    metrics = {spec.name: spec for spec in metrics_spec.METRICS}
    for name, algorithm in ALGORITHMS.items():
        assert all(key.algos == (name,) for key in algorithm.keys), name
        assert all(table[key.name] == dataclasses.replace(key, algos=table[key.name].algos)
                   and name in table[key.name].algos for key in algorithm.keys), name
        assert all(metrics[spec.name] == dataclasses.replace(spec, algos=metrics[spec.name].algos)
                   and name in metrics[spec.name].algos for spec in algorithm.metrics), name
        env = "CartPole-v1" if algorithm.takes("discrete") else "Pendulum-v1"
        config = build_config({}, {"algo": name, "env": env}, use_preset=False)
        for key, value in algorithm.defaults.items():
            assert coerce_value(key, value) == value and getattr(config, key) == value, (name, key)
        assert KEYS["algo"].coerce(name) == name
    assert ALGO_HPARAMS["reinforce"] == ("lr", "gamma", "ent_coef", "vf_coef", "max_grad_norm", "baseline",
                                         "normalize_returns", "reward_scale")


def test_a_new_algorithm_is_placed_in_the_tables_by_its_declaration_alone():
    tau = Key("tau", 0.005, "target network update rate", Number(0, 1, float32=True), TRACED, live=True,
              after="gamma")
    new = Algorithm("sac", "my_pkg.sac", keys=(tau,), metrics=(MetricSpec("q_loss", "Q loss", "Q loss",
                                                                          after="value_loss"),))
    keys = placed(SHARED_KEYS, new.keys)
    names = [key.name for key in keys]
    assert names[names.index("gamma") + 1] == "tau" and keys[names.index("tau")].reads("sac")
    assert not keys[names.index("tau")].reads("ppo")
    assert traced_fields_type(keys)().tau == np.float32(0.005)
    metrics = [spec.name for spec in placed(metrics_spec.METRICS, new.metrics)]
    assert metrics[metrics.index("value_loss") + 1] == "q_loss"
    assert new.trainer_module == "my_pkg.sac.trainer"
    with pytest.raises(ValueError, match="lr: declared twice"):
        placed(SHARED_KEYS, (Key("lr", 1.0, "again", Number(0), TRACED),))
    with pytest.raises(ValueError, match="placed after 'nothing'"):
        placed(SHARED_KEYS, (Key("rho", 1.0, "nowhere", Number(0), TRACED, after="nothing"),))
