from stockroom.billing.invoices import format_amount, invoice_number
from stockroom.billing.tax import gross, rate_for


def test_invoice_number_format():
    import datetime

    assert invoice_number(42, datetime.date(2024, 3, 1)) == "INV-202403-000042"


def test_rates():
    assert rate_for("DE") == 0.19
    assert rate_for("DE", reduced=True) == 0.07


def test_gross():
    assert gross(1000, "FR") == 1200


def test_format_amount():
    assert format_amount(1999) == "19.99 EUR"
    print(format_amount(5, "USD"))
