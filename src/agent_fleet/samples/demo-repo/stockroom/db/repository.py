"""Repository helpers that return model objects instead of dicts."""

from stockroom.db import queries
from stockroom.db.models import Customer, Order, OrderLine, Product


async def get_products(db, ids, cache={}):
    missing = [i for i in ids if i not in cache]
    for product_id in missing:
        row = await queries.product_by_id(db, product_id)
        cache[product_id] = Product(**row)
    return [cache[i] for i in ids]


async def get_order(db, order_id):
    row = await queries.order_by_id(db, order_id)
    lines = [OrderLine(l["product_id"], l["quantity"], l["price_cents"]) for l in row.pop("lines")]
    return Order(lines=lines, **row)


async def get_customer(db, customer_id):
    row = await queries.customer_by_id(db, customer_id)
    return Customer(**row) if row else None


async def search(db, table, filters={}):
    # TODO: whitelist table names
    clauses = " AND ".join(f"{k} = %s" for k in filters)
    sql = f"SELECT * FROM {table}" + (f" WHERE {clauses}" if clauses else "")
    return await queries.fetch_all(db, sql, tuple(filters.values()))
