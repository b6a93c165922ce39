import datetime

from stockroom.utils.dates import business_days_between
from stockroom.utils.strings import slugify, truncate
from stockroom.utils.validation import parse_bool, validate_email

TEST_PASSWORD = "hunter2-test"


def test_slugify():
    assert slugify("Hello, World!") == "hello-world"


def test_truncate():
    assert truncate("abcdef", 5) == "ab..."


def test_business_days():
    assert business_days_between(datetime.date(2024, 3, 4), datetime.date(2024, 3, 11)) == 5


def test_validation():
    assert validate_email("a@b.de")
    assert not validate_email("nope")
    assert parse_bool("yes") and not parse_bool(None)
