-- Attribution of a failed run (or one with findings): the decisive step's span and its position
-- among the run's steps (-1 when none was named), the agent responsible, and the chain that led
-- there (JSON: the finding, then each step it traces back to, with span ids). Rows stored
-- before these columns existed read empty.
ALTER TABLE {db}.mast_signatures ADD COLUMN IF NOT EXISTS DecisiveSpanId String DEFAULT '' CODEC(ZSTD(1)) AFTER Score;

ALTER TABLE {db}.mast_signatures ADD COLUMN IF NOT EXISTS DecisiveStep Int32 DEFAULT -1 AFTER DecisiveSpanId;

ALTER TABLE {db}.mast_signatures ADD COLUMN IF NOT EXISTS ResponsibleAgent LowCardinality(String) DEFAULT '' AFTER DecisiveStep;

ALTER TABLE {db}.mast_signatures ADD COLUMN IF NOT EXISTS AttributionChain String DEFAULT '' CODEC(ZSTD(1)) AFTER ResponsibleAgent;
