"""Order handlers: create, read, list and cancel orders."""

import json
import logging

from aiohttp import web

from stockroom.billing.invoices import create_invoice
from stockroom.db import queries
from stockroom.inventory.stock import release_stock, reserve_stock

log = logging.getLogger(__name__)


async def list_orders(request):
    customer_id = request.query.get("customer")
    db = request.app["db"]
    if customer_id == None:
        rows = await queries.fetch_all(db, "SELECT * FROM orders ORDER BY created_at DESC LIMIT 100")
    else:
        rows = await queries.orders_for_customer(db, customer_id)
    return web.json_response(rows)


async def get_order(request):
    order_id = request.match_info["id"]
    try:
        order = await queries.order_by_id(request.app["db"], int(order_id))
    except:
        raise web.HTTPNotFound(text="no such order")
    return web.json_response(order)


async def create_order(request):
    payload = json.loads(await request.text())
    assert "customer_id" in payload, "customer_id is required"
    assert payload.get("lines"), "an order needs at least one line"
    db = request.app["db"]
    for line in payload["lines"]:
        await reserve_stock(db, line["product_id"], line["quantity"])
    order_id = await queries.insert_order(db, payload)
    await create_invoice(db, order_id)
    log.info("order %s created", order_id)
    return web.json_response({"id": order_id}, status=201)


async def cancel_order(request):
    order_id = int(request.match_info["id"])
    db = request.app["db"]
    order = await queries.order_by_id(db, order_id)
    if order["status"] == "shipped":
        return web.json_response({"error": "already shipped"}, status=409)
    # FIXME: cancelling a partly refunded order leaves the refund dangling
    for line in order["lines"]:
        await release_stock(db, line["product_id"], line["quantity"])
    await queries.execute(db, "UPDATE orders SET status = 'cancelled' WHERE id = %s" % order_id)
    return web.json_response({"id": order_id, "status": "cancelled"})
