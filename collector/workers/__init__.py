"""The collector over several worker processes (`pipeline.workers` > 1).

The receiving process keeps the receivers, the write-ahead spool (a request is acknowledged once
its bytes are in it, as with one process), routing, replay and the spool's journal. Each request
is split by run (`route`: one request per worker, records not decoded) and each part is handed
to the worker that owns its runs (`pool`), behind a header with the request's spool sequence
number and segment (`parts`). A worker decodes its part and runs what one process runs (limits,
redaction, normalization, windows, detectors, ticks, the exporter), in a `Pipeline` of its own
(`worker_pipeline`); every run lives wholly in one worker.

    receivers → receiving (route, spool, hand over) → pool → worker_main → worker_pipeline
                    ↑                                                            │
                    └──── ledger, health ← reports over the pool channel ←───────┘

What a worker reports back, in order, over its pool channel: the spool segments its open runs
hold, the parts (spool sequence numbers) whose rows are stored, and the runs closed (with the
segments they held) once their findings and signature are stored. The receiving process
journals and releases: a request is journaled stored (`S seq`) and lets go of its segment once
every worker it went to has stored its part; a closed run (`C trace`) lets go of its segments.
So the spool on disk means what it means with one process, and a crash of the receiving process
is replayed the same way: every spooled request routed again (the shard function is the same in
every process), each part to its worker, with the closed runs sent first.

A worker that dies is started again and given, before anything newer, every request on disk
that has a part for it, routed again (those already stored by it are fed to its windows only),
so its open runs are rebuilt; the holds of the dead worker are let go once the replay is queued
to the new one.

The store: with the embedded store (chDB, one process per directory) the receiving process owns
it and each worker writes through it (`StoreOwner`/`StoreClient`: Arrow batches and queries over
a local socket); with a ClickHouse server each worker opens its own connection.

Back-pressure: a request is refused (retryable) when any worker has its bound of requests or
bytes waiting (`pipeline.worker_queue_max_*`), or the spool is full. Inside a worker the pipeline
holds at most two batches beyond the one in progress, so what waits is bytes, not records.

Stop: only this process acts on stop signals (workers block and ignore them, so a signal to
the whole process group changes nothing there). Receivers stop, the start-up replay finishes,
no worker is restarted any more, every worker drains (for at most `pipeline.stop_drain_s`;
what is left stays in the spool with every open run), closes its runs (or, with
`durability.resume_open_runs`, keeps those in progress in the spool for the next start),
writes and reports; then the spool and store close. A second signal kills the workers and
exits at once (`kill`): what they had not stored is in the spool.

Modules, one job each. Importing nothing of the pipeline:
- `shard`: the shard function, which worker owns a run;
- `wire`: reading OTLP/protobuf on the wire without decoding it;
- `route`: one export request split by run into one request per worker;
- `parts`: the header a request's part travels behind (spool sequence number, segment, flags);
- `pool`: the worker processes, started, fed within bounds, restarted and stopped;
- `pool_config`: the pool's settings, counters and refusals;
- `worker_main`: what runs inside one worker process (its loop, stop signals, dying with the
  receiving process);
- `store_owner`: the embedded store owned by the receiving process and written through by the
  workers.

Running the pipeline:
- `receiving`: the receivers' consumer (`ShardedPipeline`: route, spool, hand over, stop);
- `worker_pipeline`: the worker's handler, its parts run through a `Pipeline` of its own;
- `ledger`: what each spooled request and segment waits for, from the workers' reports, and the
  spool's relief;
- `replay`: the spool routed again at start and to a restarted worker;
- `health`: the workers' health, asked for and summed.
"""
