#!/usr/bin/env python3
"""Scheduler benchmarks (issue 14): durable no-op jobs per second against huey, a million queued, and latency.

    python3 bench/jobs.py throughput [--jobs 10000,100000] [--concurrency 256] [--no-huey]
    python3 bench/jobs.py queued [--jobs 1000000]
    python3 bench/jobs.py latency [--queued 100000]
    python3 bench/jobs.py all

throughput: N `sleep` jobs with `units: 0` (no work: the figure is the scheduler's bookkeeping), submitted over 4
control connections with 32 requests in flight each, first submit -> every job `succeeded` (counted on a `watch`
connection). Single submits (`submit`, one job a request) and, when the daemon has it, batched ones
(`submit_batch`, 500 jobs a request). The peer in the same run: huey 3.5 (bench/huey_peer.py: SqliteHuey,
fsync=True, 4 worker threads, 4 producer threads), N no-op tasks, first enqueue -> every result stored.

queued: N jobs queued behind one long job (`--concurrency 1`), then the submit time, `list --limit 20` latency (the
CLI, median of 20), the daemon's RSS and the store's size; latency: one job at priority 10 submitted while N
others wait at priority 0, submit -> `running` on the feed (median of 20).

Starts its own daemons (TRAILBOOK_JOBS_TEST_KINDS=1) in temp dirs and stops them. Binary: $TRAILBOOK_JOBS_BIN or
the release build (built by benchlib). The huey venv: bench/setup-huey.sh.
"""
import json, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = benchlib.ROOT
HUEY_PYTHON = os.path.join(ROOT, "bench", ".venv-huey", "bin", "python")
PAGE = os.sysconf("SC_PAGE_SIZE")
CONNECTIONS, IN_FLIGHT, BATCH = 4, 32, 500


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


class Daemon:
    def __init__(self, binary, *args):
        self.binary = binary
        self.home = tempfile.mkdtemp(prefix="trailbook-jobs-bench-")
        self.env = dict(os.environ, TRAILBOOK_JOBS_HOME=self.home, TRAILBOOK_JOBS_TEST_KINDS="1")
        self.log = open(os.path.join(self.home, "bench-daemon.log"), "w")
        self.proc = subprocess.Popen([binary, "daemon", *args], env=self.env, stdout=self.log, stderr=self.log)
        self.sock = os.path.join(self.home, "daemon.sock")
        for _ in range(200):
            try:
                self.ping = self.call({"op": "ping"})
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("daemon did not start")

    def connect(self):
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.sock)
        return s

    def call(self, request):
        with self.connect() as s:
            s.sendall((json.dumps(request) + "\n").encode())
            reply = json.loads(s.makefile("rb").readline())
        return reply

    def rss_kib(self):
        return int(open(f"/proc/{self.proc.pid}/statm").read().split()[1]) * PAGE // 1024

    def store_bytes(self):
        return sum(os.path.getsize(os.path.join(self.home, f)) for f in os.listdir(self.home) if f.startswith("jobs.sqlite3"))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)


class Counter:
    """A `watch` connection counting jobs that reach `state` (and the time of each, by job, if `stamps`)."""

    def __init__(self, daemon, state, stamps=False):
        self.sock = daemon.connect()
        self.sock.sendall(b'{"op":"watch"}\n')
        self.file = self.sock.makefile("rb")
        json.loads(self.file.readline())
        self.state, self.count, self.stamps, self.seen = state, 0, stamps, {}
        self.gap = False
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        needle = b'"to":"%s"' % self.state.encode()
        for line in self.file:
            if b'"type":"gap"' in line:
                self.gap = True
            if needle in line:
                with self.cond:
                    self.count += 1
                    if self.stamps:
                        self.seen[json.loads(line)["job"]] = time.monotonic()
                    self.cond.notify_all()

    def wait(self, n, timeout=3600):
        with self.cond:
            if not self.cond.wait_for(lambda: self.count >= n or self.gap, timeout):
                raise RuntimeError(f"only {self.count} of {n} jobs reached {self.state}")
            if self.gap:
                raise RuntimeError("the watch connection fell behind (gap)")

    def close(self):
        self.sock.close()


def pipelined(daemon, requests):
    """Sends `requests` over CONNECTIONS connections, IN_FLIGHT in flight each; returns the replies' job ids."""
    ids = [None] * len(requests)
    errors = []

    def run(part):
        s = daemon.connect()
        f = s.makefile("rb")
        sent = received = 0
        while received < len(part):
            burst = b""
            while sent < len(part) and sent - received < IN_FLIGHT:
                burst += part[sent][1]
                sent += 1
            if burst:
                s.sendall(burst)
            reply = json.loads(f.readline())
            index = part[received][0]
            received += 1
            if not reply.get("ok"):
                errors.append(reply)
            else:
                ids[index] = reply.get("ids") or reply["job"]["id"]
        s.close()

    lines = [(i, (json.dumps(r) + "\n").encode()) for i, r in enumerate(requests)]
    threads = [threading.Thread(target=run, args=(lines[c::CONNECTIONS],)) for c in range(CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} refused, first: {errors[0]}")
    return ids


def submit_requests(n, batched, params, options=None):
    entry = {"kind": "sleep", "params": params}
    if options:
        entry["options"] = options
    if not batched:
        return [dict(entry, op="submit") for _ in range(n)]
    return [{"op": "submit_batch", "jobs": [entry] * min(BATCH, n - i)} for i in range(0, n, BATCH)]


def daemon_run(binary, n, batched, concurrency):
    d = Daemon(binary, "--concurrency", str(concurrency))
    try:
        if batched and "submit_batch" not in json.dumps(d.call({"op": "nope"})):
            return None
        done = Counter(d, "succeeded")
        cpu0 = benchlib.cpu_seconds(d.proc.pid)
        started = time.monotonic()
        pipelined(d, submit_requests(n, batched, {"units": 0}))
        submitted = time.monotonic() - started
        done.wait(n)
        seconds = time.monotonic() - started
        cpu = benchlib.cpu_seconds(d.proc.pid) - cpu0
        done.close()
        return {"jobs": n, "seconds": round(seconds, 3), "per_second": round(n / seconds, 1),
                "submit_seconds": round(submitted, 3), "daemon_cpu_seconds": round(cpu, 2),
                "rss_mib": round(d.rss_kib() / 1024, 1), "store_mib": round(d.store_bytes() / 2**20, 1)}
    finally:
        d.stop()


def huey_run(n):
    if not os.path.exists(HUEY_PYTHON):
        raise SystemExit("no huey venv: run bench/setup-huey.sh")
    out = subprocess.run([HUEY_PYTHON, os.path.join(ROOT, "bench", "huey_peer.py"), str(n)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def throughput(binary):
    counts = [int(x) for x in arg("--jobs", "10000,100000").split(",")]
    concurrency = int(arg("--concurrency", "256"))
    print(f"durable no-op jobs, submit -> all succeeded; daemon --concurrency {concurrency}; "
          f"{CONNECTIONS} connections x {IN_FLIGHT} in flight; huey SqliteHuey fsync=True, 4 worker threads")
    for n in counts:
        single = daemon_run(binary, n, False, concurrency)
        batched = daemon_run(binary, n, True, concurrency)
        peer = None if "--no-huey" in sys.argv else huey_run(n)
        print(f"  {n} jobs")
        print(f"    trailbook-jobs, single submits: {single}")
        print(f"    trailbook-jobs, batched ({BATCH} a request): {batched or 'no submit_batch op in this build'}")
        if peer:
            print(f"    huey: {peer}")
            ratio = single["per_second"] / peer["per_second"]
            line = f"    ratio to huey: single {ratio:.1f}x"
            if batched:
                line += f", batched {batched['per_second'] / peer['per_second']:.1f}x"
            print(line)
        sys.stdout.flush()


def cli_ms(d, *args):
    started = time.monotonic()
    subprocess.run([d.binary, *args], env=d.env, check=True, stdout=subprocess.DEVNULL)
    return (time.monotonic() - started) * 1000


def fill_queue(d, n):
    """One job that runs for a day (concurrency 1 keeps everything else queued), then `n` queued at priority 0."""
    d.call({"op": "submit", "kind": "sleep", "params": {"units": 1, "unit_ms": 86_400_000},
            "options": {"priority": 100}})
    batched = "submit_batch" in json.dumps(d.call({"op": "nope"}))
    started = time.monotonic()
    pipelined(d, submit_requests(n, batched, {"units": 0}))
    return time.monotonic() - started, batched


def queued(binary):
    n = int(arg("--jobs", "1000000"))
    d = Daemon(binary, "--concurrency", "1")
    try:
        seconds, batched = fill_queue(d, n)
        print(f"{n} queued ({'batched' if batched else 'single'} submits): {seconds:.1f} s, {n / seconds:.0f} jobs/s")
        cli_ms(d, "list", "--limit", "20")
        times = sorted(cli_ms(d, "list", "--limit", "20") for _ in range(20))
        print(f"  `list --limit 20` (CLI process included): median {statistics.median(times):.1f} ms, "
              f"max {times[-1]:.1f} ms")
        times = sorted(cli_ms(d, "list", "--state", "queued", "--limit", "20") for _ in range(5))
        print(f"  `list --state queued --limit 20`: median {statistics.median(times):.1f} ms")
        print(f"  daemon RSS {d.rss_kib() / 1024:.1f} MiB, store {d.store_bytes() / 2**20:.1f} MiB")
        started = time.monotonic()
        d.call({"op": "ping"})
        print(f"  ping {1000 * (time.monotonic() - started):.1f} ms")
    finally:
        d.stop()


def latency(binary):
    n = int(arg("--queued", "100000"))
    d = Daemon(binary, "--concurrency", "1")
    try:
        seconds, _ = fill_queue(d, n)
        running = Counter(d, "running", stamps=True)
        samples = []
        for _ in range(20):
            sent = time.monotonic()
            reply = d.call({"op": "submit", "kind": "sleep", "params": {"units": 0}, "options": {"priority": 1000}})
            job = reply["job"]["id"]
            deadline = time.monotonic() + 30
            while job not in running.seen and time.monotonic() < deadline:
                time.sleep(0.0005)
            samples.append((running.seen[job] - sent) * 1000)
        samples.sort()
        print(f"submit -> running for one job (priority 1000) while {n} wait at priority 0: "
              f"median {statistics.median(samples):.1f} ms, max {samples[-1]:.1f} ms (20 jobs)")
        running.close()
    finally:
        d.stop()


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    binary = os.environ.get("TRAILBOOK_JOBS_BIN") or benchlib.build()
    for name, run in (("throughput", throughput), ("queued", queued), ("latency", latency)):
        if what in (name, "all"):
            run(binary)


if __name__ == "__main__":
    main()
