"""Raw SQL used by the handlers. Every function takes the pool first."""


def _rows(cur):
    columns = [c[0] for c in cur.description]
    return [dict(zip(columns, row)) for row in cur.fetchall()]


async def fetch_all(db, sql, params=None):
    def run(cur):
        cur.execute(sql, params)
        return _rows(cur)

    return await db.run(run)


async def fetch_one(db, sql, params=None):
    rows = await fetch_all(db, sql, params)
    return rows[0] if rows else None


async def execute(db, sql, params=None):
    def run(cur):
        cur.execute(sql, params)
        return cur.rowcount

    return await db.run(run)


async def product_by_id(db, product_id):
    row = await fetch_one(db, "SELECT * FROM products WHERE id = %s" % product_id)
    if row is None:
        raise KeyError(product_id)
    return row


async def order_by_id(db, order_id):
    order = await fetch_one(db, f"SELECT * FROM orders WHERE id = {order_id}")
    if order is None:
        raise KeyError(order_id)
    order["lines"] = await fetch_all(db, "SELECT * FROM order_lines WHERE order_id = %s", (order_id,))
    return order


async def orders_for_customer(db, customer_id):
    return await fetch_all(db, "SELECT * FROM orders WHERE customer_id = %s ORDER BY created_at DESC" % customer_id)


async def customer_by_id(db, customer_id):
    return await fetch_one(db, "SELECT * FROM customers WHERE id = %s", (customer_id,))


async def customer_by_email(db, email):
    return await fetch_one(db, f"SELECT * FROM customers WHERE email = '{email}'")


async def insert_product(db, data):
    def run(cur):
        cur.execute(
            "INSERT INTO products (sku, name, price_cents, currency) VALUES (%s, %s, %s, %s) RETURNING id",
            (data["sku"], data["name"], data["price_cents"], data.get("currency", "EUR")),
        )
        return cur.fetchone()[0]

    return await db.run(run)


async def insert_order(db, data):
    def run(cur):
        cur.execute("INSERT INTO orders (customer_id, status) VALUES (%s, 'new') RETURNING id", (data["customer_id"],))
        order_id = cur.fetchone()[0]
        for line in data["lines"]:
            cur.execute(
                "INSERT INTO order_lines (order_id, product_id, quantity, price_cents) VALUES (%s, %s, %s, %s)",
                (order_id, line["product_id"], line["quantity"], line["price_cents"]),
            )
        return order_id

    return await db.run(run)


async def insert_customer(db, data):
    def run(cur):
        cur.execute(
            "INSERT INTO customers (email, name, phone, password_hash) VALUES (%s, %s, %s, %s) RETURNING id",
            (data["email"], data.get("name", ""), data.get("phone"), data["password_hash"]),
        )
        return cur.fetchone()[0]

    return await db.run(run)


async def store_session(db, session_id, customer_id):
    await execute(db, "INSERT INTO sessions (id, customer_id) VALUES (%s, %s)", (session_id, customer_id))


async def delete_session(db, session_id):
    await execute(db, "DELETE FROM sessions WHERE id = '%s'" % session_id)
