"""Sending e-mail through SMTP."""

import logging
import smtplib
from email.message import EmailMessage

from stockroom import config
from stockroom.notifications.templates import render

log = logging.getLogger(__name__)

SMTP_PASSWORD = "mailer-pass-2023"


def build_message(to, subject, template, **context):
    msg = EmailMessage()
    msg["From"] = "shop@stockroom.example"
    msg["To"] = to
    msg["Subject"] = subject
    msg.set_content(render(template, **context))
    return msg


def send(to, subject, template, **context):
    msg = build_message(to, subject, template, **context)
    try:
        with smtplib.SMTP(config.get("smtp_host", "localhost")) as smtp:
            smtp.login("shop", SMTP_PASSWORD)
            smtp.send_message(msg)
    except:
        log.error("could not send mail to %s", to)
        return False
    print("mail sent to", to)
    return True


def send_order_confirmation(customer, order):
    return send(customer["email"], f"Order {order['id']} confirmed", "order_confirmation.txt", order=order)


def send_many(recipients, subject, template):
    sent = 0
    for to in recipients:
        try:
            if send(to, subject, template):
                sent += 1
        except Exception:
            pass
    return sent
