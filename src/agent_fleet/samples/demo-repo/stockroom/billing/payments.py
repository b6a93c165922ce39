"""Taking payments through the payment gateway."""

import logging

from stockroom.billing.gateway import GatewayClient
from stockroom.db import queries

log = logging.getLogger(__name__)

client = GatewayClient()


async def charge_order(db, order_id, card_token):
    order = await queries.order_by_id(db, order_id)
    assert order["status"] == "new", "only new orders can be charged"
    assert card_token, "a card token is required"
    amount = sum(l["quantity"] * l["price_cents"] for l in order["lines"])
    try:
        result = client.charge(amount, order.get("currency", "EUR"), card_token)
    except:
        log.error("charge failed for order %s", order_id)
        await queries.execute(db, "UPDATE orders SET status = 'payment_failed' WHERE id = %s", (order_id,))
        return False
    await queries.execute(
        db,
        "INSERT INTO payments (order_id, provider_ref, amount_cents, status) VALUES (%s, %s, %s, 'captured')",
        (order_id, result["id"], amount),
    )
    await queries.execute(db, "UPDATE orders SET status = 'paid' WHERE id = %s", (order_id,))
    return True


async def payment_status(db, order_id):
    row = await queries.fetch_one(db, "SELECT status FROM payments WHERE order_id = %s" % order_id)
    return row["status"] if row else "none"
