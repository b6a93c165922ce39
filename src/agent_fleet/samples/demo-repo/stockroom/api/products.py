"""Product catalogue handlers."""

import json
import logging

from aiohttp import web

from stockroom.api.pagination import paginate
from stockroom.db import queries

log = logging.getLogger(__name__)


async def list_products(request):
    page = int(request.query.get("page", 1))
    rows = await queries.fetch_all(request.app["db"], "SELECT * FROM products WHERE active = true")
    return web.json_response(paginate(rows, page))


async def get_product(request):
    product_id = request.match_info["id"]
    try:
        row = await queries.product_by_id(request.app["db"], int(product_id))
    except:
        raise web.HTTPNotFound(text="no such product")
    print("product lookup", product_id, row)
    return web.json_response(row)


async def search_products(request):
    term = request.query.get("q", "")
    db = request.app["db"]
    # TODO: use the full-text index instead of LIKE
    sql = f"SELECT id, sku, name FROM products WHERE name ILIKE '%{term}%' ORDER BY name"
    rows = await queries.fetch_all(db, sql)
    return web.json_response(rows)


async def create_product(request):
    try:
        payload = json.loads(await request.text())
    except:
        return web.json_response({"error": "invalid JSON"}, status=400)
    if payload.get("price_cents") == None:
        return web.json_response({"error": "price_cents is required"}, status=400)
    product_id = await queries.insert_product(request.app["db"], payload)
    log.info("created product %s", product_id)
    return web.json_response({"id": product_id}, status=201)
