#!/usr/bin/env python3
"""A daemon's loop with its shared store across a network (issue 15: the store driven from the loop).

    python3 bench/shared_loop.py [--rtt-ms 10] [--busy 32] [--noop 1000] [--cancels 10] [--rounds 2]
                                 [--binaries BIN1,BIN2] [--phases ping,cancel,noop]

PostgreSQL is reached through a proxy that holds every byte for half of `--rtt-ms` each way, as a database on
another host would (a throwaway server, as bench/jobs.py shared starts). Daemon B (`--concurrency busy+1`) runs
`--busy` long `sleep` jobs (20 ms units: each reports progress, and every second the progress is saved, which on a
shared store renews the run's lease); daemon A serves a queue nobody submits to. Then, per round and binary:

  ping:   a `ping` to B every 10 ms for 3 s, send to reply (ms): how long B's loop was kept from answering.
  ping A, listing: a `ping` to A every 10 ms for 3 s while another client runs `list --limit 20` through A back
          to back (each a store read): how long A's loop was kept from answering by its clients' reads.
  ping A, submitting: the same while another client submits uploads through A back to back, each with an
          idempotency key (as the CLI sends) and each checked for an unfinished upload doing the same (two store
          reads, then the group commit), to a queue nobody serves.
  cancel: `--cancels` (10) cancels through A of a job running on B, send to reply (the job as `cancelled`).
  round trip: a `show` through A (one store read: the "one round trip" of the bound).
  no-op jobs: `--noop` jobs (`sleep`, units 0) submitted singly to a fresh daemon C (`--concurrency 64`, its
          own queue, 4 connections x 32 in flight, as bench/jobs.py), submit -> all `succeeded` (jobs/s), with a
          `ping` to C every 10 ms meanwhile (ms: how long C's loop was kept from answering while it wrote submits
          and ends).

`--phases` picks which of them run (ping: the three ping phases; cancel: cancel and round trip; noop: no-op jobs;
default all). `--binaries` runs each build in turn, round by round, so builds are compared in the same run (default: the release
build, or $TRAILBOOK_JOBS_BIN). Reports median, p90, p99 and max.
"""
import os, socket, statistics, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from jobs import Counter, Daemon, ThrowawayPostgres, arg, pipelined, submit_requests  # noqa: E402
from shared_cancel import cancel_ms, submit_running, timed_ms  # noqa: E402

BUSY = {"units": 1_000_000, "unit_ms": 20}


class DelayProxy:
    """TCP on 127.0.0.1 to a Unix socket, every chunk held `one_way` seconds in each direction, order kept."""

    def __init__(self, target, one_way):
        self.target, self.one_way = target, one_way
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            # As libpq and the server do on their own TCP sockets: without it Nagle's algorithm holds a small
            # write (a notification, a reply) behind the peer's delayed ACK, about 40 ms on Linux, which no
            # network link between a daemon and its database adds.
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            server = socket.socket(socket.AF_UNIX)
            server.connect(self.target)
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    def pump(self, source, sink):
        # A reader and a writer per direction: bytes leave `one_way` after they came, in order, however many are
        # in flight (as on a link with that latency, not one that waits for each chunk).
        chunks, ready = [], threading.Condition()

        def write():
            while True:
                with ready:
                    while not chunks:
                        ready.wait()
                    due, data = chunks.pop(0)
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                if not data:
                    break
                try:
                    sink.sendall(data)
                except OSError:
                    break
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        threading.Thread(target=write, daemon=True).start()
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            with ready:
                chunks.append((time.monotonic() + self.one_way, data))
                ready.notify()
            if not data:
                return

    def close(self):
        self.closed = True
        self.listener.close()


def percentiles(values):
    values = sorted(values)

    def at(p):
        return values[min(len(values) - 1, int(round(p * (len(values) - 1))))]

    return {"median": round(statistics.median(values), 2), "p90": round(at(0.9), 2), "p99": round(at(0.99), 2),
            "max": round(values[-1], 2), "n": len(values)}


def one_round(binary, server, rtt_ms, busy, noop, cancels_per_round, phases):
    store = server.new_database()
    proxy = DelayProxy(os.path.join(server.dir, f".s.PGSQL.{server.port}"), rtt_ms / 2000)
    remote = store.replace(f"host={server.dir} port={server.port}", f"host=127.0.0.1 port={proxy.port}")
    a = b = None
    try:
        a = Daemon(binary, "--store", remote, "--host", "bench-a", "--queues", "elsewhere")
        b = Daemon(binary, "--store", remote, "--host", "bench-b", "--concurrency", str(busy + 1))
        for _ in range(busy):
            b.call({"op": "submit", "kind": "sleep", "params": BUSY})
        deadline = time.monotonic() + 60
        while len(b.call({"op": "list", "states": ["running"], "limit": busy + 1}).get("jobs", [])) < busy:
            if time.monotonic() > deadline:
                raise RuntimeError("the busy jobs did not all start")
            time.sleep(0.05)
        time.sleep(1.5)  # every busy job past its first saved progress
        pings = listing_pings = submitting_pings = []
        if "ping" in phases:
            pings = pings_while(b, None)
            listing_pings = pings_while(a, lambda _: a.call({"op": "list", "limit": 20}))
            submitting_pings = pings_while(a, lambda i: submitted(a.call(upload_request(a, i))))
        cancels, shows = [], []
        for _ in range(cancels_per_round if "cancel" in phases else 0):
            job = submit_running(b, b)
            shows.append(timed_ms(a, {"op": "show", "job": job})[0])
            cancels.append(cancel_ms(a, job))
        b.stop()
        b = None
        noops = noop_jobs(binary, remote, noop) if "noop" in phases else None
        return pings, listing_pings, submitting_pings, cancels, shows, noops
    finally:
        for d in (a, b):
            if d:
                d.stop()
        proxy.close()


def pings_while(daemon, work):
    """A `ping` to `daemon` every 10 ms for 3 s (ms each), while another thread calls `work(i)` for i = 0, 1, …"""
    pings, stop = [], threading.Event()

    def loop():
        i = 0
        while not stop.is_set():
            work(i)
            i += 1

    worker = threading.Thread(target=loop) if work else None
    if worker:
        worker.start()
    end = time.monotonic() + 3
    while time.monotonic() < end:
        pings.append(timed_ms(daemon, {"op": "ping"})[0])
        time.sleep(0.01)
    stop.set()
    if worker:
        worker.join()
    return pings


def upload_request(daemon, i):
    """A keyed submit of an upload of a small file of its own (made here) to a directory, in a queue nobody serves."""
    source = os.path.join(daemon.home, "sources", f"photo-{i}.jpg")
    os.makedirs(os.path.dirname(source), exist_ok=True)
    os.makedirs(os.path.join(daemon.home, "uploaded"), exist_ok=True)
    with open(source, "wb") as out:
        out.write(b"\xff" * 1024)
    return {"op": "submit", "kind": "upload", "key": f"bench-upload-{os.getpid()}-{time.monotonic_ns()}-{i}",
            "params": {"files": [source], "to": "file://" + os.path.join(daemon.home, "uploaded")},
            "options": {"queue": "parked"}}


def submitted(reply):
    if not reply.get("ok"):
        raise RuntimeError(f"submit refused: {reply}")


def noop_jobs(binary, store, n):
    """`n` no-op jobs through a fresh daemon C on `store`: jobs/s, submit -> all succeeded, and C's pings meanwhile."""
    # Its own queue: B's busy jobs, back in the default queue after B stopped, are not C's work.
    c = Daemon(binary, "--store", store, "--host", "bench-c", "--concurrency", "64", "--queues", "noop")
    try:
        done = Counter(c, "succeeded")
        pings, stop = [], threading.Event()

        def ping():
            while not stop.is_set():
                pings.append(timed_ms(c, {"op": "ping"})[0])
                time.sleep(0.01)

        pinger = threading.Thread(target=ping)
        started = time.monotonic()
        pinger.start()
        pipelined(c, submit_requests(n, False, {"units": 0}, {"queue": "noop"}))
        done.wait(n)
        seconds = time.monotonic() - started
        stop.set()
        pinger.join()
        done.close()
        return {"per_second": n / seconds, "pings": pings}
    finally:
        c.stop()


def main():
    rtt_ms = float(arg("--rtt-ms", "10"))
    busy = int(arg("--busy", "32"))
    rounds = int(arg("--rounds", "2"))
    noop = int(arg("--noop", "1000"))
    cancels_per_round = int(arg("--cancels", "10"))
    phases = set(arg("--phases", "ping,cancel,noop").split(","))
    given = arg("--binaries", None)
    binaries = given.split(",") if given else [os.environ.get("TRAILBOOK_JOBS_BIN") or benchlib.build()]
    print(f"store round trip {rtt_ms} ms (proxy), {busy} busy jobs on B, {rounds} rounds; load before: {os.getloadavg()}")
    server = ThrowawayPostgres()
    results = {binary: ([], [], [], [], [], [], []) for binary in binaries}
    try:
        for _ in range(rounds):
            for binary in binaries:
                pings, listing, submitting, cancels, shows, noops = one_round(binary, server, rtt_ms, busy, noop,
                                                                              cancels_per_round, phases)
                rates, noop_pings = ([noops["per_second"]], noops["pings"]) if noops else ([], [])
                measured = (pings, listing, submitting, cancels, shows, rates, noop_pings)
                for into, values in zip(results[binary], measured):
                    into.extend(values)
    finally:
        server.stop()
    for binary, (pings, listing, submitting, cancels, shows, rates, noop_pings) in results.items():
        print(f"  {binary}")
        if "ping" in phases:
            print(f"    ping B (ms): {percentiles(pings)}")
            print(f"    ping A while a client lists through A (ms): {percentiles(listing)}")
            print(f"    ping A while a client submits keyed uploads through A (ms): {percentiles(submitting)}")
        if "cancel" in phases:
            print(f"    cancel through A of a job on B (ms): {percentiles(cancels)}")
            print(f"    round trip, show through A (ms): {percentiles(shows)}")
        if "noop" in phases:
            print(f"    {noop} no-op jobs through C, single submits (jobs/s per round): {[round(r) for r in rates]}")
            print(f"    ping C meanwhile (ms): {percentiles(noop_pings)}")
    print(f"  load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
