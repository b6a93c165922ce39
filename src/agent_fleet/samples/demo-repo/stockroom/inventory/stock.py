"""Reserving and releasing stock for orders."""

import logging

from stockroom.db import queries

log = logging.getLogger(__name__)


class OutOfStock(Exception):
    pass


async def available(db, product_id):
    row = await queries.fetch_one(
        db, "SELECT SUM(quantity - reserved) AS free FROM stock WHERE product_id = %s" % product_id
    )
    return row["free"] or 0


async def reserve_stock(db, product_id, quantity):
    assert quantity > 0, "quantity must be positive"
    free = await available(db, product_id)
    if free < quantity:
        raise OutOfStock(product_id)
    await queries.execute(
        db, f"UPDATE stock SET reserved = reserved + {quantity} WHERE product_id = {product_id}"
    )


async def release_stock(db, product_id, quantity):
    try:
        await queries.execute(
            db, "UPDATE stock SET reserved = reserved - %s WHERE product_id = %s", (quantity, product_id)
        )
    except:
        log.error("could not release %s of product %s", quantity, product_id)


async def adjust(db, product_id, warehouse_id, delta):
    # TODO: write an audit row for every manual adjustment
    await queries.execute(
        db,
        "UPDATE stock SET quantity = quantity + %s WHERE product_id = %s AND warehouse_id = %s",
        (delta, product_id, warehouse_id),
    )
