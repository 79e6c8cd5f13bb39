-- One row per finding: a failure mode seen at a span, with the rule, the evidence and the cost.
-- FindingId is a hash of (trace, span, mode, rule): re-analysing a run writes the same ids, and
-- the replacing engine folds such duplicates (queries that must be exact use FINAL).
CREATE TABLE IF NOT EXISTS {db}.mast_findings (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    DetectedAt DateTime64(3) CODEC(Delta, ZSTD(1)),
    FindingId String CODEC(ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    Mode LowCardinality(String),
    ModeName LowCardinality(String),
    Category LowCardinality(String),
    Detector LowCardinality(String),
    DetectorVersion LowCardinality(String),
    Rule LowCardinality(String),
    Confidence Float32,
    Message String CODEC(ZSTD(1)),
    EvidenceSpanIds Array(String) CODEC(ZSTD(1)),
    Evidence String CODEC(ZSTD(1)),
    ServiceName LowCardinality(String),
    AgentName LowCardinality(String),
    Model LowCardinality(String),
    CostSeconds Float64,
    CostLlmCalls UInt32,
    CostToolCalls UInt32,
    CostInputTokens UInt64,
    CostOutputTokens UInt64,
    Intervention LowCardinality(String),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1
) ENGINE = ReplacingMergeTree(DetectedAt)
PARTITION BY toDate(Timestamp)
ORDER BY (Mode, Timestamp, TraceId, FindingId);
