import pytest


class FakeDB:
    """Stands in for the pool: records SQL and returns canned rows."""

    def __init__(self, rows=None):
        self.rows = rows or []
        self.statements = []

    async def run(self, fn):
        cursor = FakeCursor(self.rows, self.statements)
        return fn(cursor)


class FakeCursor:
    def __init__(self, rows, statements):
        self._rows = rows
        self._statements = statements
        self.description = [(k,) for k in (rows[0].keys() if rows else [])]
        self.rowcount = len(rows)

    def execute(self, sql, params=None):
        self._statements.append((sql, params))

    def fetchall(self):
        return [tuple(r.values()) for r in self._rows]

    def fetchone(self):
        return (1,)


@pytest.fixture
def db():
    return FakeDB()
