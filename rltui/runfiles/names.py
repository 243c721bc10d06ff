"""The names of what rltui writes in a run directory, each declared once; docs/run-directory.md
describes them all (a test holds the page to this list). Plain strings: this module imports
nothing of rltui, so every layer may name a run's files."""

CONFIG = "config.toml"  # the effective configuration; a resume rewrites it
ORIGINAL_CONFIG = "config.original.toml"  # the configuration the run started with, kept once a resume changes it
METRICS = "metrics.jsonl"  # one record per update
METRICS_DISCARDED = "metrics.discarded.jsonl"  # the records after the checkpoint a resume or rollback went on from
EVENTS = "events.jsonl"  # what happened in the session, one event a line
POPULATION = "population.jsonl"  # a population's changes, each with its member table after it
POPULATION_DISCARDED = "population.discarded.jsonl"  # the changes after the checkpoint a resume went on from
LOCK = "rltui.lock"  # locked by the run's process for as long as it lives
SOCKET = "control.sock"  # the control socket, while the run lives
SOCKET_POINTER = "control.path"  # where the socket is when the run directory's path is too long for one
CHECKPOINTS = "checkpoints"  # the folder of the run's checkpoints
DISCARDED_CHECKPOINTS = "discarded"  # in CHECKPOINTS: those of histories a resume branched away from
BEST_CHECKPOINT = "best.msgpack"  # in CHECKPOINTS: the policy of the best evaluation so far
# TensorBoard's event files lie in the run directory itself, so `tensorboard --logdir runs/`
# lists each run by its name; a population's members are runs in folders of their own.
TENSORBOARD_EVENTS = "events.out.tfevents.*"  # the run's event files
MEMBER_RUN_PREFIX = "member_"  # member_<m>/: a population member's event files
TENSORBOARD = "tb"  # where an older rltui wrote the event files of a run
WANDB = "wandb"  # the folder Weights & Biases writes its own files in
WANDB_RUN_ID = "wandb-run-id"  # the W&B run a resume continues
SCREENSHOT_PREFIX = "screenshot-"  # the dashboard's screenshots: screenshot-u<update>-<time>.svg
TEMPORARY_SUFFIX = ".tmp"  # NAME.tmp (or .NAME.tmp): a file being written whole, before it replaces NAME
