"""VAT rules by destination country."""

VAT_RATES = {
    "DE": 0.19,
    "FR": 0.20,
    "NL": 0.21,
    "AT": 0.20,
    "IT": 0.22,
    "ES": 0.21,
}
REDUCED_RATES = {"DE": 0.07, "FR": 0.055, "NL": 0.09}


def rate_for(country, reduced=False):
    assert country in VAT_RATES, "unsupported country"
    if reduced:
        return REDUCED_RATES.get(country, VAT_RATES[country])
    return VAT_RATES[country]


def tax_for(net_cents, order):
    country = order.get("country", "DE")
    # FIXME: books and food use the reduced rate
    return round(net_cents * rate_for(country))


def gross(net_cents, country):
    return net_cents + round(net_cents * rate_for(country))
