-- The store of one analysis (DESIGN §4). Every table is written by exactly one stage.
-- Columns mirror parsers/records.py (EVENT_SCHEMA, TABLE_SCHEMAS) plus `file_id`.

CREATE TABLE files (
    file_id     INTEGER PRIMARY KEY,
    path        VARCHAR NOT NULL,      -- relative to the job directory ('/'-separated; 'a.tar.gz!member' inside archives)
    size        BIGINT,
    digest      VARCHAR,               -- of the bytes as stored, taken in the read pass
    digest_algo VARCHAR,               -- 'blake3' (or 'blake2b-256' where blake3 is not installed)
    parser      VARCHAR,               -- the parser that read most of its lines; NULL when unrecognized
    parsers     VARCHAR,               -- every parser that claimed lines, comma-separated
    lines       BIGINT NOT NULL,
    parsed      BIGINT NOT NULL,
    ignored     BIGINT NOT NULL,
    unparsed    BIGINT NOT NULL,
    events      BIGINT NOT NULL,
    warnings    VARCHAR[],
    host        VARCHAR,               -- host suggested by the path
    first_ts    TIMESTAMPTZ,           -- earliest / latest stamp on its first and last lines
    last_ts     TIMESTAMPTZ
);

CREATE TABLE events (
    event_id    BIGINT PRIMARY KEY,
    file_id     INTEGER NOT NULL,
    line_no     BIGINT NOT NULL,
    source      VARCHAR NOT NULL,
    kind        VARCHAR NOT NULL,
    ts          TIMESTAMPTZ,
    ts_raw      VARCHAR,
    ts_quality  VARCHAR,               -- exact | derived | relative | missing
    host        VARCHAR,
    rank        BIGINT,
    local_rank  BIGINT,
    gpu         BIGINT,
    pci_bus_id  VARCHAR,
    pid         BIGINT,
    severity    VARCHAR,
    code        VARCHAR,
    message     VARCHAR
);

CREATE TABLE unparsed_lines (         -- unparsed lines that look like errors (listed in the coverage report)
    file_id     INTEGER NOT NULL,
    line_no     BIGINT NOT NULL,
    text        VARCHAR
);

CREATE TABLE xid_events (
    file_id INTEGER, line_no BIGINT, ts TIMESTAMPTZ, host VARCHAR, pci_bus_id VARCHAR, xid BIGINT,
    pid BIGINT, proc_name VARCHAR, gpu_instance BIGINT, caused_by_xid BIGINT, body VARCHAR
);

CREATE TABLE nccl_comms (
    file_id INTEGER, line_no BIGINT, ts TIMESTAMPTZ, host VARCHAR, pid BIGINT, event VARCHAR,
    comm_ptr VARCHAR, rank BIGINT, nranks BIGINT, cuda_dev BIGINT, nvml_dev BIGINT, bus_id VARCHAR,
    pci_bus_id VARCHAR, comm_id VARCHAR
);

CREATE TABLE nccl_errors (
    file_id INTEGER, line_no BIGINT, ts TIMESTAMPTZ, host VARCHAR, pid BIGINT, gpu BIGINT, kind VARCHAR,
    status BIGINT, vendor_err BIGINT, peer_ip VARCHAR, peer_port BIGINT, hca VARCHAR, result BIGINT,
    text VARCHAR
);

CREATE TABLE collective_timeouts (
    file_id INTEGER, line_no BIGINT, ts TIMESTAMPTZ, host VARCHAR, rank BIGINT, pg VARCHAR, seq BIGINT,
    op_type VARCHAR, numel_in BIGINT, numel_out BIGINT, timeout_ms BIGINT, ran_for_ms BIGINT,
    last_enqueued BIGINT, last_completed BIGINT
);

CREATE TABLE train_steps (
    file_id INTEGER, line_no BIGINT, ts TIMESTAMPTZ, host VARCHAR, rank BIGINT, framework VARCHAR,
    step BIGINT, total_steps BIGINT, step_time_s DOUBLE, loss DOUBLE, grad_norm DOUBLE, skipped BIGINT,
    nan_iters BIGINT, throughput DOUBLE, epoch BIGINT, data_time_s DOUBLE
);

CREATE TABLE checkpoints (
    file_id INTEGER, line_no BIGINT, ts TIMESTAMPTZ, host VARCHAR, rank BIGINT, event VARCHAR,
    step BIGINT, duration_s DOUBLE, path VARCHAR
);

CREATE TABLE exits (
    file_id INTEGER, line_no BIGINT, ts TIMESTAMPTZ, host VARCHAR, rank BIGINT, local_rank BIGINT,
    pid BIGINT, exitcode BIGINT, signal VARCHAR, origin VARCHAR, first_observed BOOLEAN,
    error_file VARCHAR, message VARCHAR
);

CREATE TABLE pod_nodes (              -- a Kubernetes pod and the node kubectl shows it on
    file_id INTEGER, line_no BIGINT, pod VARCHAR, namespace VARCHAR, node VARCHAR
);

CREATE TABLE dcgm_samples (
    file_id INTEGER, line_no BIGINT, ts TIMESTAMPTZ, host VARCHAR, gpu BIGINT, uuid VARCHAR,
    pci_bus_id VARCHAR, field VARCHAR, value DOUBLE
);

CREATE TABLE sched_records (
    file_id INTEGER, line_no BIGINT, job_id VARCHAR, step_id VARCHAR, name VARCHAR, state VARCHAR,
    exit_code BIGINT, signal BIGINT, "start" TIMESTAMPTZ, "end" TIMESTAMPTZ, node_list VARCHAR,
    failed_node VARCHAR, restarts BIGINT, reason VARCHAR
);

-- results
CREATE TABLE rank_map (               -- rank <-> host <-> GPU <-> PCI, from NCCL init, elastic tables, paths
    rank BIGINT, host VARCHAR, local_rank BIGINT, gpu BIGINT, pci_bus_id VARCHAR, source VARCHAR
);

CREATE TABLE attempts (
    "index" INTEGER, "start" TIMESTAMPTZ, "end" TIMESTAMPTZ, first_step BIGINT, last_step BIGINT,
    resumed_from BIGINT, end_reason VARCHAR, first_step_start TIMESTAMPTZ, last_progress TIMESTAMPTZ,
    witnesses VARCHAR, last_durable_checkpoint TIMESTAMPTZ
);

CREATE TABLE signature_hits (
    event_id BIGINT, signature VARCHAR, category VARCHAR, role VARCHAR, severity VARCHAR,
    summary VARCHAR
);

CREATE TABLE interruptions (
    id VARCHAR, attempt INTEGER, time TIMESTAMPTZ, kind VARCHAR, category VARCHAR, domain VARCHAR,
    action VARCHAR, auto_recoverable BOOLEAN, recurring BOOLEAN, culprit_host VARCHAR,
    culprit_rank BIGINT, culprit_gpu BIGINT, culprit_pci_bus_id VARCHAR, confidence DOUBLE,
    method VARCHAR, summary VARCHAR, missing_evidence VARCHAR
);

CREATE TABLE evidence (
    interruption_id VARCHAR, event_id BIGINT, path VARCHAR, line BIGINT, time TIMESTAMPTZ,
    signature VARCHAR, role VARCHAR, text VARCHAR
);

CREATE TABLE stragglers (
    host VARCHAR, rank BIGINT, gpu BIGINT, "start" TIMESTAMPTZ, "end" TIMESTAMPTZ, slowdown DOUBLE,
    cause VARCHAR, evidence VARCHAR
);

CREATE TABLE downtime (
    bucket VARCHAR, seconds DOUBLE, interruption_id VARCHAR
);
