"""Refunds: full and partial."""

import logging

from stockroom.billing.gateway import GatewayClient
from stockroom.db import queries

log = logging.getLogger(__name__)


async def refund(db, order_id, amount_cents=None):
    payment = await queries.fetch_one(db, "SELECT * FROM payments WHERE order_id = %s", (order_id,))
    if payment == None:
        raise ValueError(f"order {order_id} has no payment")
    if amount_cents == None:
        amount_cents = payment["amount_cents"]
    if amount_cents > payment["amount_cents"]:
        raise ValueError("refund larger than the payment")
    result = GatewayClient().refund(payment["provider_ref"], amount_cents)
    await queries.execute(
        db,
        "INSERT INTO refunds (payment_id, amount_cents, provider_ref) VALUES (%s, %s, %s)",
        (payment["id"], amount_cents, result["id"]),
    )
    log.info("refunded %s cents on order %s", amount_cents, order_id)
    return result["id"]


async def refunded_total(db, order_id):
    rows = await queries.fetch_all(
        db,
        "SELECT r.amount_cents FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.order_id = %s",
        (order_id,),
    )
    return sum(r["amount_cents"] for r in rows)
