"""Stock levels, warehouses, re-ordering and suppliers."""
