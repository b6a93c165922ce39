"""Database access: pool, models, queries, migrations and a small cache."""
