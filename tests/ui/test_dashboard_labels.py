"""The dashboard says which value is which where two of one thing show: the configured
learning rate (the hyperparameters panel, the editor) and the rate in use after annealing
(the metrics panel's "lr now")."""

from __future__ import annotations

from test_ui import run_scenario, until

from rltui.config.build import RunConfig
from rltui.ui.widgets.hparams import annealed, learned_instead

from fakes import FakeSession


def line_of(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.split()[:1] == [name])


async def test_the_configured_and_the_annealed_lr_are_labelled_as_such(tmp_path):
    fake = FakeSession()  # anneal_lr on, as by default; its lr metric goes down from 2.5e-4

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 40)
        await until(pilot, lambda: app.latest is not None and app.latest.update == 40)
        await pilot.pause()
        sparkline = app.dashboard.query_one("#spark-lr")
        assert str(sparkline.query_one(".metric-name").content) == "lr now"
        assert sparkline.stats_text.startswith("2.4e-4 ")  # 2.5e-4 x (1 - 40/1000)
        panel = str(app.dashboard.hparams_panel.query_one("#hp-dynamic").content)
        assert line_of(panel, "lr").split()[1:] == ["2.5e-4", "(start)"]
        await pilot.press("e")
        editor = app.screen
        assert editor.field == "lr"
        assert str(editor.query_one("#editor-rule").content).endswith("(configured 2.5e-4: annealing starts there)")

    await run_scenario(fake, tmp_path, scenario, size=(120, 40), config=RunConfig())


def test_without_annealing_the_configured_lr_is_the_rate_in_use():
    assert not annealed("lr", {"anneal_lr": 0.0, "lr": 2.5e-4})
    assert annealed("lr", {"anneal_lr": 1.0}) and not annealed("gamma", {"anneal_lr": 1.0})


async def test_sacs_alpha_is_marked_as_learned_while_autotune_is_on(tmp_path):
    fake = FakeSession()  # autotune on, as by default

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 4)
        await until(pilot, lambda: app.latest is not None and app.latest.update == 4)
        await pilot.pause()
        panel = str(app.dashboard.hparams_panel.query_one("#hp-dynamic").content)
        assert line_of(panel, "alpha").split()[1:] == ["0.2", "(autotune:", "learned)"]
        assert line_of(panel, "autotune").split()[1:] == ["true"]
        # The editor and the edit's notification say that the value waits for autotune off.
        await pilot.press("e")
        editor = app.screen
        editor._select_field("alpha")
        assert str(editor.query_one("#editor-rule").content).endswith("(now 0.2: set aside while autotune learns it)")
        await pilot.press(*"0.1", "enter")
        await pilot.pause()
        assert [n.message for n in app._notifications][-1] == (
            "alpha → 0.1 (used once autotune is off) at the next chunk boundary")

    await run_scenario(fake, tmp_path, scenario, size=(120, 40), config=RunConfig(algo="sac", env="Pendulum-v1"))
    assert not learned_instead("alpha", {"autotune": 0.0, "alpha": 0.2})


async def test_the_metric_picker_fits_an_80_column_terminal(tmp_path):
    # SAC's metric titles include the longest (the largest |reward| ... after reward_scale).
    fake = FakeSession()

    async def scenario(app, pilot):
        fake.on_thread(fake.advance, 4)
        await until(pilot, lambda: app.latest is not None and app.latest.update == 4)
        await pilot.press("m")
        await pilot.pause()
        box = app.screen.query_one("Vertical").region
        assert box.x >= 0 and box.right <= 80, box

    await run_scenario(fake, tmp_path, scenario, size=(80, 24), config=RunConfig(algo="sac", env="Pendulum-v1"))
