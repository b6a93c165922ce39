"""Every statement of the PostgreSQL session log (postgres.py), tables qualified by its schema."""

from __future__ import annotations

__all__ = ["Statements"]


class Statements:
    """Every statement, with table names qualified by the configured schema."""

    def __init__(self, q: str) -> None:
        self._tables(q)
        self._writes(q)
        self._reads(q)

    def _tables(self, q: str) -> None:
        self.schema = f"""
            CREATE TABLE IF NOT EXISTS {q}fleet_meta (key text PRIMARY KEY, value text NOT NULL);
            CREATE TABLE IF NOT EXISTS {q}fleet_sessions (
                session_id text PRIMARY KEY,
                kind text NOT NULL,
                run_id text,
                state text,
                created_at double precision NOT NULL
            );
            CREATE TABLE IF NOT EXISTS {q}fleet_session_info (session_id text PRIMARY KEY, info jsonb NOT NULL);
            CREATE INDEX IF NOT EXISTS fleet_sessions_by_run ON {q}fleet_sessions (run_id, session_id);
            CREATE INDEX IF NOT EXISTS fleet_sessions_by_kind ON {q}fleet_sessions (kind, created_at);
            CREATE TABLE IF NOT EXISTS {q}fleet_events (
                session_id text NOT NULL,
                seq bigint NOT NULL,
                type text NOT NULL,
                time double precision NOT NULL,
                data jsonb NOT NULL,
                PRIMARY KEY (session_id, seq)
            );
            CREATE TABLE IF NOT EXISTS {q}fleet_snapshots (
                key text PRIMARY KEY, data jsonb NOT NULL, updated_at double precision NOT NULL
            );
            CREATE TABLE IF NOT EXISTS {q}fleet_leases (
                run_id text PRIMARY KEY,
                epoch bigint NOT NULL,
                host text NOT NULL,
                pid bigint NOT NULL,
                started double precision NOT NULL,
                heartbeat double precision NOT NULL,
                expires double precision NOT NULL
            );
        """

    def _writes(self, q: str) -> None:
        lease_cols = "run_id, epoch, host, pid, started, heartbeat, expires"
        self.read_lease = f"SELECT {lease_cols} FROM {q}fleet_leases WHERE run_id = $1"
        self.insert_lease = (
            f"INSERT INTO {q}fleet_leases ({lease_cols}) VALUES ($1, $2, $3, $4, $5, $6, $7) "
            "ON CONFLICT (run_id) DO NOTHING RETURNING epoch"
        )
        self.update_lease = (
            f"UPDATE {q}fleet_leases SET epoch = $2, host = $3, pid = $4, started = $5, heartbeat = $6, "
            "expires = $7 WHERE run_id = $1 AND epoch = $8 RETURNING epoch"
        )
        self.landed = (
            f"SELECT count(*) FROM {q}fleet_events e JOIN unnest($1::text[], $2::bigint[], $3::float8[]) "
            "AS t(session_id, seq, time) ON e.session_id = t.session_id AND e.seq = t.seq AND e.time = t.time"
        )
        self.lease_epochs = (
            f"SELECT run_id, epoch FROM {q}fleet_leases WHERE run_id = ANY($1::text[]) ORDER BY run_id FOR SHARE"
        )
        self.foreign_tables = (
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = coalesce($1::text, current_schema()) AND table_name NOT LIKE 'fleet\\_%' "
            "ORDER BY table_name"
        )
        self.schema_version = f"SELECT value FROM {q}fleet_meta WHERE key = 'schema_version'"
        self.set_schema_version = (
            f"INSERT INTO {q}fleet_meta VALUES ('schema_version', $1) ON CONFLICT (key) DO UPDATE SET value = $1"
        )
        # Version 1 rewrote last_seq and updated_at in every batch; version 2 reads them from the newest event.
        self.migrations = {
            1: f"ALTER TABLE {q}fleet_sessions DROP COLUMN last_seq, DROP COLUMN updated_at, RESET (fillfactor)"
        }
        self.last_seqs = (
            f"SELECT session_id, max(seq) FROM {q}fleet_events WHERE session_id = ANY($1::text[]) GROUP BY session_id"
        )
        self.insert_sessions = (
            f"INSERT INTO {q}fleet_sessions (session_id, kind, run_id, state, created_at) "
            "SELECT t.session_id, t.kind, t.run_id, t.state, $5 "
            "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS t(session_id, kind, run_id, state)"
        )
        self.move_sessions = (
            f"UPDATE {q}fleet_sessions s SET state = t.state "
            "FROM unnest($1::text[], $2::text[]) AS t(session_id, state) WHERE s.session_id = t.session_id"
        )
        self.insert_info = (
            f"INSERT INTO {q}fleet_session_info (session_id, info) "
            "SELECT t.session_id, t.info::jsonb FROM unnest($1::text[], $2::text[]) AS t(session_id, info)"
        )
        self.put_snapshot = (
            f"INSERT INTO {q}fleet_snapshots (key, data, updated_at) VALUES ($1, $2::text::jsonb, $3) "
            "ON CONFLICT (key) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at"
        )

    def _reads(self, q: str) -> None:
        # A session's last seq and the time of its last event are its newest event's (one backward probe
        # of the events' primary key): the projection row is written only when the session is created
        # and when its state changes.
        cols = (
            "s.session_id, s.kind, s.run_id, s.state, coalesce(l.seq, 0), s.created_at, "
            "coalesce(l.time, s.created_at), i.info::text"
        )
        sessions = (
            f"{q}fleet_sessions s LEFT JOIN {q}fleet_session_info i ON i.session_id = s.session_id "
            f"LEFT JOIN LATERAL (SELECT e.seq, e.time FROM {q}fleet_events e WHERE e.session_id = s.session_id "
            "ORDER BY e.seq DESC LIMIT 1) l ON true"
        )
        self.get_snapshot = f"SELECT data::text FROM {q}fleet_snapshots WHERE key = $1"
        self.select_session = f"SELECT {cols} FROM {sessions} WHERE s.session_id = $1"
        self.select_sessions_any = f"SELECT {cols} FROM {sessions} WHERE s.session_id = ANY($1::text[])"
        event_cols = "e.session_id, e.seq, e.type, e.time, e.data::text"
        self.select_events = (
            f"SELECT {event_cols} FROM {q}fleet_events e WHERE e.session_id = $1 AND e.seq > $2 ORDER BY e.seq"
        )
        self.select_events_any = (
            f"SELECT {event_cols} FROM {q}fleet_events e WHERE e.session_id = ANY($1::text[]) "
            "ORDER BY e.session_id, e.seq"
        )
        self.list_runs = (
            f"SELECT {cols} FROM {sessions} WHERE s.kind = 'run' ORDER BY s.created_at DESC, s.session_id DESC LIMIT $1"
        )
        self.list_sessions = f"SELECT {cols} FROM {sessions} WHERE s.run_id = $1 ORDER BY s.session_id"
        run_join = (
            f"SELECT {event_cols} FROM {q}fleet_sessions s "
            f"JOIN {q}fleet_events e ON e.session_id = s.session_id WHERE s.run_id = $1"
        )
        self.events_of_run = f"{run_join} ORDER BY s.session_id, e.seq"
        self.events_of_run_typed = f"{run_join} AND e.type = ANY($2::text[]) ORDER BY s.session_id, e.seq"
