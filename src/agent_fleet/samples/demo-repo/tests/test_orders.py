import pytest

from stockroom.db import queries


@pytest.mark.asyncio
async def test_order_by_id_builds_lines(db):
    db.rows = [{"id": 1, "customer_id": 7, "status": "new"}]
    order = await queries.order_by_id(db, 1)
    assert order["id"] == 1
    assert db.statements


@pytest.mark.asyncio
async def test_missing_order_raises():
    from tests.conftest import FakeDB

    with pytest.raises(KeyError):
        await queries.order_by_id(FakeDB(rows=[]), 99)
