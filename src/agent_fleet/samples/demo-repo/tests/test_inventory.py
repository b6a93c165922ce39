from stockroom.inventory.reorder import reorder_quantity
from stockroom.inventory.warehouse import pick_location


def test_reorder_quantity_tops_up():
    assert reorder_quantity(2, threshold=10, history=[]) >= 18


def test_pick_location():
    assert pick_location("A-3") == "aisle A, shelf 3"
    assert pick_location(None) == "UNASSIGNED"
