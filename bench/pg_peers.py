#!/usr/bin/env python3
"""The PostgreSQL job queues bench/pg_queue.py measures the shared store against, run in bench/.venv-pg-peers
(bench/setup-pg-peers.sh): one process per role.

    pg_peers.py pgqueuer install|enqueue N|worker DSN
    pg_peers.py procrastinate install|enqueue N|worker DSN
    pg_peers.py count N SQL DSN

install: the peer's schema. enqueue N: N no-op jobs, 500 a statement (each peer's batch API), then exits.
count: polls SQL (one count) every 10 ms on one connection until it is at least N, then exits.
worker: runs no-op jobs (each peer's defaults for a worker: pgqueuer dequeues 10 at a time, procrastinate runs
10 concurrent jobs) until SIGTERM; prints "ready" once it listens. Jobs are counted at their committed end by the
caller, from the database.
"""
import asyncio, signal, sys

BATCH = 500


async def asyncpg_connect(dsn):
    """asyncpg takes no libpq keyword string: its words as arguments."""
    import asyncpg

    words = dict(word.split("=", 1) for word in dsn.split())
    return await asyncpg.connect(host=words["host"], port=int(words["port"]), user=words["user"],
                                 database=words["dbname"])


async def pgqueuer_main(role, dsn, n):
    import asyncpg
    from datetime import timedelta
    from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
    from pgqueuer.adapters.persistence.queries import Queries
    from pgqueuer.core.qm import QueueManager

    connection = await asyncpg_connect(dsn)
    driver = AsyncpgDriver(connection)
    if role == "install":
        await Queries(driver).install()
        return
    if role == "enqueue":
        queries = Queries(driver)
        for start in range(0, n, BATCH):
            size = min(BATCH, n - start)
            await queries.enqueue(["noop"] * size, [None] * size, [0] * size)
        return
    qm = QueueManager(Queries(driver))

    @qm.entrypoint("noop")
    async def noop(job):
        pass

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, qm.shutdown.set)
    loop.call_later(0.5, lambda: print("ready", flush=True))
    await qm.run(log_aggregation_interval=timedelta(0))


async def procrastinate_main(role, dsn, n):
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    async def noop():
        pass

    async with app.open_async():
        if role == "install":
            await app.schema_manager.apply_schema_async()
            return
        if role == "enqueue":
            for start in range(0, n, BATCH):
                await noop.batch_defer_async(*([{}] * min(BATCH, n - start)))
            return
        worker = asyncio.ensure_future(app.run_worker_async(concurrency=10, install_signal_handlers=False))
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, worker.cancel)
        loop.call_later(0.5, lambda: print("ready", flush=True))
        try:
            await worker
        except asyncio.CancelledError:
            pass


async def count_main(n, sql, dsn):
    import asyncpg

    connection = await asyncpg_connect(dsn)
    while (await connection.fetchval(sql)) < n:
        await asyncio.sleep(0.01)


def main():
    if sys.argv[1] == "count":
        return asyncio.run(count_main(int(sys.argv[2]), sys.argv[3], sys.argv[4]))
    peer, role, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    n = int(rest.pop(0)) if role == "enqueue" else 0
    run = {"pgqueuer": pgqueuer_main, "procrastinate": procrastinate_main}[peer]
    asyncio.run(run(role, rest[0], n))


if __name__ == "__main__":
    main()
