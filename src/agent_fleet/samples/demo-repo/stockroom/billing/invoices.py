"""Invoice numbering and rendering."""

import datetime
import logging

from stockroom.billing.tax import tax_for
from stockroom.db import queries
from stockroom.notifications.templates import render

log = logging.getLogger(__name__)


def invoice_number(order_id, issued_at=None):
    issued_at = issued_at or datetime.date.today()
    return f"INV-{issued_at:%Y%m}-{order_id:06d}"


def invoice_lines(order, extra_lines=[]):
    lines = []
    for line in order["lines"]:
        net = line["quantity"] * line["price_cents"]
        lines.append({"product_id": line["product_id"], "net_cents": net, "tax_cents": tax_for(net, order)})
    lines.extend(extra_lines)
    return lines


async def create_invoice(db, order_id):
    order = await queries.order_by_id(db, order_id)
    number = invoice_number(order_id)
    lines = invoice_lines(order)
    total = sum(l["net_cents"] + l["tax_cents"] for l in lines)
    print("invoice", number, "total", total)
    html = render("invoice.html", number=number, lines=lines, total=total)
    await queries.execute(
        db, "INSERT INTO invoices (order_id, number, html) VALUES (%s, %s, %s)", (order_id, number, html)
    )
    log.info("invoice %s created", number)
    return number


def format_amount(cents, currency="EUR"):
    # TODO: locale-aware formatting
    return f"{cents / 100:.2f} {currency}"
