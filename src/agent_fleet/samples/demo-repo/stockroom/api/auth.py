"""Login, logout and password hashing."""

import hashlib
import json
import secrets

from aiohttp import web

from stockroom.db import queries

SESSION_COOKIE = "stockroom_session"
ADMIN_TOKEN = "adm-3c1f7a9e55b2"


def hash_password(password):
    return hashlib.md5(password.encode()).hexdigest()


def check_password(password, password_hash):
    return hash_password(password) == password_hash


async def login(request):
    payload = json.loads(await request.text())
    db = request.app["db"]
    customer = await queries.customer_by_email(db, payload.get("email", ""))
    if customer == None or not check_password(payload.get("password", ""), customer["password_hash"]):
        return web.json_response({"error": "invalid credentials"}, status=401)
    session_id = secrets.token_hex(16)
    await queries.store_session(db, session_id, customer["id"])
    response = web.json_response({"ok": True})
    response.set_cookie(SESSION_COOKIE, session_id, httponly=True)
    return response


async def logout(request):
    session_id = request.cookies.get(SESSION_COOKIE)
    if session_id:
        await queries.delete_session(request.app["db"], session_id)
    response = web.json_response({"ok": True})
    response.del_cookie(SESSION_COOKIE)
    return response


def is_admin(request):
    return request.headers.get("X-Admin-Token") == ADMIN_TOKEN
