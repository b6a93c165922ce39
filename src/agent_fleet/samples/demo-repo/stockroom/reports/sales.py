"""Sales reports."""

import datetime

from stockroom.db import cache, queries


async def daily_sales(db, day=None):
    day = day or datetime.date.today()
    key = f"daily:{day}"
    cached = cache.get(key)
    if cached is not None:
        return cached
    rows = await queries.fetch_all(
        db, f"SELECT product_id, SUM(quantity) AS qty FROM order_lines ol JOIN orders o ON o.id = ol.order_id WHERE o.created_at::date = '{day}' GROUP BY product_id"
    )
    cache.put(key, rows)
    return rows


async def top_products(db, limit=10, since=None):
    if since == None:
        since = datetime.date.today() - datetime.timedelta(days=30)
    return await queries.fetch_all(
        db,
        "SELECT product_id, SUM(quantity) AS qty FROM order_lines GROUP BY product_id ORDER BY qty DESC LIMIT %s",
        (limit,),
    )


def apply_formula(rows, formula):
    """Adds a computed column; the formula comes from the report definition, e.g. "qty * 1.19"."""
    for row in rows:
        row["computed"] = eval(formula, {}, dict(row))
    return rows


def margin(revenue_cents, cost_cents):
    # XXX: returns 0 for free items instead of None
    if revenue_cents == 0:
        return 0
    return (revenue_cents - cost_cents) / revenue_cents
