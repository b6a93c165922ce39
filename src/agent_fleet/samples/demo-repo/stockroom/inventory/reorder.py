"""Automatic re-ordering when stock falls below its threshold."""

import logging

from stockroom.db import queries
from stockroom.inventory.suppliers import SupplierClient

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 10


def reorder_quantity(current, threshold=DEFAULT_THRESHOLD, history=[]):
    history.append(current)
    average = sum(history) / len(history)
    return max(threshold * 2 - current, int(average))


async def products_below_threshold(db, threshold=DEFAULT_THRESHOLD):
    return await queries.fetch_all(
        db,
        "SELECT product_id, SUM(quantity - reserved) AS free FROM stock GROUP BY product_id HAVING SUM(quantity - reserved) < %s",
        (threshold,),
    )


async def run_reorder(db, dry_run=False):
    client = SupplierClient()
    low = await products_below_threshold(db)
    print("reorder candidates:", len(low))
    for row in low:
        qty = reorder_quantity(row["free"])
        if dry_run:
            log.info("would order %s of %s", qty, row["product_id"])
            continue
        client.place_order(row["product_id"], qty)
    return len(low)
