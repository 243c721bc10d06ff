"""rltui.config.build and rltui.config.toml_text: defaults < TOML file < --set, and one-line ConfigErrors
naming the field."""

from __future__ import annotations

import functools
import os
import tomllib

import pytest

from rltui.config import presets
from rltui.config.build import RunConfig, build_config, check_devices, check_run_name, hparams_as_config
from rltui.config.keys import INT_RANGES, KEYS, ConfigError, coerce_value
from rltui.config.toml_text import dump_toml, load_toml, parse_overrides, parse_set_value
from trainers.hparams import quote
from trainers.keys import INT64_MAX


def from_set(*items: str) -> RunConfig:
    return build_config({}, parse_overrides(list(items)))


def assert_config_error(field: str, excinfo: pytest.ExceptionInfo) -> str:
    message = str(excinfo.value)
    assert message.startswith(f"{field}:"), message
    assert "\n" not in message, f"not one line: {message!r}"
    return message


# --- defaults ---------------------------------------------------------------------------


def test_defaults_build_to_the_documented_run():
    config = build_config()
    assert config == RunConfig()
    assert config.env == "CartPole-v1"
    assert config.algo == "ppo"
    assert config.hidden_sizes == (64, 64)
    assert config.num_steps % config.num_minibatches == 0
    assert config.total_updates == config.total_timesteps // (config.num_envs * config.num_steps)
    # every dataclass field is documented, and nothing else
    assert set(KEYS) == {f for f in RunConfig.__dataclass_fields__}


def test_defaults_give_valid_trainer_inputs():
    config = build_config()
    hp = config.dynamic_hparams()
    assert float(hp.lr) == pytest.approx(2.5e-4)
    assert float(hp.anneal_lr) == 1.0
    assert float(hp.anneal_updates) == config.total_updates
    static = config.static_config()
    assert static.steps_per_update == config.steps_per_update
    assert static.hidden_sizes == (64, 64)


# --- --set parsing ----------------------------------------------------------------------


def test_set_float():
    config = from_set("lr=3e-4")
    assert isinstance(config.lr, float)
    assert config.lr == pytest.approx(3e-4)


def test_set_bare_string_env():
    assert parse_set_value("Acrobot-v1") == "Acrobot-v1"
    assert from_set("env=Acrobot-v1").env == "Acrobot-v1"
    assert from_set('env="Acrobot-v1"').env == "Acrobot-v1"
    assert parse_set_value("") == ""  # `--set loggers=` empties a list a config file set
    assert parse_set_value("[lr, ent_coef]") == "[lr, ent_coef]"  # bare names: the key reads them


def test_set_scientific_integer():
    config = from_set("total_timesteps=2e6")
    assert config.total_timesteps == 2_000_000
    assert type(config.total_timesteps) is int


@pytest.mark.parametrize("text", ["hidden_sizes=[32,32]", "hidden_sizes=32,32", "hidden_sizes=[32, 32]"])
def test_set_hidden_sizes_list(text):
    config = from_set(text)
    assert config.hidden_sizes == (32, 32)
    assert isinstance(config.hidden_sizes, tuple)


@pytest.mark.parametrize("text,message", [
    ("hidden_sizes=[64,64", "hidden_sizes: '[64,64' is not an array TOML can read: unclosed array"),
    ("hidden_sizes=[64,64]]", "hidden_sizes: '[64,64]]' is not an array TOML can read: expected newline or end of "
                              "document after a statement"),
    ("env_kwargs={arms = 2", "env_kwargs: '{arms = 2' is not a table TOML can read: unclosed inline table"),
])
def test_set_value_shaped_like_an_array_or_table_must_be_one(text, message):
    with pytest.raises(ConfigError) as excinfo:
        parse_overrides([text])
    assert str(excinfo.value) == message


@pytest.mark.parametrize(
    "text,expected", [("anneal_lr=false", False), ("anneal_lr=true", True), ("anneal_lr=False", False)]
)
def test_set_bool(text, expected):
    assert from_set(text).anneal_lr is expected


def test_set_int_float_coercions():
    config = from_set("num_envs=8.0", "ent_coef=0", "num_steps=64", "num_minibatches=8")
    assert config.num_envs == 8 and type(config.num_envs) is int
    assert config.ent_coef == 0.0 and type(config.ent_coef) is float


def test_later_set_overrides_earlier_and_file():
    config = build_config({"lr": 1e-3, "seed": 3}, parse_overrides(["lr=1e-4", "lr=2e-4"]))
    assert config.lr == pytest.approx(2e-4)
    assert config.seed == 3


def test_set_without_equals_is_refused():
    with pytest.raises(ConfigError) as excinfo:
        parse_overrides(["lr"])
    assert_config_error("--set", excinfo)


# --- bad values -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "item,field",
    [
        ("learning_rate=3e-4", "learning_rate"),
        ("num_envs=four", "num_envs"),
        ("num_envs=4.5", "num_envs"),
        ("num_envs=true", "num_envs"),
        ("lr=fast", "lr"),
        ("lr=true", "lr"),
        ("anneal_lr=3", "anneal_lr"),
        ("anneal_lr=yes", "anneal_lr"),
        ("hidden_sizes=[]", "hidden_sizes"),
        ("hidden_sizes=[64,0]", "hidden_sizes"),
        ("hidden_sizes=a,b", "hidden_sizes"),
        ("env=3", "env"),
        ("algo=a2c", "algo"),
        ("activation=gelu", "activation"),
    ],
)
def test_unknown_key_or_wrong_type(item, field):
    with pytest.raises(ConfigError) as excinfo:
        from_set(item)
    assert_config_error(field, excinfo)


@pytest.mark.parametrize(
    "item,field",
    [
        ("lr=0", "lr"),
        ("lr=-1e-3", "lr"),
        ("lr=nan", "lr"),
        ("lr=inf", "lr"),
        ("gamma=0", "gamma"),
        ("gamma=1.5", "gamma"),
        ("gae_lambda=-0.1", "gae_lambda"),
        ("gae_lambda=1.1", "gae_lambda"),
        ("clip_eps=0", "clip_eps"),
        ("ent_coef=-1", "ent_coef"),
        ("vf_coef=-0.5", "vf_coef"),
        ("max_grad_norm=0", "max_grad_norm"),
        ("num_envs=0", "num_envs"),
        ("num_steps=0", "num_steps"),
        ("total_timesteps=0", "total_timesteps"),
        ("update_epochs=0", "update_epochs"),
        ("seed=-1", "seed"),
        ("devices=-1", "devices"),
        ("cpu_threads=-1", "cpu_threads"),
        ("chunk_seconds=0", "chunk_seconds"),
        ("chunk_seconds=1000", "chunk_seconds"),
    ],
)
def test_out_of_range(item, field):
    with pytest.raises(ConfigError) as excinfo:
        from_set(item)
    message = assert_config_error(field, excinfo)
    # says what is allowed, and what it got
    assert "expected" in message


def test_unknown_key_lists_known_keys():
    with pytest.raises(ConfigError) as excinfo:
        from_set("momentum=0.9")
    message = assert_config_error("momentum", excinfo)
    assert "lr" in message and "num_envs" in message


def test_unknown_env():
    with pytest.raises(ConfigError) as excinfo:
        from_set("env=CartPole-v9")
    message = assert_config_error("env", excinfo)
    assert "CartPole-v9" in message
    assert "rltui envs" in message


def test_num_minibatches_must_divide_num_steps():
    with pytest.raises(ConfigError) as excinfo:
        from_set("num_steps=100", "num_minibatches=3")
    message = assert_config_error("num_minibatches", excinfo)
    assert "100" in message and "3" in message
    # a divisor is fine
    assert from_set("num_steps=100", "num_minibatches=4").num_minibatches == 4


def test_network_gru_is_accepted_and_others_refused():
    config = from_set("network=gru", "env=CartPole-v1-pomdp")
    assert config.static_config().network == "gru" and config.static_config().recurrent
    assert RunConfig().network == "mlp" and not RunConfig().static_config().recurrent
    assert from_set("network=gru", "algo=reinforce").static_config().network == "gru"
    with pytest.raises(ConfigError) as excinfo:
        from_set("network=lstm")
    message = assert_config_error("network", excinfo)
    assert "mlp, gru" in message and "lstm" in message


def test_gru_minibatches_split_environments_not_steps():
    # minibatches of whole env sequences: num_minibatches must divide num_envs, not num_steps
    assert from_set("network=gru", "num_steps=100", "num_envs=8", "num_minibatches=4").num_steps == 100
    with pytest.raises(ConfigError) as excinfo:
        from_set("network=gru", "num_envs=6", "num_minibatches=4")
    message = assert_config_error("num_minibatches", excinfo)
    assert "num_envs (6)" in message and "gru" in message
    with pytest.raises(ConfigError) as excinfo:
        check_devices(from_set("network=gru", "num_envs=4", "num_minibatches=4"), 2)
    message = assert_config_error("num_minibatches", excinfo)
    assert "2 devices" in message
    check_devices(from_set("network=gru", "num_envs=8", "num_minibatches=4"), 2)


def test_toml_table_is_refused_with_a_hint():
    with pytest.raises(ConfigError) as excinfo:
        build_config({"ppo": {"lr": 1e-3}})
    message = assert_config_error("ppo", excinfo)
    assert "flat" in message


def test_bad_value_in_file_names_the_field():
    with pytest.raises(ConfigError) as excinfo:
        build_config({"gamma": 2.0})
    assert_config_error("gamma", excinfo)


# --- TOML files -------------------------------------------------------------------------


def test_load_toml_missing_file(tmp_path):
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as excinfo:
        load_toml(path)
    message = assert_config_error("--config", excinfo)
    assert str(path) in message


def test_load_toml_malformed_names_the_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('lr = 3e-4\nenv = "CartPole-v1"\nthis is not toml\n', encoding="utf-8")
    with pytest.raises(ConfigError) as excinfo:
        load_toml(path)
    message = assert_config_error("--config", excinfo)
    assert str(path) in message
    assert "line 3" in message


def test_load_toml_then_set_precedence(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('env = "Acrobot-v1"\nlr = 1e-3\nhidden_sizes = [16, 16]\nanneal_lr = false\n', encoding="utf-8")
    config = build_config(load_toml(path), parse_overrides(["lr=5e-4"]))
    assert config.env == "Acrobot-v1"
    assert config.lr == pytest.approx(5e-4)
    assert config.hidden_sizes == (16, 16)
    assert config.anneal_lr is False
    # keys neither the file nor --set gives come from Acrobot's tuned preset
    assert config.num_envs == presets.preset("ppo", "Acrobot-v1")["num_envs"]
    assert build_config(load_toml(path), use_preset=False).num_envs == RunConfig().num_envs


# --- devices ----------------------------------------------------------------------------


def test_check_devices_not_divisible():
    config = from_set("num_envs=3")
    with pytest.raises(ConfigError) as excinfo:
        check_devices(config, 2)
    message = assert_config_error("num_envs", excinfo)
    assert "3" in message and "2" in message


def test_check_devices_divisible_passes():
    check_devices(from_set("num_envs=8"), 4)
    check_devices(from_set("num_envs=3"), 1)


# --- round trip -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        [
            "env=Pendulum-v1",
            "seed=7",
            "total_timesteps=2e6",
            "num_envs=16",
            "num_steps=32",
            "num_minibatches=8",
            "update_epochs=2",
            "hidden_sizes=[32,16,8]",
            "activation=relu",
            "lr=3e-4",
            "anneal_lr=false",
            "gamma=1",
            "gae_lambda=0",
            "clip_eps=0.1",
            "ent_coef=0",
            "vf_coef=1",
            "max_grad_norm=10",
            "devices=2",
            "chunk_seconds=0.05",
        ],
    ],
)
def test_dump_toml_round_trips(tmp_path, overrides):
    config = from_set(*overrides)
    text = dump_toml(config)
    assert tomllib.loads(text)["env"] == config.env
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    again = build_config(load_toml(path))
    assert again == config
    assert dump_toml(again) == text


def test_config_toml_writes_whole_numbers_as_integers_and_reads_them_back_as_the_same_floats(tmp_path):
    config = from_set("algo=dqn", "learning_starts=20000", "target_period=250", "tau=0.5")
    text = dump_toml(config)
    assert "learning_starts = 20000\n" in text and "target_period = 250\n" in text and "tau = 0.5\n" in text
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    again = build_config(load_toml(path))
    assert again == config and isinstance(again.learning_starts, float)


def test_live_hparams_read_as_config_values():
    live = {"lr": 1e-3, "baseline": 1.0, "normalize_returns": 0.0, "anneal_lr": 1.0, "anneal_updates": 24.0}
    assert hparams_as_config(live) == {"lr": 1e-3, "baseline": True, "normalize_returns": False}


# --- inputs at the edge of what Python and the trainer can hold ----------------------------


def test_every_integer_key_has_a_range_that_fits_its_type():
    """The top of each integer key's range is accepted, one more is refused at parse time."""
    defaults = RunConfig()
    int_keys = [k for k in KEYS if isinstance(getattr(defaults, k), int) and not isinstance(getattr(defaults, k), bool)]
    assert set(INT_RANGES) == {*int_keys, "hidden_sizes"}
    for key in int_keys:
        allowed = INT_RANGES[key]
        assert allowed.high <= INT64_MAX, key
        assert coerce_value(key, allowed.high) == allowed.high
        with pytest.raises(ConfigError) as excinfo:
            coerce_value(key, allowed.high + 1)
        assert (
            str(excinfo.value)
            == f"{key}: expected an integer in [{allowed.low}, {allowed.high}], got {allowed.high + 1}"
        )


@pytest.mark.parametrize(
    "items,message",
    [
        (["seed=1e30"], "seed: expected an integer in [0, 4294967295], got 1e+30"),
        (["seed=4294967296"], "seed: expected an integer in [0, 4294967295], got 4294967296"),
        (["num_envs=2147483648"], "num_envs: expected an integer in [1, 2147483647], got 2147483648"),
        (["seed=4294967295", "num_seeds=2"],
         "seed: the last agent's seed (seed + num_seeds - 1) must be at most 4294967295, got 4294967296"),
        (["num_envs=65536", "num_steps=65536", "num_minibatches=1"],
         "num_envs: num_envs x num_steps (env steps per update) must be at most 2147483647, got 4294967296"),
        (["total_timesteps=1e18"],
         "total_timesteps: the number of updates (total_timesteps / env steps per update) must be at most "
         "2147483647, got 1953125000000000"),
        (["hidden_sizes=[64, 2147483648]"],
         "hidden_sizes: expected a list of positive integers up to 2147483647, like [64, 64], got [64, 2147483648]"),
    ],
    ids=["seed-1e30", "seed-above-uint32", "num-envs-above-int32", "last-seed", "steps-per-update", "updates", "width"],
)
def test_integers_beyond_their_type_are_refused(items, message):
    with pytest.raises(ConfigError) as excinfo:
        from_set(*items)
    assert str(excinfo.value) == message


HUGE_INT = "1" + "0" * 400
HUGE_INT_SHOWN = "1" + "0" * 37 + "..." + "0" * 39 + " (401 digits)"


@pytest.mark.parametrize(
    "item,message",
    [
        (f"lr={HUGE_INT}", f"lr: expected a number > 0, got {HUGE_INT_SHOWN}, which is not a finite number"),
        (
            f"checkpoint_minutes={HUGE_INT}",
            f"checkpoint_minutes: expected a number of minutes >= 0, got {HUGE_INT_SHOWN}",
        ),
        ("lr=1e39", "lr: expected a number > 0, got 1e+39, which is too large for a 32-bit float"),
        ("lr=1e-50", "lr: expected a number > 0, got 1e-50, which is 0 as a 32-bit float"),
        ("hidden_sizes=" + "[" * 100_000 + "]" * 100_000, "hidden_sizes: arrays are nested too deeply to read"),
        ("seed=1" + "0" * 5000, "seed: a number has more than 4,300 digits, too many to read"),
    ],
    ids=["int-beyond-float", "int-beyond-float-minutes", "beyond-float32", "zero-in-float32", "nested", "digits"],
)
def test_numbers_python_cannot_hold_are_refused_in_one_line(item, message):
    with pytest.raises(ConfigError) as excinfo:
        from_set(item)
    assert str(excinfo.value) == message


def test_toml_file_with_a_number_beyond_float_names_the_file(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text(f"lr = {HUGE_INT}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as excinfo:
        load_toml(path)
    assert (
        str(excinfo.value)
        == f"--config: {path}: lr: expected a number > 0, got {HUGE_INT_SHOWN}, which is not a finite number"
    )


def test_toml_file_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'lr = 3e-4\nenv = "\xff\xfe"\n')
    with pytest.raises(ConfigError) as excinfo:
        load_toml(path)
    assert str(excinfo.value) == f"--config: {path} is not UTF-8 text (byte 0xff at offset 17); TOML files are UTF-8"


def test_toml_file_nested_too_deeply_is_refused(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text("hidden_sizes = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as excinfo:
        load_toml(path)
    assert str(excinfo.value) == f"--config: {path} is not readable as TOML: arrays are nested too deeply to read"


def test_toml_file_larger_than_the_bound_is_refused_unread(tmp_path):
    from rltui.infra.read_limits import TEXT_FILE_BYTES

    path = tmp_path / "huge.toml"
    path.write_bytes(b"lr = [" + b"1," * TEXT_FILE_BYTES)  # a configuration no one writes: not even TOML
    with pytest.raises(ConfigError) as excinfo:
        load_toml(path)
    assert str(excinfo.value) == f"--config: cannot read {path}: is 2 MiB, more than the 1 MiB rltui reads of a " \
        "configuration"


@pytest.mark.parametrize("kind", ["/dev/zero", "pipe", "directory"])
def test_toml_path_that_is_no_regular_file_is_refused_unread(tmp_path, kind):
    # /dev/zero never ends, and a pipe nobody writes to never answers: neither is read.
    path = tmp_path / "config.toml"
    if kind == "/dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "pipe":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(ConfigError) as excinfo:
        load_toml(path)
    assert str(excinfo.value) == f"--config: cannot read {path}: is not a regular file"


def test_long_values_are_quoted_shortened():
    env = "x" * 50_000_000
    with pytest.raises(ConfigError) as excinfo:
        build_config({"env": env})
    shown = "'" + "x" * 37 + "..." + "x" * 38 + "' (50,000,000 characters)"
    assert str(excinfo.value) == f"env: unknown environment {shown}; run `rltui envs` to list the supported ones"
    with pytest.raises(ConfigError) as excinfo:
        build_config({"k" * 1000: 1})
    assert str(excinfo.value).startswith("'" + "k" * 37 + "..." + "k" * 38 + "' (1,000 characters): unknown key;")


@pytest.mark.parametrize(
    "value,shown",
    [
        ("abc", "'abc'"),
        (list(range(100)), "[0, 1, 2, 3, 4, 5, ...]"),
        (10**5000, "an integer of more than 4,300 digits"),
        (functools.reduce(lambda inner, _: [inner], range(100_000), []), "[[[[...]]]]"),
    ],
    ids=["short", "long-list", "int-beyond-repr", "deep"],
)
def test_quote_is_bounded_whatever_the_value(value, shown):
    assert quote(value) == shown


@pytest.mark.parametrize(
    "name,message",
    [
        (
            "exp/one",
            "--name: expected a name without '/' (one directory under runs/; --run-dir takes a path), got 'exp/one'",
        ),
        (
            "a/../../escape",
            "--name: expected a name without '/' (one directory under runs/; --run-dir takes a path), "
            "got 'a/../../escape'",
        ),
        ("..", "--name: expected a directory name, got '..'"),
        (".", "--name: expected a directory name, got '.'"),
        ("", "--name: expected a directory name, got ''"),
        ("a\x00b", "--name: expected a name without control characters, got 'a\\x00b'"),
        ("two\nlines", "--name: expected a name without control characters, got 'two\\nlines'"),
    ],
    ids=["slash", "escape", "dotdot", "dot", "empty", "nul", "newline"],
)
def test_run_name_is_one_path_component(name, message):
    with pytest.raises(ConfigError) as excinfo:
        check_run_name(name)
    assert str(excinfo.value) == message
    assert check_run_name("CartPole-v1 first try") == "CartPole-v1 first try"


def test_env_kwargs_go_with_an_import_path_or_a_suite_id_only():
    config = build_config({}, {"env": "brax:inverted_pendulum", "env_kwargs": {"episode_length": 200}})
    assert config.static_config().env_id == 'brax:inverted_pendulum {"episode_length":200}'
    assert build_config({}, {"env": "my_pkg.envs:make", "env_kwargs": {"n": 3}}).env_kwargs == {"n": 3}
    with pytest.raises(ConfigError, match="env_kwargs: only an env given by import path or another suite's id"):
        build_config({}, {"env": "CartPole-v1", "env_kwargs": {"n": 3}})


@pytest.mark.parametrize("total,said", [
    ("100", "rltui: total_timesteps 100 trains 1 whole update of 512 env steps: 512 env steps\n"),
    ("3e5", "rltui: total_timesteps 300,000 trains 585 whole updates of 512 env steps: 299,520 env steps\n"),
    ("1024", ""),
])
def test_a_total_that_is_not_whole_updates_is_said_with_what_trains(total, said, monkeypatch, capsys):
    import rltui.commands.launch
    from rltui.cli import main

    seen = {}

    def fake_launch(args, spec=None):
        plan = rltui.commands.launch._config_and_resume(args)
        rltui.commands.launch.say(plan.notices)
        seen["config"] = plan.config
        return 0

    monkeypatch.setattr(rltui.commands.launch, "launch", fake_launch)
    assert main(["launch", "--no-ui", "--set", f"total_timesteps={total}"]) == 0
    assert seen["config"].steps_per_update == 512
    assert capsys.readouterr().err == said


def test_a_refused_launch_says_only_why(monkeypatch, capsys):
    # The plan's notices (here the rounding of total_timesteps) come once the checks have
    # passed: a refusal is its one line alone.
    import rltui.loggers.base
    from rltui.cli import main

    monkeypatch.setattr(rltui.loggers.base, "missing_module", lambda name: "wandb")
    assert main(["launch", "--no-ui", "--set", "total_timesteps=100", "--set", "loggers=[wandb]"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rltui: error: loggers: wandb needs the wandb package") and err.count("\n") == 1, err


@pytest.mark.parametrize("algo,kept,left_out", [
    ("dqn", ("double_q", "tau", "eps_start", "buffer_size", "lr"),
     ("clip_eps", "num_minibatches", "update_epochs", "q_lambda", "norm_type", "alpha", "gae_lambda", "log_std")),
    ("ppo", ("clip_eps", "gae_lambda", "log_std", "num_minibatches"), ("tau", "eps_start", "double_q", "q_lambda")),
    ("sac", ("alpha", "autotune", "tau", "buffer_size"), ("clip_eps", "eps_start", "double_q", "norm_type", "log_std")),
])
def test_config_toml_holds_the_keys_its_algorithm_reads_and_reads_back_to_the_same_run(tmp_path, algo, kept, left_out):
    env = "Pendulum-v1" if algo in ("ppo", "sac") else "CartPole-v1"
    config = from_set(f"algo={algo}", f"env={env}", "lr=3e-4")
    written = tomllib.loads(dump_toml(config))
    assert all(name in written for name in kept), [name for name in kept if name not in written]
    assert not [name for name in left_out if name in written]
    path = tmp_path / "config.toml"
    path.write_text(dump_toml(config), encoding="utf-8")
    again = build_config(load_toml(path))
    assert again.algo == algo and again.lr == pytest.approx(3e-4)
    assert again.static_config() == config.static_config()
    assert again.dynamic_hparams() == config.dynamic_hparams()
    # The checkpoint's record of the configuration keeps every key.
    assert "clip_eps" in config.to_toml_dict() and "tau" in config.to_toml_dict()


def test_a_key_the_algorithm_does_not_read_is_said_in_one_line_at_launch(monkeypatch, capsys):
    import rltui.commands.launch
    from rltui.cli import main

    monkeypatch.setattr(rltui.commands.launch, "launch",
                        lambda args, spec=None: rltui.commands.launch.say(
                            rltui.commands.launch._config_and_resume(args).notices) or 0)
    assert main(["launch", "--no-ui", "--no-preset", "--set", "algo=dqn", "--set", "clip_eps=0.3",
                 "--set", "lr=1e-3", "--set", "ent_coef=0"]) == 0
    assert capsys.readouterr().err == (
        "rltui: clip_eps, ent_coef: algo = dqn does not read them (ppo and reinforce read them); "
        "no effect on this run\n")
    assert main(["launch", "--no-ui", "--no-preset", "--set", "algo=ppo", "--set", "tau=0.5"]) == 0
    said = capsys.readouterr().err
    assert said == "rltui: tau: algo = ppo does not read it (dqn and sac read it); no effect on this run\n"
    assert main(["launch", "--no-ui", "--no-preset", "--set", "algo=dqn", "--set", "clip_eps=0.3",
                 "--set", "gae_lambda=0.9"]) == 0
    said = capsys.readouterr().err
    assert said == ("rltui: clip_eps, gae_lambda: algo = dqn does not read them (ppo reads them); "
                    "no effect on this run\n")
    assert main(["launch", "--no-ui", "--no-preset", "--set", "algo=dqn", "--set", "tau=0.5"]) == 0
    assert capsys.readouterr().err == ""
    # A key for the other action space: PPO reads log_std on Pendulum, not on CartPole.
    assert main(["launch", "--no-ui", "--no-preset", "--set", "log_std=state", "--set", "log_std_init=-1"]) == 0
    assert capsys.readouterr().err == ("rltui: log_std, log_std_init: CartPole-v1 has discrete actions, and they are "
                                       "for continuous ones; no effect on this run\n")
    assert main(["launch", "--no-ui", "--no-preset", "--set", "env=Pendulum-v1", "--set", "log_std=state"]) == 0
    assert capsys.readouterr().err == ""
    # Both at once: each said for what it is.
    assert main(["launch", "--no-ui", "--no-preset", "--set", "log_std=state", "--set", "tau=0.5"]) == 0
    assert capsys.readouterr().err == ("rltui: tau: algo = ppo does not read it (dqn and sac read it); log_std: "
                                       "CartPole-v1 has discrete actions, and it is for continuous ones; no effect on "
                                       "this run\n")


def test_a_second_env_object_of_a_class_trains_on_its_own_action_space():
    # `object:Bandit#2` is the id of the second object of a class registered in one process:
    # not a built-in env, so its action space is known once it is built, as the first's is.
    assert build_config({}, {"env": "object:Bandit#2", "algo": "sac"}).env == "object:Bandit#2"


@pytest.mark.parametrize("items,said", [
    (("algo=dqn", "total_timesteps=2000"),
     "rltui: learning_starts: gradient steps start once the replay buffer holds 10,000 transitions, and this run "
     "trains 2,000 env steps: it learns nothing (lower learning_starts, live too, or raise total_timesteps)\n"),
    # A full buffer starts them whatever learning_starts says.
    (("algo=dqn", "total_timesteps=2000", "buffer_size=1000"), ""),
    (("algo=dqn", "total_timesteps=20000"), ""),
    (("algo=ppo", "total_timesteps=2048"), ""),
])
def test_a_replay_run_too_short_to_learn_is_said_at_launch(items, said, monkeypatch, capsys):
    import rltui.commands.launch
    from rltui.cli import main

    monkeypatch.setattr(rltui.commands.launch, "launch",
                        lambda args, spec=None: rltui.commands.launch.say(
                            rltui.commands.launch._config_and_resume(args).notices) or 0)
    assert main(["launch", "--no-ui", "--no-preset", *(a for item in items for a in ("--set", item))]) == 0
    assert capsys.readouterr().err == said


@pytest.mark.parametrize("item,message", [
    ("buffer_size=true", "buffer_size: expected an integer, got true"),
    ("lr=false", "lr: expected a number > 0, got false"),
    ("hidden_sizes=[64,true]", "hidden_sizes: expected a list of positive integers up to 2147483647, like [64, 64], "
                               "got [64, true]"),
])
def test_a_switch_given_for_a_number_is_quoted_as_it_was_typed(item, message):
    with pytest.raises(ConfigError) as excinfo:
        from_set("algo=dqn", item)
    assert str(excinfo.value) == message
