"""A fault-injecting HTTP/1.1 proxy in front of the tus server (or the S3 test server), for the tests. 127.0.0.1
only, bounded.

    python3 Tests/Support/tus-server/proxy.py --upstream-port N [--port 0]

Prints ``READY <port>`` on stdout once listening. Requests are forwarded one at a time per client connection,
each on a fresh upstream connection (Host is kept, so the server's Location points back at the proxy).

Faults are armed with control requests to the proxy itself (answered by the proxy, never forwarded):

    POST /__fault/status?code=503&count=2[&method=PATCH]   answer the next COUNT matching requests with CODE
         [&after=N]                                        ... after reading N body bytes (not the whole body),
                                                           then read what the client still sends until it closes
                                                           (an early answer mid-PATCH; every byte sent is counted)
    POST /__fault/drop?after=65536&count=1[&method=PUT]    forward AFTER body bytes of the next COUNT PATCHes (or
                                                           requests of METHOD), then abort both connections (a
                                                           reset mid-body)
    POST /__fault/checksum?on=1                            advertise the checksum extension in OPTIONS
                                                           (sha1, sha256, md5) and verify Upload-Checksum on PATCH:
                                                           460 on mismatch, without forwarding
    POST /__fault/checksum?on=1&verify=0                   advertise it but never verify (a server that ignores
                                                           checksums: the header is dropped, the body forwarded)
    POST /__fault/corrupt?count=1[&method=PUT]             flip one body byte of the next COUNT PATCHes (or
                                                           requests of METHOD)
    POST /__fault/delete?path=/files/ID                    DELETE that upload on the server
         [&retry_after=S]                                  ... with a Retry-After: S header
    POST /__fault/outage?code=503&seconds=30[&retry_after=5][&method=PATCH]
                                                           for SECONDS from now answer every matching request
                                                           with CODE (and Retry-After), without forwarding
    POST /__fault/cutoff?over=N[&method=PATCH]             a gateway with a request size limit: a request of METHOD
                                                           whose body is over N bytes is buffered, never forwarded,
                                                           and its connection reset once N body bytes were read;
                                                           stays armed until reset (cut_off counts them)
    POST /__fault/hold?count=4[&method=PATCH][&seconds=30]  hold the next requests of METHOD (before their body is
         [&skip=0][&release=1]                             read) until COUNT of them wait together, then let them
                                                           all go on (held_together: how many went on so); after
                                                           SECONDS they go on anyway. The first SKIP go on at once.
                                                           With release=0 they wait for SECONDS or a reset even once
                                                           COUNT wait. Once only: disarmed when the group goes on
                                                           (holding counts the requests held now)
    POST /__fault/reset                                    disarm everything; requests still held are dropped
                                                           (connection aborted, nothing forwarded)
    GET  /__log                                            the last 200 requests: JSON lines of method, path, headers
                                                           and t (seconds on the proxy's monotonic clock)
    GET  /__stats                                          JSON totals since start: patch_body_bytes (PATCH body
                                                           bytes read from clients, whatever became of them),
                                                           requests (per method), injected (requests answered by
                                                           a status or outage fault), last_injected_t (the log's
                                                           clock), outage_ends_in (seconds; 0 when none is armed),
                                                           cut_off (requests cut by the cutoff fault),
                                                           in_flight and max_in_flight (requests of each method
                                                           being forwarded now, and the most at once), holding
                                                           (requests the hold fault is holding now)

Bounds: at most 64 client connections, request heads of 64 KiB, buffered (checksum-verified) bodies of 256 MiB,
30 s idle timeout per read.
"""

import argparse
import asyncio
import os
import signal
import threading
import base64
import hashlib
import json
import sys
import time
from urllib.parse import parse_qs, urlsplit

MAX_CONNECTIONS = 64
MAX_HEAD = 64 * 1024
MAX_BUFFERED_BODY = 256 * 1024 * 1024
IDLE_TIMEOUT = 30.0
PIECE = 64 * 1024

state = {
    "status": None,  # (code, count, method or None)
    "drop": None,  # [after, count, method]
    "checksum": False,
    "verify": True,
    "corrupt": 0,
    "corrupt_method": "PATCH",
    "outage": None,  # [code, until (monotonic), retry_after or None, method or None]
    "cutoff": None,  # [over, method]
    "hold": None,  # {"count", "method", "seconds", "waiting": [asyncio.Event], "dropped": bool}
}
stats = {"patch_body_bytes": 0, "requests": {}, "injected": 0, "last_injected_t": None, "cut_off": 0,
         "in_flight": {}, "max_in_flight": {}, "holding": 0, "held_together": 0}
log: list = []
upstream_port = 0


async def read_head(reader):
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT)
    except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
        return None
    except asyncio.LimitOverrunError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    start = lines[0].split(" ", 2)
    if len(start) != 3:
        return None
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        headers.append((name.strip(), value.strip()))
    return start, headers


def header(headers, name):
    for k, v in headers:
        if k.lower() == name.lower():
            return v
    return None


def without(headers, *names):
    lowered = {n.lower() for n in names}
    return [(k, v) for k, v in headers if k.lower() not in lowered]


def encode_head(start_line, headers):
    return (start_line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode("latin-1")


async def respond(writer, code, reason, extra=(), body=b""):
    headers = [("Tus-Resumable", "1.0.0"), ("Content-Length", str(len(body)))] + list(extra)
    writer.write(encode_head(f"HTTP/1.1 {code} {reason}", headers) + body)
    await writer.drain()


async def read_body(reader, length):
    return await asyncio.wait_for(reader.readexactly(length), IDLE_TIMEOUT)


async def control(method, target, writer):
    url = urlsplit(target)
    q = {k: v[0] for k, v in parse_qs(url.query).items()}
    if url.path == "/__log":
        body = "\n".join(json.dumps(e) for e in log).encode()
        await respond(writer, 200, "OK", body=body)
        return
    if url.path == "/__stats":
        outage = state["outage"]
        ends_in = max(0.0, outage[1] - time.monotonic()) if outage else 0.0
        await respond(writer, 200, "OK", body=json.dumps(dict(stats, outage_ends_in=ends_in)).encode())
        return
    kind = url.path[len("/__fault/"):]
    if kind == "status":
        state["status"] = [int(q["code"]), int(q.get("count", "1")), q.get("method"),
                           int(q["after"]) if "after" in q else None, q.get("retry_after")]
    elif kind == "outage":
        state["outage"] = [int(q.get("code", "503")), time.monotonic() + float(q.get("seconds", "30")),
                           q.get("retry_after"), q.get("method")]
    elif kind == "cutoff":
        state["cutoff"] = [int(q["over"]), q.get("method", "PATCH")]
    elif kind == "drop":
        state["drop"] = [int(q.get("after", "0")), int(q.get("count", "1")), q.get("method", "PATCH")]
    elif kind == "checksum":
        state["checksum"] = q.get("on", "1") == "1"
        state["verify"] = q.get("verify", "1") == "1"
    elif kind == "corrupt":
        state["corrupt"] = int(q.get("count", "1"))
        state["corrupt_method"] = q.get("method", "PATCH")
    elif kind == "delete":
        code = await upstream_simple("DELETE", q["path"])
        await respond(writer, 200, "OK", body=str(code).encode())
        return
    elif kind == "hold":
        state["hold"] = {"count": int(q.get("count", "4")), "method": q.get("method", "PATCH"),
                         "seconds": float(q.get("seconds", "30")), "skip": int(q.get("skip", "0")), "waiting": [],
                         "release": q.get("release", "1") == "1",
                         "dropped": False}
    elif kind == "reset":
        hold = state["hold"]
        if hold:
            hold["dropped"] = True
            for event in hold["waiting"]:
                event.set()
        state.update(hold=None, status=None, drop=None, checksum=False, verify=True, corrupt=0, corrupt_method="PATCH", outage=None,
                     cutoff=None)
    else:
        await respond(writer, 404, "Not Found")
        return
    await respond(writer, 200, "OK")


async def upstream_simple(method, path):
    r, w = await asyncio.open_connection("127.0.0.1", upstream_port)
    w.write(encode_head(f"{method} {path} HTTP/1.1", [
        ("Host", f"127.0.0.1:{upstream_port}"), ("Tus-Resumable", "1.0.0"), ("Content-Length", "0"),
        ("Connection", "close")]))
    await w.drain()
    parsed = await read_head(r)
    w.close()
    return int(parsed[0][1]) if parsed else 0


def verify_checksum(value, body):
    algorithm, _, digest = value.partition(" ")
    if algorithm not in ("sha1", "sha256", "md5"):
        return False
    return base64.b64decode(digest) == hashlib.new(algorithm, body).digest()


def injected(retry_after):
    """Counts an answer made up by a fault; its headers (a Retry-After when one is armed)."""
    stats["injected"] += 1
    stats["last_injected_t"] = time.monotonic()
    return [("Retry-After", retry_after)] if retry_after else []


def count_body(method, n):
    if method == "PATCH":
        stats["patch_body_bytes"] += n


async def held(method):
    """Waits while the hold fault holds this request; returns False when it is to be dropped (reset)."""
    hold = state["hold"]
    if not hold or hold["method"] != method:
        return True
    if hold["skip"] > 0:
        hold["skip"] -= 1
        return True
    event = asyncio.Event()
    hold["waiting"].append(event)
    stats["holding"] = len(hold["waiting"])
    if hold["release"] and len(hold["waiting"]) >= hold["count"]:
        stats["held_together"] = len(hold["waiting"])
        state["hold"] = None
        for waiting in hold["waiting"]:
            waiting.set()
    try:
        await asyncio.wait_for(event.wait(), hold["seconds"])
    except asyncio.TimeoutError:
        if state["hold"] is hold:
            state["hold"] = None
            for waiting in hold["waiting"]:
                waiting.set()
    stats["holding"] = 0
    return not hold["dropped"]


async def forward(method, target, version, headers, reader, writer):
    """Forwards one request (counted in flight while it is); returns False when the client connection must be
    dropped."""
    if not await held(method):
        writer.transport.abort()
        return False
    flying = stats["in_flight"]
    flying[method] = flying.get(method, 0) + 1
    stats["max_in_flight"][method] = max(stats["max_in_flight"].get(method, 0), flying[method])
    try:
        return await forward_one(method, target, version, headers, reader, writer)
    finally:
        flying[method] -= 1


async def forward_one(method, target, version, headers, reader, writer):
    """Forwards one request; returns False when the client connection must be dropped."""
    length = int(header(headers, "Content-Length") or "0")
    expect = header(headers, "Expect")
    headers = without(headers, "Expect", "Connection", "Keep-Alive")
    if expect and expect.lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    st = state["status"]
    if st and st[1] > 0 and (st[2] is None or st[2] == method):
        st[1] -= 1
        after = st[3] if len(st) > 3 else None
        if after is not None and after < length:
            # Answer mid-body, then read (and count) what the client still sends until it closes.
            if after:
                await read_body(reader, after)
            count_body(method, after)
            await respond(writer, st[0], "Injected", extra=[("Connection", "close")] + injected(st[4]))
            while True:
                try:
                    rest = await asyncio.wait_for(reader.read(PIECE), IDLE_TIMEOUT)
                except (ConnectionError, asyncio.TimeoutError):
                    break
                if not rest:
                    break
                count_body(method, len(rest))
            return False
        if length:
            await read_body(reader, length)
            count_body(method, length)
        await respond(writer, st[0], "Injected", extra=injected(st[4]))
        return True

    cutoff = state["cutoff"]
    if cutoff and method == cutoff[1] and length > cutoff[0]:
        # Buffered up to the limit, then the connection is reset: not a byte reaches the server.
        read = 0
        while read < cutoff[0]:
            piece = await asyncio.wait_for(reader.read(min(PIECE, cutoff[0] - read)), IDLE_TIMEOUT)
            if not piece:
                break
            read += len(piece)
        count_body(method, read)
        stats["cut_off"] += 1
        writer.transport.abort()
        return False

    outage = state["outage"]
    if outage and time.monotonic() < outage[1] and (outage[3] is None or outage[3] == method):
        if length:
            await read_body(reader, length)
            count_body(method, length)
        await respond(writer, outage[0], "Injected Outage", extra=injected(outage[2]))
        return True

    body = None
    corrupting = state["corrupt"] > 0 and method == state["corrupt_method"] and length > 0
    if corrupting:
        # Counted now, before the body is awaited: requests in flight together must not all take the one fault.
        state["corrupt"] -= 1
    if (method == "PATCH" and state["checksum"]) or corrupting:
        if length > MAX_BUFFERED_BODY:
            await respond(writer, 413, "Too Large For Proxy")
            return False
        body = bytearray(await read_body(reader, length))
        count_body(method, length)
        if corrupting and body:
            body[len(body) // 2] ^= 0xFF
        checksum = header(headers, "Upload-Checksum")
        if state["checksum"] and state["verify"] and checksum is not None and not verify_checksum(checksum, bytes(body)):
            await respond(writer, 460, "Checksum Mismatch")
            return True
        headers = without(headers, "Upload-Checksum")

    drop = state["drop"]
    drop_after = None
    if drop and drop[1] > 0 and method == drop[2]:
        drop[1] -= 1
        drop_after = drop[0]

    ur, uw = await asyncio.open_connection("127.0.0.1", upstream_port)
    try:
        uw.write(encode_head(f"{method} {target} {version}", headers + [("Connection", "close")]))
        if body is not None:
            uw.write(bytes(body))
        else:
            sent = 0
            while sent < length:
                if drop_after is not None and sent >= drop_after:
                    uw.transport.abort()
                    writer.transport.abort()
                    return False
                n = min(PIECE, length - sent)
                if drop_after is not None:
                    n = min(n, max(drop_after - sent, 1))
                piece = await asyncio.wait_for(reader.read(n), IDLE_TIMEOUT)
                if not piece:
                    return False
                count_body(method, len(piece))
                uw.write(piece)
                await uw.drain()
                sent += len(piece)
            if drop_after is not None and sent >= drop_after:
                uw.transport.abort()
                writer.transport.abort()
                return False
        await uw.drain()

        parsed = await read_head(ur)
        if parsed is None:
            return False
        (rversion, code, *reason), rheaders = parsed
        rlength = int(header(rheaders, "Content-Length") or "0")
        if method == "HEAD" or code in ("204", "304"):
            rbody = b""
        else:
            rbody = await read_body(ur, rlength)
        rheaders = without(rheaders, "Connection", "Keep-Alive")
        if method == "OPTIONS" and state["checksum"]:
            ext = header(rheaders, "Tus-Extension") or ""
            rheaders = without(rheaders, "Tus-Extension") + [
                ("Tus-Extension", ext + ",checksum"), ("Tus-Checksum-Algorithm", "sha1,sha256,md5")]
        writer.write(encode_head(f"HTTP/1.1 {code} {' '.join(reason)}", rheaders) + rbody)
        await writer.drain()
        return True
    finally:
        uw.close()


async def handle(reader, writer, limit):
    async with limit:
        try:
            while True:
                parsed = await read_head(reader)
                if parsed is None:
                    break
                (method, target, version), headers = parsed
                log.append({"method": method, "path": target, "headers": dict((k.lower(), v) for k, v in headers),
                            "t": time.monotonic()})
                del log[:-200]
                if not target.startswith("/__"):
                    stats["requests"][method] = stats["requests"].get(method, 0) + 1
                if target.startswith("/__"):
                    length = int(header(headers, "Content-Length") or "0")
                    if length:
                        await read_body(reader, length)
                    await control(method, target, writer)
                    continue
                if not await forward(method, target, version, headers, reader, writer):
                    break
                if (header(headers, "Connection") or "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()


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


async def main() -> None:
    global upstream_port
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--upstream-port", type=int, required=True)
    args = parser.parse_args()
    exit_with_parent()
    upstream_port = args.upstream_port
    limit = asyncio.Semaphore(MAX_CONNECTIONS)
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, limit), "127.0.0.1", args.port, limit=MAX_HEAD)
    print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
