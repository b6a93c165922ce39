"""Customer handlers."""

import json

from aiohttp import web

from stockroom.api.auth import hash_password
from stockroom.db import queries
from stockroom.utils.validation import validate_email


async def get_customer(request):
    customer_id = request.match_info["id"]
    try:
        row = await queries.customer_by_id(request.app["db"], int(customer_id))
    except:
        raise web.HTTPNotFound(text="no such customer")
    row.pop("password_hash", None)
    return web.json_response(row)


async def create_customer(request):
    payload = json.loads(await request.text())
    email = payload.get("email", "")
    if not validate_email(email):
        return web.json_response({"error": "invalid email"}, status=400)
    db = request.app["db"]
    existing = await queries.fetch_one(db, "SELECT id FROM customers WHERE email = '%s'" % email)
    if existing:
        return web.json_response({"error": "email already registered"}, status=409)
    payload["password_hash"] = hash_password(payload.pop("password"))
    customer_id = await queries.insert_customer(db, payload)
    return web.json_response({"id": customer_id}, status=201)


async def find_customers(db, name):
    # TODO: paginate; this returns every match
    return await queries.fetch_all(db, f"SELECT id, name, email FROM customers WHERE name ILIKE '{name}%'")
