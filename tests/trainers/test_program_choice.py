"""The chunk program is built both ways on a CPU, timed, and the faster kept (trainers/program_choice.py)."""

import jax
import numpy as np
import pytest

from trainers import program_choice
from trainers.hparams import DynamicHParams, StaticConfig

from helpers import TINY, build, count_compiles, host_metrics

DEFAULT, ALTERNATIVE = program_choice.DEFAULT.name, program_choice.ALTERNATIVE.name


class FakeMachine:
    """Programs are build names; running one advances a fake clock by its seconds per update."""

    def __init__(self, per_update: dict[str, float]):
        self.per_update = per_update
        self.now = 0.0
        self.compiled: list[str] = []
        self.runs: list[tuple[str, int]] = []

    def compile_build(self, build):
        self.compiled.append(build.name)
        return build.name

    def run(self, program, num_updates):
        self.runs.append((program, num_updates))
        self.now += self.per_update[program] * num_updates

    def choose(self, **kwargs):
        args = dict(max_updates=512, platform="cpu") | kwargs
        return program_choice.choose(self.compile_build, self.run, timer=lambda: self.now, **args)


@pytest.mark.parametrize(
    ("default_seconds", "alternative_seconds", "expected"),
    [(1e-3, 0.5e-3, ALTERNATIVE), (0.5e-3, 1e-3, DEFAULT), (1e-3, 0.99e-3, DEFAULT)],  # the last within the margin
)
def test_the_faster_build_is_kept_and_the_choice_is_the_same_every_time(default_seconds, alternative_seconds,
                                                                          expected):
    choices = []
    for _ in range(3):
        machine = FakeMachine({DEFAULT: default_seconds, ALTERNATIVE: alternative_seconds})
        program, choice = machine.choose()
        assert program == expected and choice.build.name == expected and not choice.skipped
        assert machine.compiled == [DEFAULT, ALTERNATIVE]
        choices.append(choice)
    assert choices[0] == choices[1] == choices[2]
    # each timed chunk holds about PROBE_SECONDS of work, and both builds were timed alike
    assert choices[0].probe_updates == int(program_choice.PROBE_SECONDS / default_seconds)
    timed = [run for run in machine.runs if run[1] == choices[0].probe_updates]
    assert [name for name, _ in timed] == [DEFAULT, ALTERNATIVE, ALTERNATIVE, DEFAULT]
    assert choices[0].per_update == pytest.approx({DEFAULT: default_seconds, ALTERNATIVE: alternative_seconds})
    # what it cost: every chunk it ran (the fake compile takes no time)
    assert choices[0].extra_seconds == pytest.approx(machine.now)


def test_timed_chunks_never_exceed_the_chunk_limit():
    machine = FakeMachine({DEFAULT: 1e-6, ALTERNATIVE: 1e-6})
    _, choice = machine.choose(max_updates=8)
    assert choice.probe_updates == 8


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        (dict(platform="gpu"), "not a CPU"),
        (dict(process_count=2), "several processes"),
        (dict(workers=1), "one XLA CPU worker"),
        (dict(samples_per_update=program_choice.MAX_SAMPLES), "samples per update"),
    ],
)
def test_no_second_compile_where_the_choice_cannot_matter(kwargs, reason):
    machine = FakeMachine({DEFAULT: 1e-3, ALTERNATIVE: 1e-6})
    program, choice = machine.choose(**kwargs)
    assert program == DEFAULT and choice.build == program_choice.DEFAULT
    assert machine.compiled == [DEFAULT] and machine.runs == []
    assert reason in choice.skipped and choice.extra_seconds == 0.0


def test_an_update_longer_than_a_timed_chunk_keeps_the_default_without_a_second_compile():
    machine = FakeMachine({DEFAULT: 2 * program_choice.PROBE_SECONDS, ALTERNATIVE: 1e-6})
    program, choice = machine.choose()
    assert program == DEFAULT and machine.compiled == [DEFAULT]
    assert "one update takes" in choice.skipped
    assert len(machine.runs) == 2  # a first call, then one timed update


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(tree))]


@pytest.mark.parametrize("kept", [DEFAULT, ALTERNATIVE])
def test_the_chosen_program_runs_every_later_chunk_without_compiling_and_trains_alike(monkeypatch, kept):
    # The margin forces the decision: 0 keeps the default whatever the timings, a huge one the other build.
    monkeypatch.setattr(program_choice, "MARGIN", 1e9 if kept == ALTERNATIVE else 0.0)
    monkeypatch.setattr(program_choice, "cpu_workers", None)
    static = StaticConfig(**TINY)
    parallel, state, hp = build(static, fresh=True)
    before = _leaves(state)
    parallel.compile(state, hp)
    assert parallel.choice.build.name == kept and not parallel.choice.skipped
    assert parallel.choice.extra_seconds > 0 and parallel.choice.probe_updates >= 1
    # compiling timed copies: the state is untouched
    for a, b in zip(before, _leaves(state)):
        np.testing.assert_array_equal(a, b)
    with count_compiles() as compiles:
        parallel.compile(state, hp)  # again: nothing to do
        state, first = parallel.run_chunk(state, hp, 3)
        state, second = parallel.run_chunk(state, hp.with_updates({"lr": 1e-3}), 2)
        jax.block_until_ready(state)
    assert compiles.count == 0

    # the same chunks through the pmapped function, never compiled ahead: the same results
    # (bit-exact on the same machine: both builds do the same arithmetic)
    plain, plain_state, _ = build(static, fresh=True)
    plain_state, plain_first = plain.run_chunk(plain_state, hp, 3)
    plain_state, plain_second = plain.run_chunk(plain_state, hp.with_updates({"lr": 1e-3}), 2)
    for a, b in zip(_leaves(state), _leaves(plain_state)):
        np.testing.assert_array_equal(a, b)
    for name, values in host_metrics(second).items():
        np.testing.assert_array_equal(values, host_metrics(plain_second)[name])


def test_a_population_runs_its_chosen_program_with_the_active_mask_and_after_a_clone(monkeypatch):
    monkeypatch.setattr(program_choice, "MARGIN", 1e9)
    monkeypatch.setattr(program_choice, "cpu_workers", None)
    base = DynamicHParams.create(anneal_updates=100)
    hp = DynamicHParams(**{name: np.full(2, value, np.float32) for name, value in base._asdict().items()})
    parallel, state, hp = build(StaticConfig(**{**TINY, "num_members": 2}), hp=hp, fresh=True)
    parallel.compile(state, hp)
    assert parallel.choice.build == program_choice.ALTERNATIVE
    active = np.array([True, False])
    before = _leaves(state.params)
    with count_compiles() as compiles:
        state, metrics = parallel.run_chunk(state, hp, 2, active)
        jax.block_until_ready(state)
    assert compiles.count == 0
    for a, b in zip(before, _leaves(state.params)):
        np.testing.assert_array_equal(a[:, 1], b[:, 1])  # the frozen agent
    assert metrics.healthy.tolist() == [True, True]
    cloned = parallel.clone(state, [1, 1])
    with count_compiles() as compiles:
        parallel.run_chunk(cloned, hp, 1)
    assert compiles.count == 0


def test_start_backend_tells_the_choice_the_pool_size(monkeypatch):
    from rltui import runtime

    monkeypatch.setattr(program_choice, "cpu_workers", None)
    workers = runtime.start_backend(0)  # the backend is already up in tests: this reports its pool
    assert program_choice.cpu_workers == workers >= 1


def test_arguments_unlike_the_compiled_ones_still_run(monkeypatch):
    monkeypatch.setattr(program_choice, "cpu_workers", 1)  # one compile, no timing
    parallel, state, hp = build(StaticConfig(**TINY), fresh=True)
    parallel.compile(state, hp)
    wide = hp._replace(lr=np.float64(1e-3))  # float64: not the float32 the program was compiled for
    state, metrics = parallel.run_chunk(state, wide, 2)
    assert int(np.max(metrics.num_updates)) == 2
