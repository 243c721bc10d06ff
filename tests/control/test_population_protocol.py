"""A population over the control socket: the member commands (set_hparams for chosen members,
freeze, clone) both ways, their refusals word for word, the population table a snapshot
carries and the attached client's reading of it, and the commands through a real server."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import socket

import pytest

from rltui.control import protocol, protocol_population, session_messages
from rltui.control.protocol import ProtocolError
from rltui.control.remote import RemoteSession
from rltui.control.server import ControlServer
from rltui.session import SessionListener, SessionState
from rltui.session.command_json import command_from_message, command_message, command_name
from rltui.session.commands import CloneMember, FreezeMembers, Pause, SetHParams
from rltui.session.distributed import decode_row, encode_row
from rltui.session.population import MemberState, PBTPolicy, Population
from trainers.hparams import DynamicHParams

from control_client import LineClient, wait_for
from fakes import FakeSession

TIMEOUT = 10.0


# --- commands -------------------------------------------------------------------------------
COMMANDS = [
    (SetHParams({"lr": 1e-3}, members=(0, 2)),
     {"command": "set_hparams", "changes": {"lr": 1e-3}, "members": [0, 2]}),
    (SetHParams({"ent_coef": 0.02}), {"command": "set_hparams", "changes": {"ent_coef": 0.02}}),
    (FreezeMembers((1, 3)), {"command": "freeze", "members": [1, 3], "frozen": True}),
    (FreezeMembers((1,), frozen=False), {"command": "freeze", "members": [1], "frozen": False}),
    (CloneMember(0, (1, 2), 1.25), {"command": "clone", "source": 0, "targets": [1, 2], "factor": 1.25}),
    (CloneMember(3, (0,)), {"command": "clone", "source": 3, "targets": [0], "factor": 1.0}),
]


@pytest.mark.parametrize("command, fields", COMMANDS, ids=range(len(COMMANDS)))
def test_each_member_command_round_trips(command, fields):
    message = {"type": "command", **fields}
    assert command_message(command) == message
    assert command_name(command) == fields["command"]
    # as a client's line: what the server reads is the command that was sent
    request = protocol.parse_request(protocol.encode({**command_message(command), "id": 7}))
    assert request == protocol.Request(7, "command", command)
    assert command_message(command_from_message(message)) == message


def test_optional_fields_take_their_defaults():
    assert command_from_message({"command": "freeze", "members": [2]}) == FreezeMembers((2,), True)
    assert command_from_message({"command": "clone", "source": 1, "targets": [0]}) == CloneMember(1, (0,), 1.0)
    assert command_from_message(
        {"command": "set_hparams", "changes": {"lr": 1e-3}, "members": None}) == SetHParams({"lr": 1e-3})


def test_member_commands_cross_processes_as_the_protocol_encodes_them():
    # A multi-process run hands each boundary's commands to the other processes in the
    # protocol's encoding: members and factors must arrive, not vanish or fail there.
    sent = [command for command, _ in COMMANDS]
    commands, chunk_size, stop = decode_row(encode_row(sent, 8, False))
    assert commands == sent and chunk_size == 8 and not stop


INDEX = "a member index (an integer from 0 to 4095)"
REFUSED = [
    ({"command": "set_hparams", "changes": {"lr": 1e-3}, "members": 2},
     'set_hparams: "members": expected a list of member indices, got 2'),
    ({"command": "set_hparams", "changes": {"lr": 1e-3}, "members": "0,1"},
     "set_hparams: \"members\": expected a list of member indices, got '0,1'"),
    ({"command": "set_hparams", "changes": {"lr": 1e-3}, "members": [0, -1]},
     f'set_hparams: "members": expected {INDEX}, got -1'),
    ({"command": "freeze", "members": {"0": 1}}, 'freeze: "members": expected a list of member indices, got an object'),
    ({"command": "freeze", "members": [-3]}, f'freeze: "members": expected {INDEX}, got -3'),
    ({"command": "freeze", "members": [True]}, f'freeze: "members": expected {INDEX}, got true'),
    ({"command": "freeze", "members": [1.0]}, f'freeze: "members": expected {INDEX}, got 1.0'),
    ({"command": "freeze", "members": [4096]}, f'freeze: "members": expected {INDEX}, got 4096'),
    ({"command": "freeze", "members": [[0]]}, f'freeze: "members": expected {INDEX}, got a list'),
    ({"command": "freeze", "members": []}, 'freeze: "members": expected 1 to 4096 member indices, got 0'),
    ({"command": "freeze", "members": [0] * 4097}, 'freeze: "members": expected 1 to 4096 member indices, got 4097'),
    ({"command": "freeze"}, 'freeze needs "members": a list of member indices'),
    ({"command": "freeze", "members": [0], "frozen": "yes"}, "freeze: \"frozen\": expected true or false, got 'yes'"),
    ({"command": "freeze", "members": [0], "frozen": 1}, 'freeze: "frozen": expected true or false, got 1'),
    ({"command": "clone", "source": 0, "targets": [1], "factor": 0},
     'clone: "factor": expected a positive finite number, got 0'),
    ({"command": "clone", "source": 0, "targets": [1], "factor": -1.5},
     'clone: "factor": expected a positive finite number, got -1.5'),
    ({"command": "clone", "source": 0, "targets": [1], "factor": 10**400},
     'clone: "factor": expected a positive finite number, got an integer of 401 digits'),
    ({"command": "clone", "source": 0, "targets": [1], "factor": "2"},
     "clone: \"factor\": expected a positive finite number, got '2'"),
    ({"command": "clone", "source": 0, "targets": [1], "factor": True},
     'clone: "factor": expected a positive finite number, got true'),
    ({"command": "clone", "source": 0},
     'clone needs "source" (a member index) and "targets" (a list of member indices)'),
    ({"command": "clone", "targets": [1]},
     'clone needs "source" (a member index) and "targets" (a list of member indices)'),
    ({"command": "clone", "source": 0, "targets": []}, 'clone: "targets": expected 1 to 4096 member indices, got 0'),
    ({"command": "clone", "source": 0, "targets": 1}, 'clone: "targets": expected a list of member indices, got 1'),
    ({"command": "clone", "source": "0", "targets": [1]}, f"clone: \"source\": expected {INDEX}, got '0'"),
    ({"command": "clone", "source": -1, "targets": [1]}, f'clone: "source": expected {INDEX}, got -1'),
    ({"command": "clone", "source": 10**400, "targets": [1]},
     f'clone: "source": expected {INDEX}, got an integer of 401 digits'),
]


@pytest.mark.parametrize("fields, expected", REFUSED, ids=range(len(REFUSED)))
def test_a_malformed_member_command_is_refused_with_one_line(fields, expected):
    line = (json.dumps({"type": "command", "id": "x", **fields}) + "\n").encode()
    with pytest.raises(ProtocolError) as caught:
        protocol.parse_request(line)
    assert str(caught.value) == expected
    assert caught.value.request_id == "x"  # the reply says which request it refuses


def test_a_nan_factor_is_refused_where_strict_json_does_not_stop_it():
    # The line reader refuses NaN as JSON; a command decoded elsewhere (another process's
    # row) is read by the same function, which refuses it too.
    with pytest.raises(ProtocolError) as caught:
        command_from_message({"command": "clone", "source": 0, "targets": [1], "factor": math.nan})
    assert str(caught.value) == 'clone: "factor": expected a positive finite number, got nan'
    with pytest.raises(ProtocolError) as caught:  # a float too large for a float: JSON reads it as inf
        protocol.parse_request(b'{"type": "command", "command": "clone", "source": 0, "targets": [1], "factor": 1e400}')
    assert str(caught.value) == 'clone: "factor": expected a positive finite number, got inf'
    with pytest.raises(ProtocolError, match="NaN is not a JSON number"):
        protocol.parse_request(b'{"type": "command", "command": "clone", "source": 0, "targets": [1], "factor": NaN}')


def test_an_unknown_command_lists_the_member_commands():
    with pytest.raises(ProtocolError) as caught:
        command_from_message({"command": "thaw"})
    assert str(caught.value) == (
        "unknown command 'thaw'; known: pause, resume, save, rollback, stop, set_hparams, freeze, clone")


# --- the population table in snapshots ---------------------------------------------------------
def population_view():
    """A real population's view after returns, a freeze, a clone and an evaluation."""
    population = Population(DynamicHParams.create(anneal_updates=100.0),
                            [{"lr": 1e-4}, {"lr": 1e-3}, {"lr": 3e-3}, {"lr": 1e-2}], num_seeds=2,
                            pbt=PBTPolicy(every_updates=20))
    for step in range(5):
        population.observe([10.0 + step, 20.0 / 3 + step, math.nan, 1.0 / 7])
    population.observe_eval([30.0, 32.0, 1.0, 2.0, math.nan, math.nan, 5.0, 5.0])
    population.set_frozen([2], True)
    population.clone(1, [3], 0.8)
    population.set_values({"ent_coef": 0.05}, [0])
    return population.view()


def snapshot_with(view, update=4):
    fake = FakeSession(total_updates=100)
    return dataclasses.replace(fake.advance(update), population=view)


def assert_same_view(got, view):
    assert got.keys == view.keys == ("lr", "ent_coef")
    assert (got.num_seeds, got.pbt_every_updates) == (2, 20)
    assert len(got.members) == len(view.members) == 4
    for mine, theirs in zip(got.members, view.members):
        assert mine.index == theirs.index and mine.state is theirs.state and mine.parent == theirs.parent
        assert dict(mine.values) == pytest.approx(dict(theirs.values), rel=1e-12)
        for field in ("latest_return", "best_return", "eval_return"):
            want = getattr(theirs, field)
            assert getattr(mine, field) == (None if want is None else pytest.approx(want, rel=1e-12)), field
        assert mine.trend == pytest.approx(theirs.trend, rel=1e-5)


def test_the_population_view_round_trips_through_a_snapshot_line():
    view = population_view()
    assert [m.state for m in view.members] == [MemberState.TRAINING, MemberState.TRAINING, MemberState.FROZEN,
                                               MemberState.TRAINING]
    head = session_messages.snapshot_head(snapshot_with(view))
    message = protocol.decode(session_messages.snapshot_line(head, []))
    table = message["population"]
    assert table["keys"] == ["lr", "ent_coef"] and table["members"][3]["parent"] == 1
    assert table["members"][2]["latest_return"] is None  # never finished an episode: null, not NaN
    assert_same_view(protocol_population.population_from_json(table), view)


def test_one_agent_s_snapshot_has_no_population_field():
    head = session_messages.snapshot_head(snapshot_with(None))
    assert "population" not in head
    assert protocol_population.population_from_json(None) is None


def _broken(change):
    table = json.loads(json.dumps(protocol_population.population_json(population_view())))
    change(table)
    return table


MALFORMED = [
    ([1, 2], "population: expected an object, got a list"),
    (_broken(lambda t: t.pop("keys")), 'population: the table: missing "keys"'),
    (_broken(lambda t: t.update(keys=["lr", "num_envs"])),
     "population: keys: expected distinct traced hyperparameters, got a list"),
    (_broken(lambda t: t.update(keys="lr")),
     f"population: keys: expected a list of at most {len(DynamicHParams._fields)} items, got 'lr'"),
    (_broken(lambda t: t.update(num_seeds=0)), "population: num_seeds: expected an integer from 1 to 4096, got 0"),
    (_broken(lambda t: t.update(members=t["members"][:1])), "population: members: expected at least 2, got 1"),
    (_broken(lambda t: t["members"].__setitem__(1, "x")), "population: member 1: expected an object, got 'x'"),
    (_broken(lambda t: t["members"][0].pop("state")), 'population: member 0: missing "state"'),
    (_broken(lambda t: t["members"][0].update(state="asleep")),
     "population: member 0: unknown state 'asleep'; known: training, frozen, diverged"),
    (_broken(lambda t: t["members"][1].update(values=[1e-3])), "population: member 1: 1 values for 2 keys"),
    (_broken(lambda t: t["members"][1].update(values=[1e-3, "x"])),
     "population: member 1: ent_coef: expected a finite number, got 'x'"),
    (_broken(lambda t: t["members"][1].update(values=[None, 0.0])),
     "population: member 1: lr: expected a finite number, got null"),
    (_broken(lambda t: t["members"][0].update(best_return="high")),
     "population: member 0: best_return: expected a finite number, got 'high'"),
    (_broken(lambda t: t["members"][0].update(trend=[1.0] * 33)),
     "population: member 0: trend: expected a list of at most 32 items, got a list"),
    (_broken(lambda t: t["members"][0].update(trend=[1.0, [2.0]])),
     "population: member 0: trend: expected a finite number, got a list"),
    (_broken(lambda t: t["members"][3].update(parent=4)),
     "population: member 3: parent: expected an integer from 0 to 3, got 4"),
    (_broken(lambda t: t["members"][3].update(parent=True)),
     "population: member 3: parent: expected an integer from 0 to 3, got true"),
]


@pytest.mark.parametrize("table, expected", MALFORMED, ids=range(len(MALFORMED)))
def test_a_malformed_population_table_is_a_protocol_error(table, expected):
    with pytest.raises(ProtocolError) as caught:
        protocol_population.population_from_json(table)
    assert str(caught.value) == expected


# --- through a real control server -------------------------------------------------------------
class PopulationFake(FakeSession):
    """The fake session, its snapshots carrying `population` as a population run's do."""

    population = None

    def add_listener(self, listener) -> None:
        super().add_listener(_WithPopulation(self, listener))

    def remove_listener(self, listener) -> None:
        self._listeners = [known for known in self._listeners if known.inner is not listener]


@dataclasses.dataclass
class _WithPopulation(SessionListener):
    fake: PopulationFake
    inner: SessionListener

    def on_state(self, state, message):
        self.inner.on_state(state, message)

    def on_event(self, event):
        self.inner.on_event(event)

    def on_metrics(self, snapshot):
        self.inner.on_metrics(dataclasses.replace(snapshot, population=self.fake.population))


@contextlib.contextmanager
def served_population(run_dir, population):
    fake = PopulationFake(total_updates=100)
    fake.population = population
    server = ControlServer(fake, run_dir, config={"env": "CartPole-v1", "sweep": {"lr": [1e-4, 1e-3]}})
    server.start()
    fake.start()
    try:
        yield fake, server
    finally:
        fake.stop()
        fake.join(TIMEOUT)
        server.close()


def test_a_freeze_sent_to_the_socket_reaches_the_session_as_freeze_members(tmp_path):
    with served_population(tmp_path, population_view()) as (fake, server):
        client = LineClient(server.path)
        client.until(lambda m: m.get("state") == "running")
        client.send({"type": "command", "command": "freeze", "members": [1, 3], "id": 1})
        assert client.reply() == {"type": "ok", "id": 1, "command": "freeze"}
        wait_for(lambda: fake.commands)
        assert fake.commands == [FreezeMembers((1, 3), True)]
        client.close()


def test_member_commands_are_checked_against_the_run_s_members(tmp_path):
    with served_population(tmp_path, population_view()) as (fake, server):
        fake.on_thread(fake.advance, 3)  # the server now knows the population's size
        client = LineClient(server.path)
        assert client.until(lambda m: m["type"] == "snapshot")["population"]["num_seeds"] == 2
        sent = [
            ({"command": "clone", "source": 0, "targets": [2, 3], "factor": 1.25}, CloneMember(0, (2, 3), 1.25)),
            ({"command": "set_hparams", "changes": {"lr": 1e-3}, "members": [3]}, SetHParams({"lr": 1e-3}, (3,))),
            ({"command": "freeze", "members": [2], "frozen": False}, FreezeMembers((2,), False)),
        ]
        for number, (fields, _) in enumerate(sent):
            client.send({"type": "command", "id": number, **fields})
            assert client.reply() == {"type": "ok", "id": number, "command": fields["command"]}
        client.send({"type": "command", "command": "freeze", "members": [0, 4], "id": "far"})
        assert client.reply() == {"type": "error", "id": "far",
                                  "error": "freeze: member 4: expected a member index from 0 to 3"}
        client.send({"type": "command", "command": "clone", "source": 7, "targets": [0], "id": "src"})
        assert client.reply()["error"] == "clone: member 7: expected a member index from 0 to 3"
        wait_for(lambda: len(fake.commands) == len(sent))
        assert fake.commands == [command for _, command in sent]
        client.close()


def test_member_commands_to_a_run_that_is_not_a_population_are_refused(tmp_path):
    with served_population(tmp_path, None) as (fake, server):
        fake.on_thread(fake.advance, 2)
        client = LineClient(server.path)
        snapshot = client.until(lambda m: m["type"] == "snapshot")
        assert "population" not in snapshot
        client.send({"type": "command", "command": "freeze", "members": [0], "id": 1})
        assert client.reply()["error"] == "freeze: this run is not a population; it has no members to choose"
        client.send({"type": "command", "command": "set_hparams", "changes": {"lr": 1e-3}, "members": [0], "id": 2})
        assert client.reply()["error"] == "set_hparams: this run is not a population; it has no members to choose"
        client.send({"type": "command", "command": "set_hparams", "changes": {"lr": 1e-3}, "id": 3})
        assert client.reply()["type"] == "ok"  # the whole run's edit, as always
        wait_for(lambda: fake.commands)
        assert fake.commands == [SetHParams({"lr": 1e-3})]
        client.close()


class Recorder(SessionListener):
    def __init__(self):
        self.snapshots, self.events = [], []

    def on_metrics(self, snapshot):
        self.snapshots.append(snapshot)

    def on_event(self, event):
        self.events.append(event)


def test_an_attached_client_sees_the_population_and_steers_it(tmp_path):
    view = population_view()
    with served_population(tmp_path, view) as (fake, _):
        fake.on_thread(fake.advance, 5)
        remote = RemoteSession.connect(tmp_path)
        listener = Recorder()
        remote.add_listener(listener)
        wait_for(lambda: listener.snapshots and listener.snapshots[-1].update == 5)
        assert_same_view(listener.snapshots[-1].population, view)
        remote.submit(FreezeMembers((2,)))
        remote.submit(CloneMember(1, (0, 3), 0.8))
        remote.submit(SetHParams({"gamma": 0.98}, members=(1,)))
        remote.submit(Pause())
        wait_for(lambda: len(fake.commands) == 4)
        assert fake.commands == [FreezeMembers((2,)), CloneMember(1, (0, 3), 0.8),
                                 SetHParams({"gamma": 0.98}, (1,)), Pause()]
        assert not [e for e in listener.events if e.kind == "warning"]  # each was accepted
        fake.on_thread(fake.advance, 1)
        wait_for(lambda: listener.snapshots[-1].update == 6)
        assert listener.snapshots[-1].population is not None
        remote.close()


def test_an_edit_of_some_members_leaves_the_attached_run_s_own_values(tmp_path):
    with served_population(tmp_path, population_view()) as (fake, _):
        fake.on_thread(fake.advance, 1)
        remote = RemoteSession.connect(tmp_path)
        listener = Recorder()
        remote.add_listener(listener)
        wait_for(lambda: listener.snapshots)
        before = float(remote.hparams.lr)
        fake.on_thread(fake.event, "hparams", "set lr -> 0.01 for member 1", changes={"lr": 0.01}, members=[1])
        fake.on_thread(fake.event, "hparams", "set gamma -> 0.9 for every member", changes={"gamma": 0.9},
                       members=[0, 1, 2, 3])
        wait_for(lambda: len([e for e in listener.events if e.kind == "hparams"]) == 2)
        assert float(remote.hparams.lr) == pytest.approx(before)
        assert float(remote.hparams.gamma) == pytest.approx(0.9)
        remote.close()


def test_a_run_sending_a_malformed_population_table_costs_the_table_not_the_records():
    ours, theirs = socket.socketpair()
    remote = RemoteSession(ours, ours.makefile("rb"), {"type": "hello", "protocol": 1, "state": "running"})
    try:
        listener = Recorder()
        remote.add_listener(listener)
        head = session_messages.snapshot_head(snapshot_with(population_view(), update=2))
        records = [session_messages.encode_record(r) for r in snapshot_with(None, update=2).new_records]
        bad = {**head, "population": {**head["population"], "num_seeds": -1}}
        theirs.sendall(session_messages.snapshot_line(bad, records))
        theirs.sendall(session_messages.snapshot_line({**bad, "update": 3}, []))
        theirs.sendall(session_messages.snapshot_line({**head, "update": 4}, []))
        wait_for(lambda: len(listener.snapshots) == 3)
        first, second, third = listener.snapshots
        assert first.population is None and [r.update for r in first.new_records] == [1, 2]
        assert second.population is None and third.population is not None
        warnings = [e.message for e in listener.events if e.kind == "warning"]
        assert warnings == ["the run sent a population table this rltui cannot read "
                            "(population: num_seeds: expected an integer from 1 to 4096, got -1)"]
        assert remote.state is SessionState.RUNNING
    finally:
        theirs.close()
        remote.close()
