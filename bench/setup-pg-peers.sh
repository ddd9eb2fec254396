#!/bin/sh
# Makes bench/.venv-pg-peers with the PostgreSQL job queues bench/pg_queue.py measures the shared store against:
# pgqueuer (asyncpg) and procrastinate (psycopg 3), pinned. Never committed.
set -eu
cd "$(dirname "$0")"
if [ ! -x .venv-pg-peers/bin/python ]; then
    python3 -m venv .venv-pg-peers
fi
.venv-pg-peers/bin/pip install --quiet --disable-pip-version-check \
    pgqueuer==1.6.0 asyncpg==0.32.0 procrastinate==3.10.0 'psycopg[binary]'
.venv-pg-peers/bin/python -c 'import importlib.metadata as m; print(*(f"{p} {m.version(p)}" for p in ("pgqueuer", "procrastinate", "asyncpg", "psycopg")))'
