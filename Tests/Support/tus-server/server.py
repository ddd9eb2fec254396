"""A real tus 1.0 server for the tests: tuspyserver's FastAPI router under uvicorn, on 127.0.0.1 only.

    .venv-tus/bin/python Tests/Support/tus-server/server.py --files-dir DIR [--port 0] [--token T]
        [--token-file F] [--max-size N]

Binds the port itself (0 picks a free one) and prints one line, ``READY <port>``, on stdout once it accepts
connections, so a test can start it and read the port without races. The upload endpoint is ``/files/``
(OPTIONS and POST there; HEAD, PATCH and DELETE on ``/files/<id>``); tuspyserver stores each upload as
``DIR/<id>`` plus ``DIR/<id>.info`` (JSON). It offers the extensions creation, creation-defer-length,
creation-with-upload, expiration, termination and concatenation, but not checksum (the proxy adds that).
"""

import argparse
import asyncio
import os
import signal
import threading
import socket
import sys

import uvicorn
from fastapi import FastAPI, HTTPException, Request
from tuspyserver import create_tus_router


def exit_with_parent() -> None:
    """Dies when the test process does: unblocks SIGTERM (a parent may spawn with it blocked) and exits once
    stdin reaches end of file, which happens when the parent exits, even by a crash."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def watch() -> None:
        while os.read(0, 4096):
            pass
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--files-dir", required=True)
    parser.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN' (else 401)")
    parser.add_argument("--token-file", default=None,
                        help="require 'Authorization: Bearer <the file's first line>', read on every request, so a "
                             "test can rotate the token while uploads run")
    parser.add_argument("--max-size", type=int, default=1 << 40, help="Tus-Max-Size in bytes")
    parser.add_argument("--standalone", action="store_true",
                        help="run until Ctrl-C or SIGTERM instead of exiting when stdin closes (for use by hand)")
    args = parser.parse_args()
    if not args.standalone:
        exit_with_parent()

    async def auth(request: Request) -> None:
        token = args.token
        if args.token_file is not None:
            with open(args.token_file) as f:
                token = f.readline().strip()
        if token is not None and request.headers.get("authorization") != f"Bearer {token}":
            raise HTTPException(status_code=401, detail="missing or wrong bearer token")

    app = FastAPI()
    app.include_router(create_tus_router(prefix="files", files_dir=args.files_dir, max_size=args.max_size, auth=auth))

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                await task
                return
            await asyncio.sleep(0.01)
        print(f"READY {port}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    sys.exit(main())
