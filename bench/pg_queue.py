#!/usr/bin/env python3
"""The shared store against the best PostgreSQL job queues on one server (issue 40).

    python3 bench/pg_queue.py [--jobs 5000,20000] [--daemons 1,3] [--rounds 2] [--flat 5000,20000,100000]
                              [--binaries BIN1,BIN2] [--concurrency 64] [--no-procrastinate]

One throwaway PostgreSQL (Debian's, default settings, fsync on, plus pg_stat_statements with planning tracked), a
new database per run. Per round, for each N of `--jobs` and each count K of `--daemons`, interleaved:

  trailbook-jobs batched: K daemons (`daemon --store`, `--concurrency 64` each), N no-op jobs (`sleep`, units 0)
      submitted round-robin through all of them, `submit_batch` 500 a request over 4 connections x 32 in flight
      per daemon (as bench/jobs.py shared), first submit -> N ends counted on the daemons' `watch` feeds (an end is
      announced once its write is committed); single submits: the same with one `submit` a job.
  pgqueuer: K worker processes (a QueueManager each, its defaults: 10 jobs a dequeue), one producer enqueueing
      500 jobs a statement meanwhile, first enqueue -> N rows in pgqueuer_log with status 'successful' (written
      at the end's commit).
  procrastinate: the same with K workers (`run_worker_async`, concurrency 10) and `batch_defer_async`, counted as
      rows with status 'succeeded' (only N <= 5000: it runs ~300 jobs/s).

Each run: jobs/s, CPU per job of the server (the postmaster and every backend, from /proc, background workers
included) and of the clients (daemons or peer processes), statements per job (pg_stat_statements calls, the
bench's own polling excluded), planning and execution time per job, transactions committed per job.
`--flat N1,N2,…` (flatness: is the cost per job the same whatever the queue holds?) adds, in each round after the
table's runs, N jobs through one daemon batched per N (every binary), and through one pgqueuer worker for each
N up to `--flat-peer-max` (20000: a peer's 100 000-job run takes minutes); submitting outruns running, so the
queue grows to most of N while it runs. Medians over rounds (the binaries take turns running first: `rotated`); ratios to pgqueuer's batched rate.

Peers: bench/setup-pg-peers.sh (bench/.venv-pg-peers). Binaries: `--binaries` (each one's runs side by side, in
the same rounds), else $TRAILBOOK_JOBS_BIN or the release build.
"""
import json, os, resource, statistics, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from jobs import Counter, Daemon, ThrowawayPostgres, arg, pipelined, submit_requests  # noqa: E402

ROOT = benchlib.ROOT
PEERS_PYTHON = os.path.join(ROOT, "bench", ".venv-pg-peers", "bin", "python")
PEERS = os.path.join(ROOT, "bench", "pg_peers.py")
TICK = os.sysconf("SC_CLK_TCK")
OBSERVER = "bench_observer"


class Server(ThrowawayPostgres):
    def __init__(self):
        super().__init__(settings=("shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track_planning=on",
                                   "pg_stat_statements.max=10000"))
        self.psql_bin = os.path.join(self.bin, "psql")
        self.sql("postgres", f"CREATE ROLE {OBSERVER} SUPERUSER LOGIN", user="trailbook")
        self.sql("postgres", "CREATE EXTENSION pg_stat_statements")
        self.postmaster = int(open(f"{self.dir}/data/postmaster.pid").readline())

    def dsn(self, database, user="trailbook"):
        return f"host={self.dir} port={self.port} user={user} dbname={database}"

    def sql(self, database, statement, user=OBSERVER):
        return subprocess.run(self.prefix + [self.psql_bin, "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", statement,
                                             self.dsn(database, user)],
                              check=True, capture_output=True, text=True).stdout.strip()

    def create(self):
        self.databases += 1
        name = f"bench{self.databases}"
        self.sql("postgres", f"CREATE DATABASE {name}")
        return name

    def cpu_seconds(self):
        """The postmaster's CPU with its reaped children's, plus every live child's (backends, background workers)."""
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(entry) == self.postmaster or int(fields[1]) == self.postmaster:
                total += sum(int(x) for x in fields[11:15])
        return total / TICK

    def begin(self, database):
        self.sql("postgres", "SELECT pg_stat_statements_reset()")
        return {"cpu": self.cpu_seconds(), "commits": self.commits(database), "clients": children_cpu()}

    def commits(self, database):
        return int(self.sql("postgres", f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{database}'"))

    def end(self, database, n, before, seconds, clients=0.0):
        cpu = self.cpu_seconds() - before["cpu"]
        calls, plan, run = self.sql("postgres", f"""
            SELECT sum(calls), sum(total_plan_time), sum(total_exec_time) FROM pg_stat_statements
            WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '{database}')
                AND userid <> (SELECT oid FROM pg_roles WHERE rolname = '{OBSERVER}')""").split("|")
        return {"jobs": n, "per_second": round(n / seconds, 1), "seconds": round(seconds, 2),
                "server_us_per_job": round(cpu / n * 1e6), "clients_us_per_job": round(clients / n * 1e6),
                "statements_per_job": round(float(calls or 0) / n, 3),
                "plan_us_per_job": round(float(plan or 0) * 1000 / n, 1),
                "exec_us_per_job": round(float(run or 0) * 1000 / n, 1),
                "commits_per_job": round((self.commits(database) - before["commits"]) / n, 3)}

    def top_statements(self, database, limit=6):
        return self.sql("postgres", f"""
            SELECT calls || ' calls, plan ' || round(total_plan_time::numeric, 1) || ' ms, exec '
                || round(total_exec_time::numeric, 1) || ' ms: ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 90)
            FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '{database}')
                AND userid <> (SELECT oid FROM pg_roles WHERE rolname = '{OBSERVER}')
            ORDER BY total_plan_time + total_exec_time DESC LIMIT {limit}""")


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def trailbook_run(server, binary, daemons, n, batched, concurrency):
    database = server.create()
    hosts = [f"bench-{i}" for i in range(daemons)]
    ds = [Daemon(binary, "--concurrency", str(concurrency), "--store", server.dsn(database), "--host", h) for h in hosts]
    try:
        counters = [Counter(d, "succeeded", host=h) for d, h in zip(ds, hosts)]
        own0 = [benchlib.cpu_seconds(d.proc.pid) for d in ds]
        before = server.begin(database)
        started = time.monotonic()
        requests = submit_requests(n, batched, {"units": 0})
        threads = [threading.Thread(target=pipelined, args=(d, requests[i::daemons])) for i, d in enumerate(ds)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        deadline = time.monotonic() + 1800
        while sum(c.count for c in counters) < n:
            if any(c.gap for c in counters) or time.monotonic() > deadline:
                raise RuntimeError(f"only {sum(c.count for c in counters)} of {n} jobs succeeded")
            time.sleep(0.002)
        seconds = time.monotonic() - started
        clients = sum(benchlib.cpu_seconds(d.proc.pid) - c for d, c in zip(ds, own0))
        figures = server.end(database, n, before, seconds, clients)
        figures["top"] = server.top_statements(database)
        for c in counters:
            c.close()
        return figures
    finally:
        for d in ds:
            d.stop()


PEER_DONE = {
    "pgqueuer": "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'",
    "procrastinate": "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'",
}


def peer(name, *args, **kwargs):
    return subprocess.Popen([PEERS_PYTHON, PEERS, name, *args], **kwargs)


def peer_run(server, name, workers, n):
    database = server.create()
    dsn = server.dsn(database)
    subprocess.run([PEERS_PYTHON, PEERS, name, "install", dsn], check=True, capture_output=True)
    procs = [peer(name, "worker", dsn, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for _ in range(workers)]
    try:
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"{name} worker did not start")
        clients0 = children_cpu()
        live0 = sum(benchlib.cpu_seconds(p.pid) for p in procs)
        before = server.begin(database)
        started = time.monotonic()
        producer = peer(name, "enqueue", str(n), dsn)
        counter = peer("count", str(n), PEER_DONE[name], server.dsn(database, OBSERVER))
        if counter.wait(1800) != 0 or producer.wait(60) != 0:
            raise RuntimeError(f"{name} run failed")
        seconds = time.monotonic() - started
        live = sum(benchlib.cpu_seconds(p.pid) for p in procs) - live0
        # The producer's CPU (reaped) with the workers'; the counter's is the bench's, not the peer's.
        clients = live + (children_cpu() - clients0) / 2
        figures = server.end(database, n, before, seconds, clients)
        figures["top"] = server.top_statements(database)
        return figures
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def rotated(systems, r):
    """`systems` with each kind's binaries (batched, single) in round `r`'s order: the first binary of a kind runs
    first in round 1, the second in round 2, …, so that none always runs first on the round's fresh server (a later
    run meets the earlier ones' checkpoints and autovacuum)."""
    kinds = [[s for s in systems if s[2]], [s for s in systems if not s[2]]]
    return [s for kind in kinds for s in (kind[r % len(kind):] + kind[:r % len(kind)] if kind else [])]


def median_of(runs, key):
    values = [r[key] for r in runs]
    return statistics.median(values) if values else None


def main():
    counts = [int(x) for x in arg("--jobs", "5000,20000").split(",")]
    daemon_counts = [int(x) for x in arg("--daemons", "1,3").split(",")]
    rounds = int(arg("--rounds", "2"))
    flat = [int(x) for x in arg("--flat", "").split(",") if x]
    flat_peer_max = int(arg("--flat-peer-max", "20000"))
    concurrency = int(arg("--concurrency", "64"))
    given = arg("--binaries", None)
    binaries = given.split(",") if given else [os.environ.get("TRAILBOOK_JOBS_BIN") or benchlib.build()]
    if not os.path.exists(PEERS_PYTHON):
        raise SystemExit("no peer venv: run bench/setup-pg-peers.sh")
    versions = subprocess.run([PEERS_PYTHON, "-c", "import importlib.metadata as m; print(*(p + ' ' + m.version(p) for p in "
                               "('pgqueuer', 'procrastinate', 'asyncpg', 'psycopg')), sep=', ')"],
                              check=True, capture_output=True, text=True).stdout.strip()
    server = Server()
    print(f"PostgreSQL {server.sql('postgres', 'SHOW server_version')}, default settings (fsync on); {versions}; "
          f"daemons --concurrency {concurrency}; {os.cpu_count()} cores; load before {os.getloadavg()}")
    systems = [(f"trailbook batched [{os.path.basename(os.path.dirname(os.path.dirname(b)))}]" if len(binaries) > 1
                else "trailbook batched", b, True) for b in binaries]
    systems += [(name.replace("batched", "single"), b, False) for name, b, _ in systems]
    results = {}
    interrupted = False
    try:
        for r in range(rounds):
            for n in counts:
                for k in daemon_counts:
                    plan = [(name, lambda b=b, batched=batched: trailbook_run(server, b, k, n, batched, concurrency))
                            for name, b, batched in rotated(systems, r)]
                    plan.append(("pgqueuer", lambda: peer_run(server, "pgqueuer", k, n)))
                    if n <= 5000 and "--no-procrastinate" not in sys.argv:
                        plan.append(("procrastinate", lambda: peer_run(server, "procrastinate", k, n)))
                    for name, run in plan:
                        figures = run()
                        results.setdefault((n, k, name), []).append(figures)
                        top = figures.pop("top")
                        print(f"round {r + 1}, {n} jobs, {k} daemon(s)/worker(s), {name}: {json.dumps(figures)}")
                        if r == rounds - 1:
                            print("    " + top.replace("\n", "\n    "))
                        sys.stdout.flush()
            for n in flat:
                plan = [(f"{name} (flat)", lambda b=b: trailbook_run(server, b, 1, n, True, concurrency))
                        for name, b, batched in rotated(systems, r) if batched]
                if n <= flat_peer_max:
                    plan.append(("pgqueuer (flat)", lambda: peer_run(server, "pgqueuer", 1, n)))
                for name, run in plan:
                    figures = run()
                    top = figures.pop("top")
                    results.setdefault((n, 1, name), []).append(figures)
                    print(f"round {r + 1}, flat, {n} jobs, 1 daemon/worker, {name}: {json.dumps(figures)}")
                    if r == rounds - 1:
                        print("    " + top.replace("\n", "\n    "))
                    sys.stdout.flush()
    except KeyboardInterrupt:
        # Interrupted (SIGINT) to make a deadline: the table of the runs that finished.
        interrupted = True
    finally:
        server.stop()
    print(f"load after {os.getloadavg()}{'; interrupted, the table has the runs that finished' if interrupted else ''}")
    print()
    print("| N jobs, daemons/workers | system | jobs/s | ratio to pgqueuer | server µs/job | clients µs/job | "
          "statements/job | plan µs/job | exec µs/job | commits/job | rounds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (n, k, name), runs in results.items():
        peer = "pgqueuer (flat)" if name.endswith("(flat)") else "pgqueuer"
        peer_rate = median_of(results.get((n, k, peer), []), "per_second")
        rate = median_of(runs, "per_second")
        ratio = f"{rate / peer_rate:.2f}x" if peer_rate else "-"
        print(f"| {n}, {k} | {name} | {rate:.0f} | {ratio} | {median_of(runs, 'server_us_per_job'):.0f} | "
              f"{median_of(runs, 'clients_us_per_job'):.0f} | {median_of(runs, 'statements_per_job'):.2f} | "
              f"{median_of(runs, 'plan_us_per_job'):.0f} | {median_of(runs, 'exec_us_per_job'):.0f} | "
              f"{median_of(runs, 'commits_per_job'):.3f} | {len(runs)} |")


if __name__ == "__main__":
    main()
