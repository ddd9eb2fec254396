#!/usr/bin/env python3
"""Crash loop across three daemons sharing one PostgreSQL store: kill -9 of daemons, PostgreSQL restarts, stops
past the lease and cut links, then check that every job ended exactly once and that every watcher saw each end
once.

    python3 scripts/shared-crash-loop.py [--kills 8] [--seed N] [--binary PATH] [--daemons 3] [--keep]

What it does, on 127.0.0.1 only, in a temporary directory it removes afterwards (unless --keep):
- starts a throwaway PostgreSQL (initdb, pg_ctl; as user nobody when run as root) and records every end in the
  database itself: a trigger adds a row to an audit table for each UPDATE that takes a job from an unfinished
  state to an ended one (the daemons' own schema, created by the first daemon, is not changed otherwise);
- starts --daemons daemons (`daemon --store postgres://…`, 2 s leases, 2 s store timeout, test job kinds), each
  reaching PostgreSQL through its own TCP proxy (Tests/Support/tcp-cut/proxy.py) that can cut the link silently;
- a watcher per daemon (`watch` on its socket) records every `state` event and every `gap`; when its daemon dies
  it connects again once the daemon is back, with `since` the last `seq` it got (the daemon then replays what it
  still has, or says `gap`);
- a submitter thread keeps about 20 `sleep` jobs (1-40 units of 20-80 ms) unfinished, each submitted through a
  random daemon that is up;
- until --kills kill -9s were made, every 0.3-1.5 s one fault, chosen at random: kill -9 of a daemon (started
  again 0-1 s later), a PostgreSQL restart (immediate shutdown, started again 0.2-2 s later), a stop of a daemon
  past its lease (SIGSTOP for 2.5-5 s, then SIGCONT), or a cut of a daemon's link (1-5 s, then healed);
- then heals everything, lets every job end, and checks:
  * every job in the store ended (the submitter's jobs and any other), and the audit table holds exactly one end
    for each: no end was written twice, none was lost;
  * every watcher saw at most one end event per job, and it is the job's end in the store; a watcher that saw
    none must have been told `gap` since the job was submitted (it missed events while its daemon or the
    daemon's link to PostgreSQL was down: it would read the jobs again);
  * no daemon's log names the database password.
Prints the figures (kills, restarts, stops, cuts, jobs, ends seen, ends missed behind a gap) and exits 0 when every
check held, 1 otherwise (each failed check is printed), 2 when it could not run (no binary, no PostgreSQL).

CI runs it with a small count (scripts/test.sh); long runs are made by hand.
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROXY = os.path.join(ROOT, "Tests", "Support", "tcp-cut", "proxy.py")
LEASE_SECONDS = 2
ENDED = ("succeeded", "failed", "cancelled")


def pg_bin():
    try:
        path = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
        if os.path.exists(os.path.join(path, "initdb")):
            return path
    except (OSError, subprocess.CalledProcessError):
        pass
    base = "/usr/lib/postgresql"
    for version in sorted(os.listdir(base) if os.path.isdir(base) else [], key=lambda v: -int(v) if v.isdigit() else 0):
        path = os.path.join(base, version, "bin")
        if os.path.exists(os.path.join(path, "initdb")):
            return path
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """A throwaway PostgreSQL in `directory`, reached by the daemons over TCP (through their proxies) and by this
    script over its Unix socket."""

    def __init__(self, directory):
        self.bin = pg_bin()
        if self.bin is None:
            raise RuntimeError("no PostgreSQL server binaries (initdb): run scripts/install-deps.sh")
        self.directory = directory
        self.port = free_port()
        self.user = "trailbook"
        self.password = "pw-%016x" % random.SystemRandom().getrandbits(64)
        self.as_nobody = os.getuid() == 0
        with open(os.path.join(directory, "password"), "w") as f:
            f.write(self.password + "\n")
        if self.as_nobody:
            import pwd

            nobody = pwd.getpwnam("nobody")
            os.chown(directory, nobody.pw_uid, nobody.pw_gid)
            os.chown(os.path.join(directory, "password"), nobody.pw_uid, nobody.pw_gid)
        self.tool("initdb", "-D", self.data, "-U", self.user, "--auth-local=trust", "--auth-host=scram-sha-256",
                  "--pwfile=" + os.path.join(directory, "password"), "-E", "UTF8", "--locale=C", "--no-sync",
                  "--no-instructions")
        self.running = False
        self.start()

    @property
    def data(self):
        return os.path.join(self.directory, "data")

    @property
    def socket_path(self):
        return os.path.join(self.directory, ".s.PGSQL.%d" % self.port)

    def uri(self, port):
        return "postgres://%s:%s@127.0.0.1:%d/postgres" % (self.user, self.password, port)

    def tool(self, name, *args):
        command = [os.path.join(self.bin, name)] + list(args)
        if self.as_nobody:
            command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"] + command
        result = subprocess.run(command, capture_output=True, text=True, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"})
        if result.returncode != 0:
            raise RuntimeError("%s failed: %s%s" % (name, result.stdout, result.stderr))

    def start(self):
        options = " ".join(["-c listen_addresses=127.0.0.1", "-p %d" % self.port, "-k %s" % self.directory,
                            # No fsync (the machine does not crash), but every commit is in the WAL before it is
                            # acknowledged: an immediate shutdown must not lose what a daemon was told is written.
                            "-c fsync=off", "-c full_page_writes=off",
                            "-c max_connections=100"])
        self.tool("pg_ctl", "-D", self.data, "-l", os.path.join(self.directory, "server.log"), "-w", "-t", "60",
                  "-o", options, "start")
        self.running = True

    def stop(self, mode="fast"):
        if self.running:
            self.tool("pg_ctl", "-D", self.data, "-w", "-t", "60", "-m", mode, "stop")
            self.running = False

    def sql(self, statement):
        result = subprocess.run(
            [os.path.join(self.bin, "psql"), "host=%s port=%d user=%s dbname=postgres" % (self.directory, self.port, self.user),
             "-At", "-v", "ON_ERROR_STOP=1", "-c", statement],
            capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError("psql: %s" % result.stderr.strip())
        return result.stdout


class Proxy:
    """Tests/Support/tcp-cut/proxy.py in front of PostgreSQL's Unix socket."""

    def __init__(self, unix_socket):
        self.process = subprocess.Popen([sys.executable, PROXY, "--upstream-unix", unix_socket], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline().split()
        if len(line) != 2 or line[0] != "READY":
            raise RuntimeError("proxy.py did not start: %r" % line)
        self.port = int(line[1])
        self.lock = threading.Lock()

    def command(self, word):
        with self.lock:
            self.process.stdin.write(word + "\n")
            self.process.stdin.flush()
            answer = self.process.stdout.readline().strip()
        if not answer.startswith("OK " + word):
            raise RuntimeError("proxy.py answered %s with %r" % (word, answer))

    def stop(self):
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Daemon:
    def __init__(self, index, binary, root, store_uri):
        self.name = "host-%d" % index
        self.home = os.path.join(root, self.name)
        os.makedirs(self.home)
        self.binary = binary
        self.arguments = ["daemon", "--store", store_uri, "--host", self.name, "--lease", "%ds" % LEASE_SECONDS,
                          "--store-timeout", "2s", "--concurrency", "4"]
        self.log_path = os.path.join(self.home, "daemon.log")
        self.process = None
        self.stopped = False  # SIGSTOPped
        self.lock = threading.Lock()

    @property
    def socket_path(self):
        return os.path.join(self.home, "daemon.sock")

    @property
    def environment(self):
        env = dict(os.environ)
        env["TRAILBOOK_JOBS_HOME"] = self.home
        env["TRAILBOOK_JOBS_TEST_KINDS"] = "1"
        env["NO_COLOR"] = "1"
        return env

    def start(self):
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen([self.binary] + self.arguments, env=self.environment, stdout=log, stderr=log,
                                        stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("%s exited at start (%s); log: %s" % (self.name, self.process.returncode, self.log()[-2000:]))
            try:
                if request(self.socket_path, {"op": "ping"}, timeout=2).get("ok"):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("%s did not answer within 30 s" % self.name)

    def up(self):
        return self.process is not None and self.process.poll() is None and not self.stopped

    def kill9(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def log(self):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""


def request(path, message, timeout=10):
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall((json.dumps(message) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            piece = s.recv(65536)
            if not piece:
                raise OSError("connection closed")
            data += piece
    return json.loads(data.decode())


class Watcher(threading.Thread):
    """A `watch` of one daemon's feed, connected again (with `since`) whenever the daemon comes back."""

    def __init__(self, daemon):
        super().__init__(daemon=True)
        self.daemon_ = daemon
        self.lock = threading.Lock()
        self.ends = {}  # job -> [(to, host, seq)]
        self.gaps = []  # time.time() of each gap
        self.last_seq = None
        self.connections = 0
        self.done = False

    def run(self):
        while not self.done:
            try:
                self.follow()
            except (OSError, ValueError):
                pass
            time.sleep(0.05)

    def follow(self):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(1)
            s.connect(self.daemon_.socket_path)
            message = {"op": "watch"}
            if self.last_seq is not None:
                message["since"] = self.last_seq
            s.sendall((json.dumps(message) + "\n").encode())
            self.connections += 1
            buffer = b""
            while not self.done:
                try:
                    piece = s.recv(65536)
                except socket.timeout:
                    continue
                if not piece:
                    return
                buffer += piece
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    self.heard(json.loads(line.decode()))

    def heard(self, event):
        with self.lock:
            if isinstance(event.get("seq"), (int, float)):
                self.last_seq = int(event["seq"])
            kind = event.get("type")
            if kind == "gap":
                self.gaps.append(time.time())
            elif kind == "state" and event.get("to") in ENDED:
                self.ends.setdefault(event.get("job"), []).append((event.get("to"), event.get("host"), event.get("seq")))


class Submitter(threading.Thread):
    def __init__(self, daemons, rng):
        super().__init__(daemon=True)
        self.daemons = daemons
        self.rng = rng
        self.lock = threading.Lock()
        self.submitted = {}  # id -> time.time()
        self.refused = 0
        self.done = False

    def run(self):
        while not self.done:
            daemon = self.rng.choice(self.daemons)
            unfinished = self.unfinished(daemon)
            if unfinished is not None and unfinished < 20 and daemon.up():
                params = {"units": self.rng.randint(1, 40), "unit_ms": self.rng.randint(20, 80)}
                submitted_at = time.time()
                try:
                    reply = request(daemon.socket_path, {"op": "submit", "kind": "sleep", "params": params, "options": {}}, timeout=5)
                    job = reply.get("job") or {}
                    if job.get("id"):
                        with self.lock:
                            self.submitted[job["id"]] = submitted_at
                    else:
                        self.refused += 1
                except (OSError, ValueError):
                    self.refused += 1
            time.sleep(0.05 if unfinished is not None and unfinished < 20 else 0.2)

    def unfinished(self, daemon):
        if not daemon.up():
            return None
        try:
            counts = request(daemon.socket_path, {"op": "list", "limit": 1}, timeout=5).get("counts") or {}
        except (OSError, ValueError):
            return None
        return sum(counts.get(state, 0) for state in ("queued", "running", "needs_retry"))


AUDIT = """
CREATE TABLE IF NOT EXISTS tb_ends (job_id text NOT NULL, state text NOT NULL, at timestamptz NOT NULL DEFAULT now());
CREATE OR REPLACE FUNCTION tb_end_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state NOT IN ('succeeded', 'failed', 'cancelled') AND NEW.state IN ('succeeded', 'failed', 'cancelled') THEN
        INSERT INTO tb_ends (job_id, state) VALUES (NEW.id, NEW.state);
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS tb_end_audit ON trailbook_jobs;
CREATE TRIGGER tb_end_audit AFTER UPDATE ON trailbook_jobs FOR EACH ROW EXECUTE FUNCTION tb_end_audit();
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--daemons", type=int, default=3)
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build", "debug", "trailbook-jobs"))
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    rng = random.Random(seed)
    if not os.access(args.binary, os.X_OK):
        print("shared-crash-loop: no binary at %s (swift build first)" % args.binary)
        return 2
    print("shared-crash-loop: seed %d, %d kills, %d daemons" % (seed, args.kills, args.daemons), flush=True)
    root = tempfile.mkdtemp(prefix="tbj-shared-crash-")
    os.chmod(root, 0o755)
    pg_dir = os.path.join(root, "pg")
    os.makedirs(pg_dir)
    problems = []
    figures = {"kills": 0, "pg_restarts": 0, "stops": 0, "cuts": 0}
    postgres = proxies = daemons = watchers = submitter = None
    try:
        try:
            postgres = Postgres(pg_dir)
        except RuntimeError as error:
            print("shared-crash-loop: cannot start PostgreSQL: %s" % error)
            return 2
        proxies = [Proxy(postgres.socket_path) for _ in range(args.daemons)]
        daemons = [Daemon(i, args.binary, root, postgres.uri(proxies[i].port)) for i in range(args.daemons)]
        for daemon in daemons:
            daemon.start()
        postgres.sql(AUDIT)
        watchers = [Watcher(daemon) for daemon in daemons]
        for watcher in watchers:
            watcher.start()
        submitter = Submitter(daemons, random.Random(rng.random()))
        submitter.start()
        started = time.time()

        while figures["kills"] < args.kills:
            time.sleep(rng.uniform(0.3, 1.5))
            fault = rng.choices(["kill", "postgres", "stop", "cut"], weights=[50, 15, 15, 20])[0]
            daemon_index = rng.randrange(len(daemons))
            daemon = daemons[daemon_index]
            if fault == "kill":
                daemon.kill9()
                figures["kills"] += 1
                if figures["kills"] % 25 == 0:
                    print("shared-crash-loop: %d kills, %d PostgreSQL restarts, %d stops, %d cuts, %.0f s"
                          % (figures["kills"], figures["pg_restarts"], figures["stops"], figures["cuts"],
                             time.time() - started), flush=True)
                time.sleep(rng.uniform(0, 1))
                daemon.start()
            elif fault == "postgres":
                postgres.stop(mode="immediate")
                figures["pg_restarts"] += 1
                time.sleep(rng.uniform(0.2, 2))
                postgres.start()
            elif fault == "stop":
                daemon.process.send_signal(signal.SIGSTOP)
                daemon.stopped = True
                figures["stops"] += 1
                time.sleep(rng.uniform(LEASE_SECONDS + 0.5, LEASE_SECONDS + 3))
                daemon.process.send_signal(signal.SIGCONT)
                daemon.stopped = False
            else:
                proxies[daemon_index].command("cut")
                figures["cuts"] += 1
                time.sleep(rng.uniform(1, 5))
                proxies[daemon_index].command("heal")
        faulted = time.time() - started

        submitter.done = True
        submitter.join(timeout=10)
        # Every job ends: the daemons reconnect (a cut link is given up after the store timeout) and rescue what
        # was left under an expired lease.
        deadline = time.time() + 180
        unended = None
        while time.time() < deadline:
            rows = postgres.sql("SELECT count(*) FROM trailbook_jobs WHERE state NOT IN ('succeeded', 'failed', 'cancelled')")
            unended = int(rows.strip() or "0")
            if unended == 0:
                break
            time.sleep(0.5)
        if unended:
            problems.append("%d jobs not ended 180 s after the last fault" % unended)
        states = {}
        for line in postgres.sql("SELECT id, state FROM trailbook_jobs").splitlines():
            job, state = line.split("|")
            states[job] = state
        ends = {}
        for line in postgres.sql("SELECT job_id, state FROM tb_ends").splitlines():
            job, state = line.split("|")
            ends.setdefault(job, []).append(state)
        for job, state in sorted(states.items()):
            if state in ENDED and len(ends.get(job, [])) != 1:
                problems.append("job %s: %d ends written in the store (%s)" % (job, len(ends.get(job, [])), ends.get(job)))
        for job in sorted(set(submitter.submitted) - set(states)):
            problems.append("job %s: acknowledged but not in the store" % job)

        # The watchers catch up: each has an end of each job, or was told `gap` since the job was submitted.
        def submitted_at(job):
            return submitter.submitted.get(job, started)

        def settled(watcher):
            with watcher.lock:
                return all(job in watcher.ends or any(g >= submitted_at(job) - 1 for g in watcher.gaps) for job in states)

        deadline = time.time() + 30
        while time.time() < deadline and not all(settled(w) for w in watchers):
            time.sleep(0.2)
        seen = missed = 0
        for watcher in watchers:
            watcher.done = True
            with watcher.lock:
                for job, state in sorted(states.items()):
                    heard = watcher.ends.get(job, [])
                    if len(heard) > 1:
                        problems.append("watcher of %s: %d end events for job %s: %s" % (watcher.daemon_.name, len(heard), job, heard))
                    elif len(heard) == 1:
                        seen += 1
                        if heard[0][0] != state:
                            problems.append("watcher of %s: job %s ended %s on the feed, %s in the store" % (watcher.daemon_.name, job, heard[0][0], state))
                    elif any(g >= submitted_at(job) - 1 for g in watcher.gaps):
                        missed += 1
                    else:
                        problems.append("watcher of %s: no end event for job %s and no gap" % (watcher.daemon_.name, job))
        for daemon in daemons:
            if postgres.password in daemon.log():
                problems.append("%s's log names the database password" % daemon.name)
        counted = {}
        for state in states.values():
            counted[state] = counted.get(state, 0) + 1
        print("shared-crash-loop: seed %d: %d kills, %d PostgreSQL restarts, %d stops past the lease, %d cuts in %.0f s; "
              "%d jobs (%s), %d submits refused; end events seen %d, missed behind a gap %d, watcher connections %s"
              % (seed, figures["kills"], figures["pg_restarts"], figures["stops"], figures["cuts"], faulted, len(states),
                 ", ".join("%d %s" % (n, s) for s, n in sorted(counted.items())), submitter.refused, seen, missed,
                 "/".join(str(w.connections) for w in watchers)), flush=True)
    finally:
        if submitter:
            submitter.done = True
        for daemon in daemons or []:
            if daemon.process and daemon.process.poll() is None:
                daemon.process.send_signal(signal.SIGCONT)
                daemon.process.send_signal(signal.SIGTERM)
                try:
                    daemon.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    daemon.kill9()
        for proxy in proxies or []:
            proxy.stop()
        if postgres:
            try:
                postgres.stop(mode="immediate")
            except RuntimeError:
                pass
        if args.keep:
            print("shared-crash-loop: kept %s" % root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    for problem in problems:
        print("PROBLEM: " + problem)
    print("shared-crash-loop: %s" % ("ok" if not problems else "%d problems" % len(problems)))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
