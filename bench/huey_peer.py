#!/usr/bin/env python3
"""The peer of bench/jobs.py: huey (SqliteHuey, fsync=True) running N no-op tasks, submit -> all done.

    bench/.venv-huey/bin/python bench/huey_peer.py N [--producers 4]      (bench/setup-huey.sh makes the venv)

A consumer process (`huey_consumer`'s own code, 4 worker threads) runs the tasks; `--producers` threads of this
process enqueue them (each enqueue is one fsynced SQLite commit, as the daemon's acknowledged submit is durable).
Each task returns True, so huey stores its result: its end is recorded, like the daemon's `succeeded`. Prints one
JSON line: tasks, seconds from the first enqueue to the last stored result, tasks/s, and the enqueue time alone.
"""
import json, os, subprocess, sys, tempfile, threading, time

from huey import SqliteHuey

DB = os.environ.get("HUEY_BENCH_DB") or os.path.join(tempfile.mkdtemp(prefix="huey-bench-"), "huey.db")
huey = SqliteHuey("bench", filename=DB, fsync=True)


@huey.task()
def noop():
    return True


def consume():
    # The same as `huey_consumer huey_peer.huey -w 4 -k thread`, without a module path to resolve.
    consumer = huey.create_consumer(workers=4, worker_type="thread", periodic=False, check_worker_health=False)
    consumer.run()


def main():
    n = int(sys.argv[1])
    producers = int(sys.argv[sys.argv.index("--producers") + 1]) if "--producers" in sys.argv else 4
    env = dict(os.environ, HUEY_BENCH_DB=DB)
    consumer = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--consume"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)  # the consumer's threads are up
        started = time.monotonic()

        def produce(count):
            for _ in range(count):
                noop()

        threads = [threading.Thread(target=produce, args=(n // producers + (i < n % producers),))
                   for i in range(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        enqueued = time.monotonic() - started
        while huey.storage.result_store_size() < n:
            if consumer.poll() is not None:
                raise SystemExit("the huey consumer exited")
            time.sleep(0.02)
        seconds = time.monotonic() - started
        print(json.dumps({"tasks": n, "seconds": round(seconds, 3), "per_second": round(n / seconds, 1),
                          "enqueue_seconds": round(enqueued, 3)}))
    finally:
        consumer.terminate()
        consumer.wait(10)
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(DB + suffix)
            except OSError:
                pass


if __name__ == "__main__":
    consume() if "--consume" in sys.argv else main()
