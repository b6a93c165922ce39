"""The SQLite side of run leases (lease.py): the table, the compare-and-swap, the fencing read.

Each lease operation runs in its own short ``BEGIN IMMEDIATE`` transaction on its own connection:
SQLite serialises it with the writer's batches, so a takeover lands wholly before or after a batch,
and the batch reads the epoch it checks inside its own transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from agent_fleet.session.lease import Lease, LeaseOwner

__all__ = ["LEASE_SCHEMA", "lease_epochs", "read_lease", "swap_lease"]

LEASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS fleet_leases (
    run_id TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started REAL NOT NULL,
    heartbeat REAL NOT NULL,
    expires REAL NOT NULL
) WITHOUT ROWID
"""
_COLUMNS = "run_id, epoch, host, pid, started, heartbeat, expires"
_CHUNK = 500


def _row(lease: Lease) -> tuple[object, ...]:
    o = lease.owner
    return (lease.run_id, lease.epoch, o.host, o.pid, o.start, lease.heartbeat, lease.expires)


def read_lease(conn: sqlite3.Connection, run_id: str) -> Lease | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM fleet_leases WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    rid, epoch, host, pid, started, heartbeat, expires = row
    return Lease(rid, int(epoch), LeaseOwner(host, int(pid), float(started)), float(heartbeat), float(expires))


def swap_lease(conn: sqlite3.Connection, lease: Lease, expected_epoch: int | None) -> bool:
    """Write ``lease`` iff the row's epoch is ``expected_epoch`` (None: no row yet), in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if expected_epoch is None:
            cur = conn.execute(
                f"INSERT INTO fleet_leases ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING",
                _row(lease),
            )
        else:
            rid, epoch, host, pid, started, heartbeat, expires = _row(lease)
            cur = conn.execute(
                "UPDATE fleet_leases SET epoch = ?, host = ?, pid = ?, started = ?, heartbeat = ?, expires = ? "
                "WHERE run_id = ? AND epoch = ?",
                (epoch, host, pid, started, heartbeat, expires, rid, expected_epoch),
            )
        swapped = cur.rowcount == 1
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return swapped


def lease_epochs(conn: sqlite3.Connection, runs: Sequence[str]) -> dict[str, int]:
    """The current lease epoch of each run that has a lease (read inside the caller's transaction)."""
    out: dict[str, int] = {}
    for start in range(0, len(runs), _CHUNK):
        chunk = list(runs[start : start + _CHUNK])
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT run_id, epoch FROM fleet_leases WHERE run_id IN ({marks})"
        out.update((rid, int(epoch)) for rid, epoch in conn.execute(sql, chunk))
    return out
