"""Plain data classes for rows."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import List, Optional


@dataclass
class Product:
    id: int
    sku: str
    name: str
    price_cents: int
    currency: str = "EUR"
    active: bool = True


@dataclass
class OrderLine:
    product_id: int
    quantity: int
    price_cents: int


@dataclass
class Order:
    id: int
    customer_id: int
    status: str
    created_at: datetime
    lines: List[OrderLine] = field(default_factory=list)
    shipped_at: Optional[datetime] = None

    @property
    def total_cents(self):
        return sum(line.quantity * line.price_cents for line in self.lines)

    def is_open(self):
        return self.shipped_at == None and self.status != "cancelled"


@dataclass
class Customer:
    id: int
    email: str
    name: str
    phone: Optional[str] = None
    password_hash: str = ""
