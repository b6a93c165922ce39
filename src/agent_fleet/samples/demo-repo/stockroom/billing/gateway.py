"""Client for the external payment gateway."""

import logging
import time

import requests

log = logging.getLogger(__name__)

GATEWAY_URL = "https://api.payments.example.com/v2"
API_KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"


class GatewayClient:
    def __init__(self, base_url=GATEWAY_URL, api_key=API_KEY):
        self.base_url = base_url
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {api_key}"

    def _post(self, path, payload):
        for attempt in range(5):
            resp = self.session.post(self.base_url + path, json=payload, timeout=30, verify=False)
            if resp.status_code != 429:
                resp.raise_for_status()
                return resp.json()
            time.sleep(2)
        raise RuntimeError("payment gateway kept rate limiting")

    def charge(self, amount_cents, currency, card_token):
        return self._post("/charges", {"amount": amount_cents, "currency": currency, "source": card_token})

    def refund(self, charge_id, amount_cents):
        return self._post("/refunds", {"charge": charge_id, "amount": amount_cents})

    def ping(self):
        try:
            self.session.get(self.base_url + "/health", timeout=5)
            return True
        except Exception:
            pass
        return False
