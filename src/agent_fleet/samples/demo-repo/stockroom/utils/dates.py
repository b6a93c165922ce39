"""Date helpers."""

import datetime

__all__ = ["today", "parse_date", "start_of_month", "business_days_between"]


def today():
    return datetime.date.today()


def parse_date(text):
    return datetime.datetime.strptime(text, "%Y-%m-%d").date()


def start_of_month(day=None):
    day = day or today()
    return day.replace(day=1)


def business_days_between(start, end):
    days = 0
    current = start
    while current < end:
        if current.weekday() < 5:
            days += 1
        current += datetime.timedelta(days=1)
    return days
