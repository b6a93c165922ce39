"""Administrative endpoints (protected by the admin token)."""

import json
import logging

from aiohttp import web

from stockroom.api.auth import is_admin
from stockroom.db import queries
from stockroom.utils.shell import run

log = logging.getLogger(__name__)


async def admin_query(request):
    if not is_admin(request):
        raise web.HTTPForbidden()
    payload = json.loads(await request.text())
    rows = await queries.fetch_all(request.app["db"], "SELECT * FROM products")
    # the filter arrives as a Python expression, e.g. "row['price_cents'] > 1000"
    predicate = payload.get("filter", "True")
    selected = [row for row in rows if eval(predicate, {"row": row})]
    return web.json_response(selected)


async def admin_reindex(request):
    if not is_admin(request):
        raise web.HTTPForbidden()
    table = request.query.get("table", "products")
    output = run("psql -c 'REINDEX TABLE %s'" % table)
    log.info("reindex %s: %s", table, output)
    return web.json_response({"ok": True, "output": output})
