#!/usr/bin/env python3
"""Cross-daemon cancel latency on a shared PostgreSQL store (issue 15: "as fast as locally, <= 100 ms + one round trip").

    python3 bench/shared_cancel.py [--store postgres://…] [--samples 20]

Two daemons share one database: A serves a queue nobody submits to (`--queues elsewhere`), so every job runs on
B. Each sample submits a `sleep` job (20 ms units, hours long) through B, waits until B runs it, then times a
`cancel` request from send to reply (the reply is the job as `cancelled`):

  remote: the cancel goes through A (A writes the request and NOTIFYs B; B stops the job and writes its end; A
          sees the end and answers).
  local:  the cancel goes through B, which runs the job (the same store, no notification).
  sqlite: one daemon on its SQLite store, the job running there (the single-host reference).
  round trip: a `show` through A of the job running on B (one store read: the "one round trip").

Reports median, p90 and max of each (ms), and remote - local. Without `--store` it starts a throwaway PostgreSQL
(as bench/jobs.py shared does). Binary: $TRAILBOOK_JOBS_BIN or the release build.
"""
import os, statistics, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from jobs import Daemon, ThrowawayPostgres, arg  # noqa: E402

LONG = {"units": 1_000_000, "unit_ms": 20}


def submit_running(through, runner):
    """Submits a long sleep job through `through` and waits until `runner` lists it running; its id."""
    reply = through.call({"op": "submit", "kind": "sleep", "params": LONG})
    if not reply.get("ok"):
        raise RuntimeError(f"submit refused: {reply}")
    job = reply["job"]["id"] if "job" in reply else reply["id"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if runner.call({"op": "show", "job": job})["job"]["state"] == "running":
            # A moment for the run to get going (its first progress), as a user's cancel would find it.
            time.sleep(0.05)
            return job
        time.sleep(0.005)
    raise RuntimeError(f"job {job} did not start")


def timed_ms(daemon, request):
    started = time.monotonic()
    reply = daemon.call(request)
    elapsed = (time.monotonic() - started) * 1000
    return elapsed, reply


def cancel_ms(through, job):
    ms, reply = timed_ms(through, {"op": "cancel", "job": job})
    state = reply.get("job", {}).get("state")
    if state != "cancelled":
        raise RuntimeError(f"cancel of {job}: {reply}")
    return ms


def summary(values):
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(round(0.9 * (len(values) - 1))))]
    return {"median_ms": round(statistics.median(values), 2), "p90_ms": round(p90, 2), "max_ms": round(values[-1], 2)}


def main():
    samples = int(arg("--samples", "20"))
    binary = os.environ.get("TRAILBOOK_JOBS_BIN") or benchlib.build()
    given = arg("--store", None)
    server = None if given else ThrowawayPostgres()
    store = given or server.new_database()
    print(f"cancel latency, {samples} samples each; load before: {os.getloadavg()}")
    a = b = single = None
    try:
        a = Daemon(binary, "--store", store, "--host", "bench-a", "--queues", "elsewhere")
        b = Daemon(binary, "--store", store, "--host", "bench-b")
        single = Daemon(binary)
        remote, local, sqlite, show = [], [], [], []
        for _ in range(samples):
            # Interleaved, so load changes hit every kind of sample alike.
            job = submit_running(b, b)
            show.append(timed_ms(a, {"op": "show", "job": job})[0])
            remote.append(cancel_ms(a, job))
            local.append(cancel_ms(b, submit_running(b, b)))
            sqlite.append(cancel_ms(single, submit_running(single, single)))
        figures = {"remote (through A, runs on B)": summary(remote), "local (through B, runs on B)": summary(local),
                   "sqlite (one daemon)": summary(sqlite), "round trip (show through A)": summary(show)}
        for name, values in figures.items():
            print(f"  {name}: {values}")
        extra = statistics.median(remote) - statistics.median(local)
        print(f"  remote - local (medians): {extra:.2f} ms; bound: 100 ms + one round trip "
              f"({100 + statistics.median(show):.2f} ms)")
    finally:
        for d in (a, b, single):
            if d:
                d.stop()
        if server:
            server.stop()
    print(f"  load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
