"""What a run says of itself in words, headless and after the dashboard closes: its latest
return (a population's best member's too), the members at the end, the summary line, the
latest checkpoint on disk, and the command that trains it on."""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from rltui.formatting import fmt_duration
from rltui.runfiles.checkpoints import CheckpointStore, checkpoint_update
from rltui.runfiles.names import CONFIG


def _fmt_return(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def return_text(snapshot) -> str:
    """The latest mean return, as both clients show it. With several seeds: the mean of each
    seed's latest return, saying over how many seeds (those that have finished an episode)."""
    if snapshot.population is not None:
        return population_return_text(snapshot.population)
    seeds = len(snapshot.seed_returns)
    if seeds <= 1:
        return _fmt_return(snapshot.latest_return)
    latest = [value for value in snapshot.seed_latest_returns if value is not None]
    if not latest:
        return "—"
    of = f"{len(latest)}" if len(latest) == seeds else f"{len(latest)} of {seeds}"
    return f"{sum(latest) / len(latest):.1f} (mean of {of} seeds)"


def population_return_text(view) -> str:
    """A population's latest returns: the best member's, and the mean over members."""
    latest = [(m.latest_return, m.index) for m in view.members if m.latest_return is not None]
    if not latest:
        return "—"
    best, index = max(latest, key=lambda pair: (pair[0], -pair[1]))  # a tie: the lowest index, as info says
    mean = sum(value for value, _ in latest) / len(latest)
    return f"{mean:.1f} (mean of {len(latest)} members; best {best:.1f}, member {index})"


def population_lines(view) -> list[str]:
    """One line per member, for the end of a run: its values, state and returns."""
    width = max(len(_member_values(view, m)) for m in view.members)
    lines = []
    for m in sorted(view.members, key=lambda m: -math.inf if m.latest_return is None else m.latest_return,
                    reverse=True):
        state = "" if m.state.value == "training" else f"  ({m.state.value})"
        evaluation = "" if m.eval_return is None else f"  eval {m.eval_return:.1f}"
        parent = "" if m.parent is None else f"  from member {m.parent}"
        lines.append(f"  member {m.index:>3}  {_member_values(view, m):<{width}}  latest {_fmt_return(m.latest_return)}"
                     f"  best {_fmt_return(m.best_return)}{evaluation}{parent}{state}")
    return lines


def _member_values(view, member) -> str:
    return " ".join(f"{k}={member.values[k]:.4g}" for k in view.keys)


def _fmt_eta(seconds: float | None) -> str:
    return fmt_duration(seconds, hours=True)


def latest_checkpoint_text(run_dir: Path | str) -> str:
    latest = CheckpointStore.for_run(Path(run_dir)).latest()
    if latest is None:
        return "the run holds no checkpoint"
    return f"the latest checkpoint is from update {checkpoint_update(latest):,}"


def continue_line(run_dir: Path | str, env_steps: int, reached_total: bool, env: str = "", *,
                  diverged: bool = False, lr: float | None = None, total_env_steps: int = 0) -> str:
    """How to train on from where a run ended, as a command that works as printed: a finished
    run needs a larger total; a diverged one would diverge again from its checkpoint (same
    seed, same program), so it goes on with half its learning rate `lr`, to the total it was
    training to (`total_env_steps`: its checkpoint, older, may hold a smaller one); a run
    without a checkpoint starts again from its config.toml. A run on an env object handed to the Python
    API (`env` an `object:` id) goes on from Python, the env handed over again: no other
    process can build it, so `--resume` could not."""
    import json

    from trainers.env_import import is_object_id

    run_dir = Path(run_dir)
    latest = CheckpointStore.for_run(run_dir).latest()
    lower = f"{lr / 2:.3g}" if diverged and lr is not None else None
    larger = 2 * max(env_steps, 1)
    if is_object_id(env):
        shown = json.dumps(str(run_dir), ensure_ascii=False)
        if latest is None:
            return f"{_no_checkpoint(diverged)}: train again with rltui.train(env=<your env>, ...)"
        if lower is not None:
            return f"To go on from update {checkpoint_update(latest):,}, at half the learning rate: " \
                   f"rltui.train(env=<your env>, resume={shown}, lr={lower}, total_timesteps={total_env_steps})"
        if reached_total:
            return f"To train on: rltui.train(env=<your env>, resume={shown}, total_timesteps={larger})"
        return f"To go on: rltui.train(env=<your env>, resume={shown})"
    quoted = shlex.quote(str(run_dir))
    lr_set = f" --set lr={lower}" if lower is not None else ""
    if latest is None:
        config = shlex.quote(str(run_dir / CONFIG))
        half = " at half the learning rate" if lower is not None else ""
        return f"{_no_checkpoint(diverged)}; to start again{half}: rltui launch --config {config}{lr_set}"
    resume = f"rltui launch --resume {quoted}"
    if lower is not None:
        return (f"To go on from update {checkpoint_update(latest):,}, at half the learning rate: {resume}{lr_set} "
                f"--set total_timesteps={total_env_steps}")
    if reached_total:
        return f"To train on: {resume} --set total_timesteps={larger}"
    return f"To go on: {resume}"


def _no_checkpoint(diverged: bool) -> str:
    return "It diverged before its first checkpoint" if diverged else "The run holds no checkpoint to go on from"


def summary_line(verb: str, updates: int, env_steps: int, latest_return: str) -> str:
    """How a run that ended is summed up, here and by the dashboard on exit;
    `latest_return` as `return_text` gives it."""
    noun = "update" if updates == 1 else "updates"
    return f"{verb} after {updates:,} {noun} ({env_steps:,} env steps), latest mean return {latest_return}."


def checkpoint_failure_line(verb: str, updates: int, failure) -> str:
    """How a run whose final checkpoint failed ends, here and in the dashboard's exit line;
    `failure` a session's CheckpointFailure."""
    noun = "update" if updates == 1 else "updates"
    return (f"{verb} after {updates:,} {noun}, but the final checkpoint failed ({failure.reason}); "
            f"{failure.on_disk}.")
