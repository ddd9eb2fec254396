#!/usr/bin/env python3
"""Benchmarks of the live progress feed and `watch` (issue 3).

    python3 bench/feed_bench.py cpu       # (a) daemon CPU seconds, 0 vs 20 watchers, same work
    python3 bench/feed_bench.py stuck     # (b) a watcher that stops reading for 60 s: RSS and throughput
    python3 bench/feed_bench.py latency   # (c) progress change -> watcher socket, and -> watch screen (pty)
    python3 bench/feed_bench.py all

Each run starts its own daemons (TRAILBOOK_JOBS_TEST_KINDS=1, `sleep` jobs) in temp dirs and stops them.
Binary: $TRAILBOOK_JOBS_BIN or .build/debug/trailbook-jobs (run `swift build` first).
"""
import json, os, pty, re, select, signal, socket, statistics, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("TRAILBOOK_JOBS_BIN", os.path.join(ROOT, ".build/debug/trailbook-jobs"))
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


class Daemon:
    def __init__(self, *args):
        self.home = tempfile.mkdtemp(prefix="trailbook-bench-")
        env = dict(os.environ, TRAILBOOK_JOBS_HOME=self.home, TRAILBOOK_JOBS_TEST_KINDS="1")
        self.log = open(os.path.join(self.home, "daemon.log"), "w")
        self.proc = subprocess.Popen([BIN, "daemon", *args], env=env, stdout=self.log, stderr=self.log)
        self.sock = os.path.join(self.home, "daemon.sock")
        for _ in range(100):
            if os.path.exists(self.sock):
                try:
                    self.call({"op": "ping"})
                    return
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError("daemon did not start")

    def connect(self):
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.sock)
        return s

    def call(self, req):
        s = self.connect()
        s.sendall((json.dumps(req) + "\n").encode())
        f = s.makefile("rb")
        reply = json.loads(f.readline())
        s.close()
        return reply

    def submit(self, params):
        return self.call({"op": "submit", "kind": "sleep", "params": params})["job"]["id"]

    def cpu_seconds(self):
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime

    def rss_kib(self):
        return int(open(f"/proc/{self.proc.pid}/statm").read().split()[1]) * PAGE // 1024

    def wait_all_done(self, timeout=600):
        deadline = time.time() + timeout
        while time.time() < deadline:
            jobs = self.call({"op": "list"})["jobs"]
            if jobs and all(j["state"] in ("succeeded", "failed", "cancelled") for j in jobs):
                return jobs
            time.sleep(0.2)
        raise RuntimeError("jobs did not finish")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)
        subprocess.run(["rm", "-rf", self.home])


class Watchers:
    """`n` watch connections read by one thread; counts events and bytes."""

    def __init__(self, daemon, n):
        self.socks = []
        for _ in range(n):
            s = daemon.connect()
            s.sendall(b'{"op":"watch"}\n')
            self.socks.append(s)
        self.events = 0
        self.bytes = 0
        self.running = True
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while self.running:
            ready, _, _ = select.select(self.socks, [], [], 0.2)
            for s in ready:
                data = s.recv(1 << 16)
                self.bytes += len(data)
                self.events += data.count(b"\n")

    def close(self):
        self.running = False
        self.thread.join()
        for s in self.socks:
            s.close()


def bench_cpu(rounds=2, jobs=50, units=100, unit_ms=100, watchers=20):
    print(f"(a) daemon CPU for {jobs} sleep jobs running at once ({units} units x {unit_ms} ms = "
          f"{units * unit_ms / 1000:.0f} s each, progress coalesced to 4/s per job), 0 vs {watchers} watchers")
    results = {0: [], watchers: []}
    for r in range(rounds):
        for n in (0, watchers):
            d = Daemon("--concurrency", str(jobs))
            w = Watchers(d, n) if n else None
            time.sleep(0.5)
            before = d.cpu_seconds()
            t0 = time.time()
            for _ in range(jobs):
                d.submit({"units": units, "unit_ms": unit_ms})
            d.wait_all_done()
            cpu = d.cpu_seconds() - before
            wall = time.time() - t0
            extra = ""
            if w:
                extra = f", {w.events} events / {w.bytes / 1e6:.1f} MB delivered to the watchers"
                w.close()
            d.stop()
            results[n].append(cpu)
            print(f"  round {r + 1}, {n:2d} watchers: {cpu:.2f} s CPU over {wall:.1f} s wall{extra}")
    a = statistics.mean(results[0])
    b = statistics.mean(results[watchers])
    print(f"  mean: 0 watchers {a:.2f} s, {watchers} watchers {b:.2f} s, ratio {b / a:.3f} "
          f"({(b / a - 1) * 100:+.1f} %)")


def bench_stuck(seconds=60, jobs=50, unit_ms=200):
    units = int(seconds * 1000 / unit_ms)
    print(f"(b) a watcher that stops reading for {seconds} s; {jobs} sleep jobs of {units} x {unit_ms} ms; "
          f"two daemons side by side, one with the stuck watcher (and 1 reading watcher), one without")
    stuck_d = Daemon("--concurrency", str(jobs))
    free_d = Daemon("--concurrency", str(jobs))
    stuck = stuck_d.connect()
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.sendall(b'{"op":"watch"}\n')  # and never read again
    reader = Watchers(stuck_d, 1)
    samples = []
    t0 = time.time()
    for d in (stuck_d, free_d):
        for _ in range(jobs):
            d.submit({"units": units, "unit_ms": unit_ms})
    done = {}
    while len(done) < 2:
        now = time.time() - t0
        samples.append((now, stuck_d.rss_kib(), free_d.rss_kib()))
        for name, d in (("stuck", stuck_d), ("free", free_d)):
            if name not in done:
                js = d.call({"op": "list"})["jobs"]
                if all(j["state"] == "succeeded" for j in js):
                    done[name] = (now, sum(j["progress"]["completed"] for j in js))
        time.sleep(2)
    print("  t (s)   RSS with stuck watcher (KiB)   RSS without (KiB)")
    for t, a, b in samples[:: max(1, len(samples) // 12)] + [samples[-1]]:
        print(f"  {t:5.0f}   {a:>10}                     {b:>10}")
    rss = [a for _, a, _ in samples[2:]]
    print(f"  RSS with stuck watcher after warm-up: min {min(rss)} KiB, max {max(rss)} KiB")
    for name in ("stuck", "free"):
        t, units_done = done[name]
        print(f"  {name:5s}: all {jobs} jobs succeeded after {t:.1f} s, {units_done / t:.0f} units/s")
    # Is the stuck connection still open, and what did it get?
    stuck.setblocking(False)
    got = 0
    try:
        while True:
            data = stuck.recv(1 << 16)
            if not data:
                print("  the stuck watcher was cut off by the daemon")
                break
            got += len(data)
    except BlockingIOError:
        print(f"  the stuck watcher is still connected; {got / 1024:.0f} KiB were waiting for it")
    print(f"  the reading watcher got {reader.events} events")
    reader.close()
    stuck.close()
    stuck_d.stop()
    free_d.stop()


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def bench_latency(jobs=10, units=300, unit_ms=20):
    print(f"(c) latency from a progress change (stamped by the sleep job) to the watcher; {jobs} jobs, a change "
          f"every {unit_ms} ms each")
    d = Daemon("--concurrency", str(jobs))
    sock = d.connect()
    sock.sendall(b'{"op":"watch"}\n')
    pending = b""
    # The watch screen in a pseudo-terminal, 200 columns wide, so the stamp shows in the label column.
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(TRAILBOOK_JOBS_HOME=d.home, TERM="xterm-256color", NO_COLOR="1")
        os.execv(BIN, [BIN, "watch"])
    import fcntl, struct, termios
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 200, 0, 0))
    os.kill(pid, signal.SIGWINCH)
    time.sleep(0.5)
    for _ in range(jobs):
        d.submit({"units": units, "unit_ms": unit_ms, "stamp": True})
    socket_lat, screen_lat, seen = [], [], set()
    stamp = re.compile(rb"1\d{9}\.\d{3,6}")
    end = time.time() + units * unit_ms / 1000 + 2
    while time.time() < end:
        ready, _, _ = select.select([sock, fd], [], [], 0.5)
        now = time.time()
        if sock in ready:
            pending += sock.recv(1 << 16)
            *lines, pending = pending.split(b"\n")
            for line in lines:
                ev = json.loads(line)
                cur = (ev.get("progress") or {}).get("current")
                if ev.get("type") == "progress" and cur:
                    socket_lat.append(now - float(cur))
        if fd in ready:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                break
            for m in stamp.findall(chunk):
                if m not in seen:
                    seen.add(m)
                    screen_lat.append(now - float(m))
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    for name, lat in (("watcher socket", socket_lat), ("watch screen (pty)", screen_lat)):
        if lat:
            ms = [x * 1000 for x in lat]
            print(f"  {name:18s}: n={len(ms):5d}  median {statistics.median(ms):6.1f} ms  p99 {pct(ms, 99):6.1f} ms"
                  f"  max {max(ms):6.1f} ms")
    d.stop()


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    print(f"machine: {os.cpu_count()} cores, {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}; binary {BIN}")
    if which in ("cpu", "all"):
        bench_cpu()
    if which in ("stuck", "all"):
        bench_stuck()
    if which in ("latency", "all"):
        bench_latency()
