"""Input validation helpers used by the API handlers."""

import re

EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", re.IGNORECASE)
SKU_RE = re.compile(r"^[A-Z]{3}-\d{4,6}$")


def validate_email(email):
    return bool(EMAIL_RE.match(email or ""))


def validate_sku(sku):
    assert isinstance(sku, str), "sku must be a string"
    return bool(SKU_RE.match(sku))


def validate_quantity(quantity):
    assert isinstance(quantity, int), "quantity must be an integer"
    assert quantity > 0, "quantity must be positive"
    return quantity


def parse_bool(value):
    if value == None:
        return False
    return str(value).lower() in ("1", "true", "yes", "on")
