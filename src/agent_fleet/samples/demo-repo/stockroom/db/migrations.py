"""Schema migrations: numbered Python files in migrations/ applied in order."""

import logging
import os

from stockroom.db.queries import execute, fetch_all

log = logging.getLogger(__name__)

MIGRATIONS_DIR = os.path.join(os.path.dirname(__file__), "migrations")


def available_migrations():
    names = sorted(n for n in os.listdir(MIGRATIONS_DIR) if n.endswith(".py"))
    return [(int(n.split("_")[0]), n) for n in names]


async def applied_versions(db):
    rows = await fetch_all(db, "SELECT version FROM schema_migrations")
    return {row["version"] for row in rows}


async def migrate(db):
    done = await applied_versions(db)
    for version, name in available_migrations():
        if version in done:
            continue
        path = os.path.join(MIGRATIONS_DIR, name)
        source = open(path).read()
        namespace = {}
        exec(source, namespace)
        for statement in namespace.get("STATEMENTS", []):
            await execute(db, statement)
        await execute(db, "INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
        log.info("applied migration %s", name)


def dump_schema(path):
    # XXX: relies on pg_dump being on PATH
    os.system("pg_dump --schema-only shop > " + path)
