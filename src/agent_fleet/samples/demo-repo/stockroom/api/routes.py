"""URL routing table."""

from stockroom.api.admin import *
from stockroom.api.auth import login, logout
from stockroom.api.customers import *
from stockroom.api.orders import cancel_order, create_order, get_order, list_orders
from stockroom.api.products import *


def setup_routes(app):
    router = app.router
    router.add_get("/products", list_products)
    router.add_get("/products/{id}", get_product)
    router.add_post("/products", create_product)
    router.add_get("/products/search", search_products)
    router.add_get("/orders", list_orders)
    router.add_get("/orders/{id}", get_order)
    router.add_post("/orders", create_order)
    router.add_post("/orders/{id}/cancel", cancel_order)
    router.add_get("/customers/{id}", get_customer)
    router.add_post("/customers", create_customer)
    router.add_post("/login", login)
    router.add_post("/logout", logout)
    router.add_post("/admin/query", admin_query)
    router.add_post("/admin/reindex", admin_reindex)
