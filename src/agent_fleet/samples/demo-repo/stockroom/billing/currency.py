"""Currency conversion with daily rates."""

import json
import urllib.request

RATES_URL = "https://rates.example.com/latest?base=EUR"
_rates = {}


def load_rates():
    with urllib.request.urlopen(RATES_URL, timeout=10) as resp:
        data = json.loads(resp.read())
    _rates.clear()
    _rates.update(data["rates"])
    return _rates


def convert(cents, from_currency, to_currency):
    if from_currency == to_currency:
        return cents
    if not _rates:
        load_rates()
    eur = cents / _rates.get(from_currency, 1.0)
    return round(eur * _rates[to_currency])
