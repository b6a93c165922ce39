-- A version-1 session store (schema fleet_store_v1) as the version-1 engine wrote it: produced by
-- emitting the events below through PostgresSessionLog of schema version 1, then pg_dump --inserts
-- (its SET lines and psql meta-commands left out). Loaded by tests/unit/session/test_session_schema_versions.py.

CREATE SCHEMA fleet_store_v1;

CREATE TABLE fleet_store_v1.fleet_events (
    session_id text NOT NULL,
    seq bigint NOT NULL,
    type text NOT NULL,
    "time" double precision NOT NULL,
    data jsonb NOT NULL
);

CREATE TABLE fleet_store_v1.fleet_leases (
    run_id text NOT NULL,
    epoch bigint NOT NULL,
    host text NOT NULL,
    pid bigint NOT NULL,
    started double precision NOT NULL,
    heartbeat double precision NOT NULL,
    expires double precision NOT NULL
);

CREATE TABLE fleet_store_v1.fleet_meta (
    key text NOT NULL,
    value text NOT NULL
);

CREATE TABLE fleet_store_v1.fleet_session_info (
    session_id text NOT NULL,
    info jsonb NOT NULL
);

CREATE TABLE fleet_store_v1.fleet_sessions (
    session_id text NOT NULL,
    kind text NOT NULL,
    run_id text,
    state text,
    last_seq bigint NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL
)
WITH (fillfactor='50');

CREATE TABLE fleet_store_v1.fleet_snapshots (
    key text NOT NULL,
    data jsonb NOT NULL,
    updated_at double precision NOT NULL
);

INSERT INTO fleet_store_v1.fleet_events VALUES ('run-v1', 1, 'run_created', 1700000001, '{"task": "find bugs", "input": "src"}');
INSERT INTO fleet_store_v1.fleet_events VALUES ('run-v1', 2, 'plan', 1700000001, '{"plan": {"partitions": 2}}');
INSERT INTO fleet_store_v1.fleet_events VALUES ('run-v1.s00001', 1, 'session_created', 1700000002, '{"index": 0, "run_id": "run-v1", "partition_id": "p1"}');
INSERT INTO fleet_store_v1.fleet_events VALUES ('run-v1.s00002', 1, 'session_created', 1700000003, '{"index": 1, "run_id": "run-v1", "partition_id": "p2"}');
INSERT INTO fleet_store_v1.fleet_events VALUES ('run-v1.s00001', 2, 'session_started', 1700000004, '{}');
INSERT INTO fleet_store_v1.fleet_events VALUES ('run-v1.s00001', 3, 'model_request', 1700000004, '{"turn": 1}');
INSERT INTO fleet_store_v1.fleet_events VALUES ('run-v1.s00001', 4, 'tool_call', 1700000005, '{"name": "read_file", "call_id": "c1", "arguments": {"path": "a.py"}}');
INSERT INTO fleet_store_v1.fleet_events VALUES ('run-v1.s00002', 2, 'session_started', 1700000006, '{}');
INSERT INTO fleet_store_v1.fleet_events VALUES ('run-v1.s00002', 3, 'session_completed', 1700000007, '{"summary": "done"}');

INSERT INTO fleet_store_v1.fleet_leases VALUES ('run-v1', 1, 'host-a', 4242, 1700000000, 1700000001, 1700000031);

INSERT INTO fleet_store_v1.fleet_meta VALUES ('schema_version', '1');

INSERT INTO fleet_store_v1.fleet_session_info VALUES ('run-v1', '{"task": "find bugs", "input": "src"}');
INSERT INTO fleet_store_v1.fleet_session_info VALUES ('run-v1.s00001', '{"index": 0, "run_id": "run-v1", "partition_id": "p1"}');
INSERT INTO fleet_store_v1.fleet_session_info VALUES ('run-v1.s00002', '{"index": 1, "run_id": "run-v1", "partition_id": "p2"}');

INSERT INTO fleet_store_v1.fleet_sessions VALUES ('run-v1', 'run', NULL, 'running', 2, 1700000001, 1700000001);
INSERT INTO fleet_store_v1.fleet_sessions VALUES ('run-v1.s00001', 'agent', 'run-v1', 'running', 4, 1700000002, 1700000005);
INSERT INTO fleet_store_v1.fleet_sessions VALUES ('run-v1.s00002', 'agent', 'run-v1', 'completed', 3, 1700000003, 1700000007);

INSERT INTO fleet_store_v1.fleet_snapshots VALUES ('admission', '{"queues": {}}', 1700000008);

ALTER TABLE ONLY fleet_store_v1.fleet_events
    ADD CONSTRAINT fleet_events_pkey PRIMARY KEY (session_id, seq);

ALTER TABLE ONLY fleet_store_v1.fleet_leases
    ADD CONSTRAINT fleet_leases_pkey PRIMARY KEY (run_id);

ALTER TABLE ONLY fleet_store_v1.fleet_meta
    ADD CONSTRAINT fleet_meta_pkey PRIMARY KEY (key);

ALTER TABLE ONLY fleet_store_v1.fleet_session_info
    ADD CONSTRAINT fleet_session_info_pkey PRIMARY KEY (session_id);

ALTER TABLE ONLY fleet_store_v1.fleet_sessions
    ADD CONSTRAINT fleet_sessions_pkey PRIMARY KEY (session_id);

ALTER TABLE ONLY fleet_store_v1.fleet_snapshots
    ADD CONSTRAINT fleet_snapshots_pkey PRIMARY KEY (key);

CREATE INDEX fleet_sessions_by_kind ON fleet_store_v1.fleet_sessions USING btree (kind, created_at);

CREATE INDEX fleet_sessions_by_run ON fleet_store_v1.fleet_sessions USING btree (run_id, session_id);

