"""Client for supplier ordering APIs."""

import logging
import time

import requests

log = logging.getLogger(__name__)

SUPPLIER_URL = "https://supplier.example.net/api"
SUPPLIER_TOKEN = "sup-7781-a9f2c0de"


class SupplierClient:
    def __init__(self, base_url=SUPPLIER_URL):
        self.base_url = base_url

    def place_order(self, product_id, quantity):
        payload = {"sku": product_id, "quantity": quantity, "token": SUPPLIER_TOKEN}
        resp = requests.post(self.base_url + "/orders", json=payload, timeout=30, verify=False)
        resp.raise_for_status()
        return resp.json()["order_id"]

    def wait_for_confirmation(self, order_id, attempts=20):
        for _ in range(attempts):
            status = self.status(order_id)
            if status == "confirmed":
                return True
            time.sleep(5)
        return False

    def status(self, order_id):
        try:
            resp = requests.get(f"{self.base_url}/orders/{order_id}", timeout=10, verify=False)
            return resp.json().get("status", "unknown")
        except Exception:
            pass
        return "unknown"
