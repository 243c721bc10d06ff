"""The hyperparameters panel: live values of the dynamic ones (and edits not applied
yet), then the static configuration, dimmed: changing it means a new run."""

from __future__ import annotations

from collections.abc import Mapping

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Label, Static

from rltui.config.build import RunConfig
from rltui.config.keys import KEYS, POPULATION_KEYS
from rltui.formatting import fmt_hparam
from trainers.hparams import ALGO_HPARAMS


def _static_value(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def annealed(name: str, values: Mapping[str, float]) -> bool:
    """Whether `name`'s configured value is only where an annealing starts: the lr with
    anneal_lr on, whose rate in use the metrics panel shows as "lr now"."""
    return name == "lr" and values.get("anneal_lr", 0.0) > 0


def learned_instead(name: str, values: Mapping[str, float]) -> bool:
    """Whether `name`'s configured value is set aside while training learns the quantity:
    SAC's alpha with autotune on, whose learned value the metrics panel shows as α."""
    return name == "alpha" and values.get("autotune", 0.0) > 0


class HParamsPanel(VerticalScroll):
    # Compared by content: every snapshot carries the values, they rarely change.
    values: reactive[Mapping[str, float]] = reactive(dict)
    pending: reactive[Mapping[str, float]] = reactive(dict)
    # A population: the keys whose values differ between members (shown in the leaderboard).
    per_member: reactive[tuple[str, ...]] = reactive(tuple)
    # "discrete" or "continuous" once the run's env is built: static keys of the other kind go.
    actions: reactive[str | None] = reactive(None)

    def __init__(self, config: RunConfig, **kwargs):
        super().__init__(**kwargs)
        self.config = config
        self.fields = ALGO_HPARAMS[config.algo]  # the live-editable keys of the run's algorithm

    def compose(self) -> ComposeResult:
        # One line per field from the start: later updates skip the layout pass.
        yield Static("\n".join(self.fields), id="hp-dynamic", markup=False)
        yield Label("static: restart to change", id="hp-static-title")
        yield Static(self._static_text(), id="hp-static", markup=False)

    def _static_text(self) -> str:
        # Long names (checkpoint_every_updates) run over rather than push every value right.
        width = min(16, max(len(k) for k in KEYS))
        return "\n".join(
            f"{key:<{width}} {_static_value(getattr(self.config, key))}"
            for key, info in KEYS.items()
            if not info.live and info.matters_for(self.config.algo, self.actions)
            and (self.config.sweep or key not in POPULATION_KEYS)
        )

    def watch_actions(self) -> None:
        if self.is_mounted:
            self.query_one("#hp-static", Static).update(self._static_text())

    def on_mount(self) -> None:
        self.border_title = "hyperparameters (e: edit)"
        self._show()

    def watch_values(self) -> None:
        self._show()

    def watch_pending(self) -> None:
        self._show()

    def watch_per_member(self) -> None:
        self._show()

    def _show(self) -> None:
        if not self.is_mounted:
            return
        width = max(len(k) for k in self.fields)
        lines = []
        for name in self.fields:
            value = "per member" if name in self.per_member else fmt_hparam(name, self.values.get(name))
            if annealed(name, self.values) and name not in self.per_member:
                value += " (start)"  # the rate in use is the metrics' "lr now"
            if learned_instead(name, self.values):
                value += " (autotune: learned)"  # the temperature in use is the metrics' α
            line = f"{name:<{width}} {value}"
            if name in self.pending and self.pending[name] != self.values.get(name):
                line += f" → {fmt_hparam(name, self.pending[name])} (next chunk)"
            lines.append(line)
        # Always one line per field: no layout pass needed (it would re-render every panel).
        self.query_one("#hp-dynamic", Static).update("\n".join(lines), layout=False)
