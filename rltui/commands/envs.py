"""`rltui envs`: the supported environments, their spaces and families, which algorithms have
settings for them, where the default algorithm's come from and what those reached here; and
the optional suites, installed or not."""

from __future__ import annotations

import argparse

from rltui.errors import ExitCode

TUNED_FOR = "tuned for"  # the column of the algorithms whose presets give the env settings


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "envs", help="list the supported environments", description="List the supported gymnax environments."
    )
    parser.set_defaults(run=cmd_envs)


def cmd_envs(args: argparse.Namespace) -> int:
    """`rltui envs`: every env id with its spaces, family, the algorithms with settings for it
    and the default algorithm's settings, then the optional suites."""
    from rltui.config import presets
    from trainers.algorithms import DEFAULT_ALGORITHM
    from trainers.envs import SUPPORTED_ENVS, make_env

    tuned = {env_id: ", ".join(algorithms_with_settings(env_id)) or "-" for env_id in SUPPORTED_ENVS}
    tuned_width = max(len(TUNED_FOR), *map(len, tuned.values())) + 1  # a space before the settings at least
    print(f"{'env':<26} {'observation':<14} {'actions':<32} {'family':<11} {TUNED_FOR:<{tuned_width}} "
          f"settings ({DEFAULT_ALGORITHM})")
    for env_id in SUPPORTED_ENVS:
        spec = make_env(env_id)
        shape = "x".join(str(d) for d in spec.obs_shape)
        if spec.discrete:
            actions = f"discrete ({spec.num_actions})"
        else:
            low, high = float(spec.action_low.min()), float(spec.action_high.max())
            actions = f"continuous ({spec.num_actions}-dim, [{low:g}, {high:g}])"
        family = presets.family_of(env_id)
        summary = _preset_summary(presets.has_preset(DEFAULT_ALGORITHM, env_id),
                                  presets.result(DEFAULT_ALGORITHM, env_id), family)
        print(f"{env_id:<26} {shape:<14} {actions:<32} {family or '-':<11} {tuned[env_id]:<{tuned_width}} {summary}")
    _print_suites()
    return ExitCode.OK


def algorithms_with_settings(env: str) -> list[str]:
    """The algorithms whose presets give `env` settings: a preset of its own, or a family
    table for its family (an empty one too: it says the algorithm's defaults are that
    family's settings)."""
    from rltui.config import presets
    from trainers.algorithms import ALGORITHMS

    family = presets.family_of(env)
    return [algo for algo in ALGORITHMS if presets.has_preset(algo, env) or family in presets.families(algo)]


def _print_suites() -> None:
    """Each optional suite: every env it offers when installed (ids with its prefix), else
    the extra that brings it."""
    from importlib import metadata

    from trainers import suites

    for suite in suites.SUITES.values():
        print()
        if not suites.installed(suite):
            print(f'{suite.name}: not installed; pip install "rltui[{suite.name}]" (e.g. {suite.example})')
            continue
        try:
            version = metadata.version(suite.package)
        except metadata.PackageNotFoundError:
            version = "?"
        names = suites.env_names(suite)
        print(f"{suite.name} {version} ({len(names)} envs):")
        for name in names:
            print(f"  {suite.name}:{name}")


def _preset_summary(has_preset: bool, result, family: str | None = None) -> str:
    """Where an env's settings come from (its own preset, else its family's defaults) and
    what they reached here."""
    if has_preset:
        source = "preset"
    elif family:
        source = f"{family} family defaults"
    else:
        return "-"
    if result is None:
        return f"{source} (not measured here)"
    measured = (
        f"{source}: return {result.mean:g}, worst of {result.seeds} seeds {result.min:g}, in "
        f"{result.steps / 1e6:.1f}M steps"
    )
    if result.random is not None and result.mean <= result.random:
        return f"{measured} (no better than a random policy, {result.random:g})"
    if result.reference is None:
        return f"{measured} (no published reference)"
    if result.min >= result.reference:
        reached = "every seed reaches"
    elif result.mean >= result.reference:
        reached = "the mean reaches"
    elif result.optimum is not None and result.optimum < result.reference:
        return (f"{measured} (short of the reference {result.reference:g}, which no policy reaches on these "
                f"episodes: the best possible is {result.optimum:g})")
    else:
        reached = "short of"
    return f"{measured} ({reached} the reference {result.reference:g})"
