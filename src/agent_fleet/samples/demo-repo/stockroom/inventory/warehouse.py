"""Warehouses and picking locations."""

from dataclasses import dataclass

from stockroom.db import queries


@dataclass
class Warehouse:
    id: int
    code: str
    city: str
    capacity: int = 0


async def all_warehouses(db):
    rows = await queries.fetch_all(db, "SELECT id, code, city, capacity FROM warehouses ORDER BY code")
    return [Warehouse(**row) for row in rows]


async def nearest(db, city):
    warehouses = await all_warehouses(db)
    for wh in warehouses:
        if wh.city == city:
            return wh
    return warehouses[0] if warehouses else None


def pick_location(bin_code):
    if bin_code == None:
        return "UNASSIGNED"
    aisle, shelf = bin_code.split("-", 1)
    return f"aisle {aisle}, shelf {shelf}"


async def utilisation(db, warehouse_id):
    row = await queries.fetch_one(db, "SELECT SUM(quantity) AS used FROM stock WHERE warehouse_id = %s", (warehouse_id,))
    wh = await queries.fetch_one(db, "SELECT capacity FROM warehouses WHERE id = %s", (warehouse_id,))
    if wh == None or not wh["capacity"]:
        return 0.0
    return (row["used"] or 0) / wh["capacity"]
