"""Loggers: a run's metrics and events, written besides metrics.jsonl and events.jsonl to
the tools people compare runs in (TensorBoard, Weights & Biases), as the `loggers` key names
them.

`base`: what every logger shares (the `Logger` protocol, an event's text, the check that a
logger's library is installed; the loggers the key may name are
`rltui.config.logger_kinds`); `layout`: which series, runs and hyperparameters both writers
make of a run (tags grouped as the metrics declare, a population's members as runs of their
own); `listener`: the loggers on threads of their own beside training; `tensorboard` and
`wandb_logger`: the writers.
"""
