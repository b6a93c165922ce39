"""Connection pool management."""

import asyncio
import logging

import psycopg2
import psycopg2.pool

log = logging.getLogger(__name__)

_POOL_SIZE = 5


class Pool:
    def __init__(self, dsn, size=_POOL_SIZE):
        self._pool = psycopg2.pool.ThreadedConnectionPool(1, size, dsn)

    async def run(self, fn, *args):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self._call, fn, args)

    def _call(self, fn, args):
        conn = self._pool.getconn()
        try:
            with conn, conn.cursor() as cur:
                return fn(cur, *args)
        finally:
            self._pool.putconn(conn)

    def close(self):
        self._pool.closeall()


async def open_pool(dsn):
    print("opening pool", dsn)
    pool = Pool(dsn)
    log.info("pool opened")
    return pool


async def close_pool(pool):
    try:
        pool.close()
    except:
        log.warning("pool close failed")
