"""Loggers: a run's metrics and events, written besides metrics.jsonl and events.jsonl to
the tools people compare runs in (TensorBoard, Weights & Biases), as the `loggers` key names
them.

`base`: what every logger shares (the `Logger` protocol, a record's numbers and an event's
text by tag, the check that a logger's library is installed; the loggers the key may name
are `rltui.config.logger_kinds`); `listener`: the loggers on threads of their own beside training;
`tensorboard` and `wandb_logger`: the writers.
"""
