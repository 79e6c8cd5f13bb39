-- Moves a store of versions 1-4 (or one the OpenTelemetry Collector's ClickHouse exporter
-- created) forward; every statement is safe to repeat.

-- Fatal: whether the finding's mode separates failed from successful runs. The collector writes
-- it (for now the static prior of processors/conventions.py); rows stored before the column
-- existed read the same prior through the default.
ALTER TABLE {db}.mast_findings ADD COLUMN IF NOT EXISTS Fatal UInt8 DEFAULT Mode IN {fatal_modes} AFTER Confidence;

ALTER TABLE {db}.mast_signatures ADD COLUMN IF NOT EXISTS Fatal UInt8 DEFAULT hasAny(Modes, {fatal_modes_array}) AFTER DistinctModes;

-- Sign: 1 for a signature version; -1 for the copy of a replaced version that is written in the
-- same insert as its replacement, so that the runs rollup (a sum) moves the run from its old
-- outcome to its new one. Queries read signatures with FINAL (the highest Version wins), so a
-- cancelling row is never the current one.
ALTER TABLE {db}.mast_signatures ADD COLUMN IF NOT EXISTS Sign Int8 DEFAULT 1;

-- Recent findings are filtered by model and service as often as by mode.
ALTER TABLE {db}.mast_findings ADD INDEX IF NOT EXISTS idx_model Model TYPE set(1024) GRANULARITY 4;

ALTER TABLE {db}.mast_findings ADD INDEX IF NOT EXISTS idx_service ServiceName TYPE set(1024) GRANULARITY 4;

-- A batch retried after an error it may have survived carries the same
-- insert_deduplication_token; these windows make single-node MergeTree tables honour it
-- (replicated tables deduplicate by default).
ALTER TABLE {db}.otel_traces MODIFY SETTING non_replicated_deduplication_window = 1000;

ALTER TABLE {db}.otel_logs MODIFY SETTING non_replicated_deduplication_window = 1000;

ALTER TABLE {db}.mast_findings MODIFY SETTING non_replicated_deduplication_window = 1000;

ALTER TABLE {db}.mast_signatures MODIFY SETTING non_replicated_deduplication_window = 1000;

-- The index the trace-id view keeps: a deduplicated insert must not reach it twice either.
ALTER TABLE {db}.otel_traces_trace_id_ts MODIFY SETTING non_replicated_deduplication_window = 1000;
