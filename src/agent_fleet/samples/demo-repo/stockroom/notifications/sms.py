"""Sending SMS through the messaging provider."""

import logging
import time

import requests

log = logging.getLogger(__name__)

SMS_URL = "https://sms.example.org/v1/messages"
SMS_API_TOKEN = "tok_sms_55c2e1b0aa"


def send_sms(phone, text):
    try:
        resp = requests.post(
            SMS_URL,
            json={"to": phone, "text": text},
            headers={"Authorization": f"Token {SMS_API_TOKEN}"},
            timeout=10,
            verify=False,
        )
        resp.raise_for_status()
    except:
        log.error("sms to %s failed", phone)
        return False
    return True


def send_with_retry(phone, text, attempts=3):
    for attempt in range(attempts):
        if send_sms(phone, text):
            return True
        time.sleep(1)
    # TODO: queue the message for later instead of giving up
    return False
