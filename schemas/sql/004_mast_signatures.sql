-- One current row per closed run: its failure vector over the fourteen modes (in the order of
-- the taxonomy, FM-1.1 first), counts, outcome and who ran it. A later row for the same run
-- (an outcome posted after the fact) replaces the earlier one: newest Version wins.
CREATE TABLE IF NOT EXISTS {db}.mast_signatures (
    TraceId String CODEC(ZSTD(1)),
    Start DateTime64(9) CODEC(Delta, ZSTD(1)),
    End DateTime64(9) CODEC(Delta, ZSTD(1)),
    ClosedAt DateTime64(3) CODEC(Delta, ZSTD(1)),
    ServiceName LowCardinality(String),
    AgentName LowCardinality(String),
    Model LowCardinality(String),
    ConversationId String CODEC(ZSTD(1)),
    CloseReason LowCardinality(String),
    Steps UInt32,
    LlmCalls UInt32,
    ToolCalls UInt32,
    Errors UInt32,
    InputTokens UInt64,
    OutputTokens UInt64,
    FailureVector Array(UInt8),
    Modes Array(LowCardinality(String)),
    ModeCounts Map(LowCardinality(String), UInt32),
    FindingCount UInt32,
    DistinctModes UInt8,
    Outcome LowCardinality(String),
    Score Nullable(Float64),
    Version UInt64
) ENGINE = ReplacingMergeTree(Version)
PARTITION BY toYYYYMM(Start)
ORDER BY TraceId;
