"""Re-analysis of spans already stored: the pipeline run over whole traces read back from the
store (`whole_traces`), for `mast-otel backfill` (`backfill`) and for runs split across
replicas (`split_runs`)."""
