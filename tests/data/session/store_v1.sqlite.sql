-- A version-1 session store as the version-1 engine wrote it: produced by emitting the events below
-- through SqliteSessionLog of schema version 1, then sqlite3 .dump.
-- Loaded by tests/unit/session/test_session_schema_versions.py.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE fleet_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO fleet_meta VALUES('schema_version','1');
CREATE TABLE fleet_events (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    time REAL NOT NULL,
    data TEXT NOT NULL,
    UNIQUE (session_id, seq)
);
INSERT INTO fleet_events VALUES(1,'run-v1',1,'run_created',1700000001.0,'{"task":"find bugs","input":"src"}');
INSERT INTO fleet_events VALUES(2,'run-v1',2,'plan',1700000001.0,'{"plan":{"partitions":2}}');
INSERT INTO fleet_events VALUES(3,'run-v1.s00001',1,'session_created',1700000002.0,'{"run_id":"run-v1","partition_id":"p1","index":0}');
INSERT INTO fleet_events VALUES(4,'run-v1.s00002',1,'session_created',1700000003.0,'{"run_id":"run-v1","partition_id":"p2","index":1}');
INSERT INTO fleet_events VALUES(5,'run-v1.s00001',2,'session_started',1700000004.0,'{}');
INSERT INTO fleet_events VALUES(6,'run-v1.s00001',3,'model_request',1700000004.0,'{"turn":1}');
INSERT INTO fleet_events VALUES(7,'run-v1.s00001',4,'tool_call',1700000005.0,'{"call_id":"c1","name":"read_file","arguments":{"path":"a.py"}}');
INSERT INTO fleet_events VALUES(8,'run-v1.s00002',2,'session_started',1700000006.0,'{}');
INSERT INTO fleet_events VALUES(9,'run-v1.s00002',3,'session_completed',1700000007.0,'{"summary":"done"}');
CREATE TABLE fleet_sessions (
    session_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    run_id TEXT,
    state TEXT,
    last_seq INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
) WITHOUT ROWID;
INSERT INTO fleet_sessions VALUES('run-v1','run',NULL,'running',2,1700000001.0,1700000001.0);
INSERT INTO fleet_sessions VALUES('run-v1.s00001','agent','run-v1','running',4,1700000002.0,1700000005.0);
INSERT INTO fleet_sessions VALUES('run-v1.s00002','agent','run-v1','completed',3,1700000003.0,1700000007.0);
CREATE TABLE fleet_session_info (session_id TEXT PRIMARY KEY, info TEXT NOT NULL);
INSERT INTO fleet_session_info VALUES('run-v1','{"task":"find bugs","input":"src"}');
INSERT INTO fleet_session_info VALUES('run-v1.s00001','{"run_id":"run-v1","partition_id":"p1","index":0}');
INSERT INTO fleet_session_info VALUES('run-v1.s00002','{"run_id":"run-v1","partition_id":"p2","index":1}');
CREATE TABLE fleet_snapshots (key TEXT PRIMARY KEY, data TEXT NOT NULL, updated_at REAL NOT NULL);
INSERT INTO fleet_snapshots VALUES('admission','{"queues":{}}',1700000008.0);
CREATE TABLE fleet_leases (
    run_id TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started REAL NOT NULL,
    heartbeat REAL NOT NULL,
    expires REAL NOT NULL
) WITHOUT ROWID
;
INSERT INTO fleet_leases VALUES('run-v1',1,'host-a',4242,1700000000.0,1700000001.0,1700000031.0);
CREATE INDEX fleet_sessions_by_run ON fleet_sessions (run_id, session_id);
CREATE INDEX fleet_sessions_by_kind ON fleet_sessions (kind, created_at);
COMMIT;
