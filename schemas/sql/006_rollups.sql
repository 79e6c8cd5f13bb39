-- Per-minute rollups for dashboards and alert rules, kept by materialized views so those
-- queries read a few rows per minute instead of every finding and run.

-- Findings per minute by service, agent, model, mode and fatality. Counts are exact distinct
-- counts of FindingId (and TraceId), so a finding stored twice (a re-analysis, a retried
-- batch) is counted once, as `SELECT count() FROM mast_findings FINAL` counts it.
-- Read with uniqExactMerge(Findings), uniqExactMerge(Runs).
CREATE TABLE IF NOT EXISTS {db}.mast_findings_per_minute (
    Minute DateTime CODEC(Delta, ZSTD(1)),
    ServiceName LowCardinality(String),
    AgentName LowCardinality(String),
    Model LowCardinality(String),
    Mode LowCardinality(String),
    Fatal UInt8,
    Findings AggregateFunction(uniqExact, String),
    Runs AggregateFunction(uniqExact, String)
) ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(Minute)
ORDER BY (Minute, Mode, Model, ServiceName, AgentName, Fatal)
SETTINGS non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.mast_findings_per_minute_mv
TO {db}.mast_findings_per_minute
AS SELECT
    toStartOfMinute(toDateTime(Timestamp)) AS Minute,
    ServiceName,
    AgentName,
    Model,
    Mode,
    Fatal,
    uniqExactState(FindingId) AS Findings,
    uniqExactState(TraceId) AS Runs
FROM {db}.mast_findings
GROUP BY Minute, ServiceName, AgentName, Model, Mode, Fatal;

-- Findings stored before this version.
INSERT INTO {db}.mast_findings_per_minute
SETTINGS insert_deduplication_token = 'mast-migration-006-findings-per-minute'
SELECT
    toStartOfMinute(toDateTime(Timestamp)) AS Minute,
    ServiceName,
    AgentName,
    Model,
    Mode,
    Fatal,
    uniqExactState(FindingId) AS Findings,
    uniqExactState(TraceId) AS Runs
FROM {db}.mast_findings
GROUP BY Minute, ServiceName, AgentName, Model, Mode, Fatal;

-- Which signature versions the runs rollup counts, and with what: a replacement must cancel
-- exactly those (the signatures table itself keeps only the newest version of a run, as its
-- engine collapses the others). Net is the sum of Sign per version; the rest is the version's
-- values as the rollup saw them.
CREATE TABLE IF NOT EXISTS {db}.mast_signature_counts (
    TraceId String CODEC(ZSTD(1)),
    Version UInt64,
    Start DateTime64(9) CODEC(Delta, ZSTD(1)),
    End DateTime64(9) CODEC(Delta, ZSTD(1)),
    ServiceName LowCardinality(String),
    AgentName LowCardinality(String),
    Model LowCardinality(String),
    Outcome LowCardinality(String),
    Fatal UInt8,
    FindingCount UInt32,
    DistinctModes UInt8,
    Steps UInt32,
    Net Int64
) ENGINE = SummingMergeTree(Net)
PARTITION BY toYYYYMM(Start)
ORDER BY (TraceId, Version)
SETTINGS non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.mast_signature_counts_mv
TO {db}.mast_signature_counts
AS SELECT
    TraceId, Version, Start, End, ServiceName, AgentName, Model, Outcome, Fatal, FindingCount,
    DistinctModes, Steps, sum(Sign) AS Net
FROM {db}.mast_signatures
GROUP BY TraceId, Version, Start, End, ServiceName, AgentName, Model, Outcome, Fatal,
    FindingCount, DistinctModes, Steps;

INSERT INTO {db}.mast_signature_counts
SETTINGS insert_deduplication_token = 'mast-migration-006-signature-counts'
SELECT
    TraceId, Version, Start, End, ServiceName, AgentName, Model, Outcome, Fatal, FindingCount,
    DistinctModes, Steps, count() AS Net
FROM {db}.mast_signatures FINAL
WHERE Sign = 1
GROUP BY TraceId, Version, Start, End, ServiceName, AgentName, Model, Outcome, Fatal,
    FindingCount, DistinctModes, Steps;

-- Closed runs per minute (of their end) by service, agent, model and outcome. Sums of Sign:
-- replacing a signature (an outcome posted later) writes -1 for the old version and +1 for
-- the new one, so sum(Runs) per outcome equals the count of current signatures.
CREATE TABLE IF NOT EXISTS {db}.mast_runs_per_minute (
    Minute DateTime CODEC(Delta, ZSTD(1)),
    ServiceName LowCardinality(String),
    AgentName LowCardinality(String),
    Model LowCardinality(String),
    Outcome LowCardinality(String),
    Runs Int64,
    FatalRuns Int64,
    RunsWithFindings Int64,
    Findings Int64,
    DistinctModes Int64,
    Steps Int64
) ENGINE = SummingMergeTree()
PARTITION BY toYYYYMM(Minute)
ORDER BY (Minute, ServiceName, Model, AgentName, Outcome)
SETTINGS non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.mast_runs_per_minute_mv
TO {db}.mast_runs_per_minute
AS SELECT
    toStartOfMinute(toDateTime(End)) AS Minute,
    ServiceName,
    AgentName,
    Model,
    Outcome,
    sum(Sign) AS Runs,
    sum(Sign * Fatal) AS FatalRuns,
    sum(Sign * (FindingCount > 0)) AS RunsWithFindings,
    sum(Sign * FindingCount) AS Findings,
    sum(Sign * DistinctModes) AS DistinctModes,
    sum(Sign * Steps) AS Steps
FROM {db}.mast_signatures
GROUP BY Minute, ServiceName, AgentName, Model, Outcome;

-- Runs stored before this version: their current signatures.
INSERT INTO {db}.mast_runs_per_minute
SETTINGS insert_deduplication_token = 'mast-migration-006-runs-per-minute'
SELECT
    toStartOfMinute(toDateTime(End)) AS Minute,
    ServiceName,
    AgentName,
    Model,
    Outcome,
    count() AS Runs,
    sum(Fatal) AS FatalRuns,
    sum(FindingCount > 0) AS RunsWithFindings,
    sum(FindingCount) AS Findings,
    sum(DistinctModes) AS DistinctModes,
    sum(Steps) AS Steps
FROM {db}.mast_signatures FINAL
WHERE Sign = 1
GROUP BY Minute, ServiceName, AgentName, Model, Outcome;
