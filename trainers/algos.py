"""Build the trainer a static config names (`StaticConfig.algo`)."""

from __future__ import annotations

from trainers.base import OnPolicyTrainer
from trainers.hparams import ALGOS, StaticConfig


def make_trainer(static: StaticConfig, num_devices: int = 1) -> OnPolicyTrainer:
    """PPO or REINFORCE for `static`, split over `num_devices`; both run through
    `parallel.DataParallel` the same way."""
    if static.algo == "ppo":
        from trainers.ppo import make_trainer as make_ppo

        return make_ppo(static, num_devices)
    if static.algo == "reinforce":
        from trainers.reinforce import make_reinforce_trainer

        return make_reinforce_trainer(static, num_devices)
    raise ValueError(f"algo: expected one of {', '.join(ALGOS)}, got {static.algo!r}")
