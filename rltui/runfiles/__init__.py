"""Reading a run directory: its file names, records, checkpoints, statistics and summaries."""
