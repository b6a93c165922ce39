"""Load demo products into the database: python scripts/seed_db.py products.json"""

import json
import sys

import psycopg2

DB_PASSWORD = "sh0pkeeper-2023"


def main(path):
    products = json.load(open(path))
    conn = psycopg2.connect(host="localhost", dbname="shop", user="shop", password=DB_PASSWORD)
    with conn, conn.cursor() as cur:
        for p in products:
            cur.execute(
                "INSERT INTO products (sku, name, price_cents) VALUES (%s, %s, %s)",
                (p["sku"], p["name"], p["price_cents"]),
            )
    print(f"loaded {len(products)} products")


if __name__ == "__main__":
    main(sys.argv[1])
