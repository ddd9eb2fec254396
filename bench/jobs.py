#!/usr/bin/env python3
"""Scheduler benchmarks (issue 14): durable no-op jobs per second against huey, a million queued, and latency.

    python3 bench/jobs.py throughput [--jobs 10000,100000] [--concurrency 256] [--no-huey]
    python3 bench/jobs.py throughput --binaries NAME=BIN,NAME=BIN [--rounds 5] [--jobs 10000] [--modes batched,single]
    python3 bench/jobs.py queued [--jobs 1000000]
    python3 bench/jobs.py latency [--queued 100000]
    python3 bench/jobs.py bigbatch [--running 2400] [--batch 3600]
    python3 bench/jobs.py shared [--store postgres://…] [--daemons 1,2,3] [--jobs 5000] [--concurrency 64]
    python3 bench/jobs.py all

throughput: N `sleep` jobs with `units: 0` (no work: the figure is the scheduler's bookkeeping), submitted over 4
control connections with 32 requests in flight each, first submit -> every job `succeeded` (counted on a `watch`
connection). Single submits (`submit`, one job a request) and, when the daemon has it, batched ones
(`submit_batch`, 500 jobs a request). The peer in the same run: huey 3.5 (bench/huey_peer.py: SqliteHuey,
fsync=True, 4 worker threads, 4 producer threads), N no-op tasks, first enqueue -> every result stored.
With --binaries, builds against each other instead (no huey): each round runs every build once per mode, one
after the other, so load drifts hit all alike; it prints each run and then the medians of jobs/s and of daemon
CPU microseconds a job, with each build's ratio to the first (CPU time is less sensitive to a loaded machine).

queued: N jobs queued behind one long job (`--concurrency 1`), then the submit time, `list --limit 20` and
`list --state queued --limit 20` latency (the CLI, median of 20), `watch`'s refresh and subscribe, ping, submit ->
running of one job at priority 1000 (it preempts the long job), the daemon's RSS and the store's size; then all N
run (daemon restarted with --concurrency 256 on the same store) and `prune --older-than 0` deletes them: the time,
the peak RSS, the store's size before and after. latency: one job at priority 1000 submitted while N others wait
at priority 0, submit -> `running` on the feed (median of 20). bigbatch: one `submit_batch` of 3 600 jobs while
2 400 jobs of 1 s run 256 at a time, a ping every 10 ms on another connection meanwhile: the slowest ping answer (the loop's longest stall).

shared (issue 15): the same durable no-op jobs through 1, 2 and 3 daemons sharing one PostgreSQL database
(`daemon --store`), submitted round-robin through all of them, first submit -> every job `succeeded` (each daemon's
`watch` counts the ends it wrote, the events naming its `--host`; their sum), beside one daemon on its SQLite store in the same run. Without
`--store` it starts a throwaway PostgreSQL (Debian's `postgresql`; initdb as `nobody` when run as root, default
settings, so commits are fsynced as SQLite's are) and gives each run a new database.

Starts its own daemons (TRAILBOOK_JOBS_TEST_KINDS=1) in temp dirs and stops them. Binary: $TRAILBOOK_JOBS_BIN or
the release build (built by benchlib). The huey venv: bench/setup-huey.sh.
"""
import glob, json, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, threading, time

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
        self.sock = os.path.join(self.home, "daemon.sock")
        self.start(*args)

    def start(self, *args):
        self.proc = subprocess.Popen([self.binary, "daemon", *args], env=self.env, stdout=self.log, stderr=self.log)
        for _ in range(1200):
            try:
                self.ping = self.call({"op": "ping"})
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("daemon did not start")

    def restart(self, *args):
        """Stops the daemon (SIGTERM) and starts it again on the same store with `args`."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.start(*args)

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


SEQ = re.compile(rb'"seq":(\d+)')


class Counter:
    """A `watch` connection counting jobs that reach `state` (and the time of each, by job, if `stamps`); with
    `host`, only the events of jobs that daemon `--host` ran: it asks for the daemon's own events (`"local": true`,
    so the daemon need not follow the other daemons' feeds for it), or, from a daemon that does not know that
    member, takes every daemon's events and keeps those naming `host`."""

    def __init__(self, daemon, state, stamps=False, host=None):
        self.state, self.count, self.stamps, self.seen = state, 0, stamps, {}
        self.host = b'"host":%s' % json.dumps(host).encode() if host else None
        self.local = host is not None
        self.gap = False
        self.daemon, self.reconnects, self.closing = daemon, 0, False
        self.subscribe(b'')
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def subscribe(self, since):
        while True:
            self.sock = self.daemon.connect()
            local = b',"local":true' if self.local else b''
            self.sock.sendall(b'{"op":"watch"%s%s}\n' % (local, since))
            self.file = self.sock.makefile("rb")
            if json.loads(self.file.readline()).get("ok") or not self.local:
                return
            self.sock.close()
            self.local = False

    def read(self):
        needle = b'"to":"%s"' % self.state.encode()
        seq = None
        while True:
            for line in self.file:
                if b'"type":"gap"' in line:
                    self.gap = True
                # Not json.loads: this reader shares the machine's cores with the daemons it measures.
                numbered = SEQ.search(line)
                if numbered:
                    seq = int(numbered.group(1))
                if needle in line and (self.host is None or self.host in line):
                    with self.cond:
                        self.count += 1
                        if self.stamps:
                            self.seen[json.loads(line)["job"]] = time.monotonic()
                        self.cond.notify_all()
            # The daemon disconnects a watcher that stops reading (docs/reference/protocol.md: 4 MiB queued for it), as this Python
            # reader can when 100 000 single submits' events outrun it: come back after the last event seen, as
            # `watch --since` does; the daemon replays from its buffer or says `gap`.
            with self.cond:
                self.reconnects += 1
                if self.gap or self.closing:
                    self.cond.notify_all()
                    return
            self.subscribe(b'' if seq is None else b',"since":%d' % seq)

    def wait(self, n, timeout=3600):
        with self.cond:
            if not self.cond.wait_for(lambda: self.count >= n or self.gap, timeout):
                raise RuntimeError(f"only {self.count} of {n} jobs reached {self.state}")
            if self.gap:
                raise RuntimeError("the watch connection fell behind (gap)")

    def close(self):
        self.closing = True
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


def compare_builds(binaries):
    """`throughput --binaries`: rounds interleaving builds; medians and ratios to the first build."""
    n = int(arg("--jobs", "10000").split(",")[0])
    rounds = int(arg("--rounds", "5"))
    concurrency = int(arg("--concurrency", "256"))
    modes = arg("--modes", "batched,single").split(",")
    builds = [b.split("=", 1) if "=" in b else (b, b) for b in binaries.split(",")]
    print(f"{n} durable no-op jobs a run, submit -> all succeeded; daemon --concurrency {concurrency}; "
          f"{rounds} rounds, builds interleaved: {', '.join(f'{name}={path}' for name, path in builds)}")
    runs = {}
    for r in range(rounds):
        for mode in modes:
            for name, path in builds:
                load = os.getloadavg()[0]
                figures = daemon_run(path, n, mode == "batched", concurrency)
                if figures is None:
                    raise SystemExit(f"{name}: no submit_batch op in this build")
                runs.setdefault((mode, name), []).append(figures)
                print(f"  round {r + 1} {mode:7} {name:12} {figures['per_second']:9.0f} jobs/s  daemon CPU "
                      f"{figures['daemon_cpu_seconds']:.2f} s ({figures['daemon_cpu_seconds'] / n * 1e6:.0f} µs a job)  "
                      f"load {load:.1f}")
                sys.stdout.flush()
    print("medians")
    for mode in modes:
        base = None
        for name, _ in builds:
            rate = statistics.median(f["per_second"] for f in runs[(mode, name)])
            cpu = statistics.median(f["daemon_cpu_seconds"] for f in runs[(mode, name)]) / n * 1e6
            base = base or (rate, cpu)
            print(f"  {mode:7} {name:12} {rate:9.0f} jobs/s ({rate / base[0]:.2f}x the first's)  daemon CPU "
                  f"{cpu:.0f} µs a job ({cpu / base[1]:.2f}x the first's)")


def huey_run(n):
    if not os.path.exists(HUEY_PYTHON):
        raise SystemExit("no huey venv: run bench/setup-huey.sh")
    out = subprocess.run([HUEY_PYTHON, os.path.join(ROOT, "bench", "huey_peer.py"), str(n)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def throughput(binary):
    if "--binaries" in sys.argv:
        return compare_builds(arg("--binaries", ""))
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


class ThrowawayPostgres:
    """A PostgreSQL server in a temporary directory (Unix socket only), stopped and deleted by `stop()`."""

    def __init__(self, settings=()):
        """`settings`: more `-c name=value` server settings."""
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not bins:
            raise SystemExit("no PostgreSQL server binaries: run scripts/install-deps.sh")
        self.bin = os.path.dirname(bins[-1])
        self.dir = tempfile.mkdtemp(prefix="trailbook-bench-pg-", dir="/tmp")
        self.prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"] if os.getuid() == 0 else []
        if self.prefix:
            shutil.chown(self.dir, "nobody", "nogroup")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.run("initdb", "-D", f"{self.dir}/data", "-U", "trailbook", "--auth-local=trust", "-E", "UTF8",
                 "--locale=C", "--no-instructions")
        self.run("pg_ctl", "-D", f"{self.dir}/data", "-l", f"{self.dir}/server.log", "-w", "-o",
                 f"-p {self.port} -k {self.dir} -c listen_addresses='' -c max_connections=50"
                 + "".join(f" -c {setting}" for setting in settings), "start")
        self.databases = 0

    def run(self, tool, *args):
        subprocess.run(self.prefix + [os.path.join(self.bin, tool), *args], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=dict(os.environ, LC_ALL="C"))

    def new_database(self):
        self.databases += 1
        name = f"bench{self.databases}"
        self.run("createdb", "-h", self.dir, "-p", str(self.port), "-U", "trailbook", name)
        return f"host={self.dir} port={self.port} user=trailbook dbname={name}"

    def stop(self):
        try:
            self.run("pg_ctl", "-D", f"{self.dir}/data", "-w", "-m", "fast", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def shared_run(binary, store, daemons, n, concurrency, batched):
    """N no-op jobs through `daemons` daemons on `store` (None: one daemon on SQLite); the `daemon_run` figures."""
    args = ["--concurrency", str(concurrency)] + (["--store", store] if store else [])
    # On a shared store each daemon's watcher sees every daemon's ends: each counts those of its own host.
    hosts = [f"bench-{i}" if store else None for i in range(daemons)]
    ds = [Daemon(binary, *args, *(["--host", h] if h else [])) for h in hosts]
    try:
        counters = [Counter(d, "succeeded", host=h) for d, h in zip(ds, hosts)]
        cpu0 = [benchlib.cpu_seconds(d.proc.pid) for d in ds]
        started = time.monotonic()
        requests = submit_requests(n, batched, {"units": 0})
        threads = [threading.Thread(target=pipelined, args=(d, requests[i::daemons])) for i, d in enumerate(ds)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        submitted = time.monotonic() - started
        deadline = time.monotonic() + 3600
        while sum(c.count for c in counters) < n:
            if any(c.gap for c in counters) or time.monotonic() > deadline:
                raise RuntimeError(f"only {sum(c.count for c in counters)} of {n} jobs succeeded")
            time.sleep(0.005)
        seconds = time.monotonic() - started
        cpu = sum(benchlib.cpu_seconds(d.proc.pid) - c for d, c in zip(ds, cpu0))
        for c in counters:
            c.close()
        return {"jobs": n, "seconds": round(seconds, 3), "per_second": round(n / seconds, 1),
                "submit_seconds": round(submitted, 3), "daemons_cpu_seconds": round(cpu, 2),
                "ran_per_daemon": [c.count for c in counters]}
    finally:
        for d in ds:
            d.stop()


def shared(binary):
    n = int(arg("--jobs", "5000"))
    concurrency = int(arg("--concurrency", "64"))
    counts = [int(x) for x in arg("--daemons", "1,2,3").split(",")]
    given = arg("--store", None)
    server = None if given else ThrowawayPostgres()
    print(f"durable no-op jobs, submit -> all succeeded; each daemon --concurrency {concurrency}; "
          f"{CONNECTIONS} connections x {IN_FLIGHT} in flight per daemon; load before: {os.getloadavg()}")
    try:
        for batched in (False, True):
            how = f"batched ({BATCH} a request)" if batched else "single submits"
            sqlite = shared_run(binary, None, 1, n, concurrency, batched)
            print(f"  {how}")
            print(f"    1 daemon, SQLite: {sqlite}")
            for k in counts:
                store = given or server.new_database()
                figures = shared_run(binary, store, k, n, concurrency, batched)
                print(f"    {k} daemon(s), PostgreSQL: {figures} ({figures['per_second'] / sqlite['per_second']:.2f}x SQLite)")
                sys.stdout.flush()
    finally:
        if server:
            server.stop()
    print(f"  load after: {os.getloadavg()}")


def cli_ms(d, *args):
    started = time.monotonic()
    subprocess.run([d.binary, *args], env=d.env, check=True, stdout=subprocess.DEVNULL)
    return (time.monotonic() - started) * 1000


def fill_queue(d, n):
    """One job that runs for a day (concurrency 1 keeps everything else queued), then `n` queued at priority 0."""
    d.long_job = d.call({"op": "submit", "kind": "sleep", "params": {"units": 1, "unit_ms": 86_400_000},
                         "options": {"priority": 100}})["job"]["id"]
    batched = "submit_batch" in json.dumps(d.call({"op": "nope"}))
    started = time.monotonic()
    pipelined(d, submit_requests(n, batched, {"units": 0}))
    return time.monotonic() - started, batched


def request_ms(d, request):
    """One request on a fresh connection, in ms (connect, send, whole reply)."""
    started = time.monotonic()
    reply = d.call(request)
    if not reply.get("ok"):
        raise RuntimeError(f"{request} refused: {reply}")
    return (time.monotonic() - started) * 1000


def timings(f, rounds):
    f()
    times = sorted(f() for _ in range(rounds))
    return f"median {statistics.median(times):.1f} ms, max {times[-1]:.1f} ms ({rounds} rounds)"


def submit_to_running(d, samples=20):
    """Submit -> `running` on the feed for one job at priority 1000, `samples` times, in ms."""
    running = Counter(d, "running", stamps=True)
    times = []
    for _ in range(samples):
        sent = time.monotonic()
        reply = d.call({"op": "submit", "kind": "sleep", "params": {"units": 0}, "options": {"priority": 1000}})
        job = reply["job"]["id"]
        deadline = time.monotonic() + 30
        while job not in running.seen and time.monotonic() < deadline:
            time.sleep(0.0005)
        times.append((running.seen[job] - sent) * 1000)
    running.close()
    times.sort()
    return f"median {statistics.median(times):.1f} ms, max {times[-1]:.1f} ms ({samples} jobs)"


def unfinished(d):
    return sum(d.call({"op": "list", "limit": 1})["counts"].values())


def queued(binary):
    """A million queued (issue 14): submit time, list latencies, watch, RSS, latency, draining, pruning."""
    n = int(arg("--jobs", "1000000"))
    d = Daemon(binary, "--concurrency", "1")
    try:
        seconds, batched = fill_queue(d, n)
        print(f"{n} queued ({'batched' if batched else 'single'} submits, {BATCH} a request): {seconds:.1f} s, "
              f"{n / seconds:.0f} jobs/s; daemon RSS {d.rss_kib() / 1024:.1f} MiB, store {d.store_bytes() / 2**20:.1f} MiB")
        print(f"  `list --limit 20` (CLI process included): {timings(lambda: cli_ms(d, 'list', '--limit', '20'), 20)}")
        print(f"  `list --state queued --limit 20` (CLI): "
              f"{timings(lambda: cli_ms(d, 'list', '--state', 'queued', '--limit', '20'), 20)}")
        active = {"op": "list", "states": ["queued", "running", "paused", "needs_retry"]}
        print(f"  `watch`'s refresh (list of 4 states, 1000 newest, counts): {timings(lambda: request_ms(d, active), 20)}")
        print(f"  `watch` subscribe (connect -> header): "
              f"{timings(lambda: request_ms(d, {'op': 'watch'}), 20)}")
        print(f"  ping: {timings(lambda: request_ms(d, {'op': 'ping'}), 20)}")
        print(f"  submit -> running, one job at priority 1000 while {n} wait at priority 0 (it preempts the running "
              f"one): {submit_to_running(d)}")
        print(f"  daemon RSS {d.rss_kib() / 1024:.1f} MiB, store {d.store_bytes() / 2**20:.1f} MiB")
        sys.stdout.flush()
        # Run them all: the long job cancelled, the daemon restarted with room to run the queue.
        d.call({"op": "cancel", "job": d.long_job})
        concurrency = arg("--concurrency", "256")
        started = time.monotonic()
        d.restart("--concurrency", concurrency, "--keep-succeeded", "forever")
        restarted = time.monotonic() - started
        peak = 0
        while unfinished(d):
            peak = max(peak, d.rss_kib())
            time.sleep(0.5)
        ran = time.monotonic() - started
        print(f"  restart on the full store {restarted:.2f} s; all {n} run (--concurrency {concurrency}) in {ran:.1f} s, "
              f"{n / ran:.0f} jobs/s; peak RSS meanwhile {peak / 1024:.1f} MiB")
        before = d.store_bytes()
        started = time.monotonic()
        pruned = d.call({"op": "prune", "older_than_s": 0})
        print(f"  prune --older-than 0: {pruned.get('total')} jobs in {time.monotonic() - started:.1f} s; store "
              f"{before / 2**20:.1f} MiB before, {d.store_bytes() / 2**20:.1f} MiB after; RSS {d.rss_kib() / 1024:.1f} MiB")
    finally:
        d.stop()


def latency(binary):
    n = int(arg("--queued", "100000"))
    d = Daemon(binary, "--concurrency", "1")
    try:
        fill_queue(d, n)
        print(f"submit -> running for one job (priority 1000) while {n} wait at priority 0: {submit_to_running(d)}")
    finally:
        d.stop()


def big_batch(binary):
    """Loop responsiveness under a big batch: `--running` jobs of 1 s are submitted (256 run at a time), then one
    `submit_batch` of `--batch` jobs; a client pings every 10 ms meanwhile (on its own connection) and the slowest
    answer is reported."""
    running, size = int(arg("--running", "2400")), int(arg("--batch", "3600"))
    d = Daemon(binary, "--concurrency", "256")
    try:
        # Each runs 1 s in 20 steps (a progress event and a checkpoint each), 256 at a time.
        pipelined(d, submit_requests(running, True, {"units": 20, "unit_ms": 50}))
        s = d.connect()
        f = s.makefile("rb")
        stop, slowest = threading.Event(), []

        def ping():
            while not stop.is_set():
                sent = time.monotonic()
                s.sendall(b'{"op":"ping"}\n')
                f.readline()
                slowest.append(time.monotonic() - sent)
                time.sleep(0.01)

        pinger = threading.Thread(target=ping)
        pinger.start()
        time.sleep(0.2)
        before = len(slowest)
        sent = time.monotonic()
        reply = d.call({"op": "submit_batch", "jobs": [{"kind": "sleep", "params": {"units": 0}}] * size})
        seconds = time.monotonic() - sent
        time.sleep(0.5)
        stop.set()
        pinger.join()
        during = sorted(slowest[before:])
        print(f"one submit_batch of {size} jobs while {running} jobs of 1 s run (256 at a time): answered in {seconds * 1000:.0f} ms "
              f"({'ok' if reply.get('ok') else reply}); pings every 10 ms meanwhile and 0.5 s after: "
              f"{len(during)}, slowest {during[-1] * 1000:.0f} ms, median {statistics.median(during) * 1000:.1f} ms")
    finally:
        d.stop()


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if "--binaries" in sys.argv and what != "throughput":
        raise SystemExit("--binaries is for throughput")
    # With --binaries the builds are given: nothing to build.
    binary = None if "--binaries" in sys.argv else os.environ.get("TRAILBOOK_JOBS_BIN") or benchlib.build()
    runs = (("throughput", throughput), ("queued", queued), ("latency", latency), ("bigbatch", big_batch),
            ("shared", shared))
    for name, run in runs:
        if name == "shared" and what != "shared":
            continue  # needs PostgreSQL: only when asked
        if what in (name, "all"):
            run(binary)


if __name__ == "__main__":
    main()
