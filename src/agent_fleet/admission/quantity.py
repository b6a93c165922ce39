"""Kubernetes resource quantities as Kueue counts them.

Kueue keeps every quota and request as an ``int64``: CPU in milli-units
(``Quantity.MilliValue``), every other resource in whole units rounded up
(``Quantity.Value``). The same convention is used here so quota arithmetic is exact
integer arithmetic, and :func:`format_quantity` turns a count back into what a user wrote.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

__all__ = ["format_quantity", "parse_decimal", "parse_quantity"]

_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")
# Far beyond any real quota; bounds the work a hostile exponent can cause.
_LIMIT = Decimal("1e24")


def _scale(resource: str) -> int:
    return 1000 if resource == "cpu" else 1


def parse_quantity(resource: str, value: object) -> int:
    """The integer count Kueue uses for ``value`` of ``resource``; ValueError when malformed."""
    number = parse_decimal(value)
    return int((number * _scale(resource)).to_integral_value(rounding=ROUND_CEILING))


def parse_decimal(value: object) -> Decimal:
    """The exact number a quantity spells (``0.99``, ``500m``, ``2Ki``); ValueError when malformed."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        number = Decimal(repr(value))
    elif isinstance(value, str):
        match = _QUANTITY.match(value.strip())
        if not match:
            raise ValueError(f"not a quantity: {value!r}")
        digits, exponent, suffix = match.groups()
        try:
            number = Decimal(digits)
            if exponent:
                exp = int(exponent[1:])
                if abs(exp) > 30:
                    raise ValueError(f"quantity out of range: {value!r}")
                number = number.scaleb(exp)
            else:
                number *= _SUFFIX[suffix or ""]
        except InvalidOperation as exc:
            raise ValueError(f"not a quantity: {value!r}") from exc
    else:
        raise ValueError(f"not a quantity: {value!r}")
    if not number.is_finite() or abs(number) > _LIMIT:
        raise ValueError(f"quantity out of range: {value!r}")
    return number


def format_quantity(resource: str, count: int) -> str:
    """The shortest plain spelling of ``count`` (``500m``, ``2``, ``1.5`` never appears)."""
    if resource == "cpu" and count % 1000:
        return f"{count}m"
    return str(count // _scale(resource))
