#!/usr/bin/env python3
"""Crash loop: kill -9 the daemon at random moments during tus, s3:// and file:// uploads, then check nothing was lost.

    python3 scripts/crash-loop.py [--kills 8] [--seed N] [--binary PATH] [--keep]

What it does, on 127.0.0.1 only, in a temporary directory it removes afterwards (unless --keep):
- starts the real tus server (Tests/Support/tus-server/server.py, from the .venv-tus that
  Tests/Support/tus-server/setup.sh makes) behind the fault-injecting proxy (proxy.py), and a daemon;
- starts the S3 test server (moto, Tests/Support/s3-server/server.py, from the .venv-s3 that
  Tests/Support/s3-server/setup.sh makes) with 1 MiB parts allowed;
- submits rounds of uploads: three tus uploads of random files (one job each) through the proxy, one s3:// upload
  of a multipart file and a one-PUT file, and one directory (file://) upload of several files, all in 1 MiB chunks under --max-rate, so they run for seconds;
- --kills times: waits a random 0.2-1.5 s, sometimes arms a proxy fault (a 503 or a reset in the middle of a
  PATCH) or an S3 fault (a 503 SlowDown to an UploadPart), kill -9s the daemon and starts it again. When a round's jobs have all ended it is checked and a new
  round is submitted, so a long run (--kills 1000) keeps uploads in flight for every kill;
- after the last kill, lets the daemon finish and checks every round:
  * every job ended `succeeded`;
  * every uploaded object's SHA-256 (the tus server's stored file, the S3 object, the destination directory's
    file) equals its source's, and the job's result reports the same digest;
  * no orphan: the tus server holds exactly the uploads the results name, the S3 server no multipart upload in
    progress, and the destination directory holds no `.part` file;
  * a job's `bytes_resent` is at most one chunk per kill and per injected fault during its life.
Prints one summary line and exits 0 when every check held, 1 otherwise (each failed check is printed), 2 when it
could not run (no venv, no binary).

CI runs it with a small count (scripts/test.sh); README gives the figure of the longest run made.
"""

import argparse
import glob
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUS = os.path.join(ROOT, "Tests", "Support", "tus-server")
S3 = os.path.join(ROOT, "Tests", "Support", "s3-server")
S3_BUCKET = "crash"
CHUNK = 1024 * 1024


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                return digest.hexdigest()
            digest.update(block)


def start_ready(argv, **kwargs):
    """Starts a server that prints `READY <port>` and returns (process, port). Its stdin stays open: the test
    servers exit when it closes, so they never outlive this script."""
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, **kwargs)
    line = process.stdout.readline().decode().split()
    if len(line) != 2 or line[0] != "READY":
        process.kill()
        raise SystemExit(f"crash-loop: {argv[1]} did not start")
    return process, int(line[1])


class Daemon:
    """The daemon under test, restarted after every kill."""

    def __init__(self, binary, home, log, s3_port):
        self.binary, self.home, self.log = binary, home, log
        self.env = dict(os.environ, TRAILBOOK_JOBS_HOME=home, NO_COLOR="1", AWS_ACCESS_KEY_ID="crash",
                        AWS_SECRET_ACCESS_KEY="loop", AWS_ENDPOINT_URL=f"http://127.0.0.1:{s3_port}",
                        AWS_REGION="us-east-1", AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
                        AWS_CONFIG_FILE="/nonexistent", AWS_PROFILE="", AWS_SESSION_TOKEN="")
        self.process = None

    def start(self):
        self.process = subprocess.Popen([self.binary, "daemon", "--retry-base", "200ms", "--concurrency", "4"],
                                        env=self.env, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if self.request({"op": "ping"}).get("ok"):
                    return
            except OSError:
                pass
            if self.process.poll() is not None:
                raise SystemExit(f"crash-loop: the daemon exited with {self.process.returncode} at start")
            time.sleep(0.02)
        raise SystemExit("crash-loop: the daemon did not answer ping within 15 s")

    def kill9(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.kill9()

    def request(self, request):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(os.path.join(self.home, "daemon.sock"))
            s.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                block = s.recv(1 << 16)
                if not block:
                    break
                data += block
        return json.loads(data)

    def submit(self, args):
        out = subprocess.run([self.binary, "submit", "upload", *args, "--json"], env=self.env, capture_output=True,
                             text=True, timeout=30)
        if out.returncode != 0:
            raise SystemExit(f"crash-loop: submit failed ({out.returncode}): {out.stderr.strip()}")
        return json.loads(out.stdout)["id"]


class Round:
    """One set of uploads: their sources, job ids and life spans (for the resend bound)."""

    def __init__(self, index, work, rng, daemon, proxy_url):
        self.index = index
        self.dir = os.path.join(work, f"round-{index}")
        self.dest = os.path.join(self.dir, "dest")
        os.makedirs(self.dest)
        self.sources = {}  # job id -> [source paths]
        self.kind = {}  # job id -> "tus", "s3" or "file"
        self.started = time.monotonic()
        for n in range(3):
            path = os.path.join(self.dir, f"trip-{n}.bin")
            with open(path, "wb") as f:
                f.write(rng.randbytes(rng.randint(3 * CHUNK, 9 * CHUNK) + rng.randint(0, CHUNK)))
            job = daemon.submit([path, "--to", proxy_url, "--chunk-size", "1MiB", "--max-rate", "4MiB"])
            self.sources[job], self.kind[job] = [path], "tus"
        s3_files = []
        for n, size in enumerate([rng.randint(3 * CHUNK, 8 * CHUNK), rng.randint(1, CHUNK)]):
            path = os.path.join(self.dir, f"s3-{n}.bin")
            with open(path, "wb") as f:
                f.write(rng.randbytes(size))
            s3_files.append(path)
        job = daemon.submit([*s3_files, "--to", f"s3://{S3_BUCKET}/round-{index}/", "--chunk-size", "1MiB",
                             "--min-part-size", "1MiB", "--max-rate", "4MiB"])
        self.sources[job], self.kind[job] = s3_files, "s3"
        files = []
        for n in range(4):
            path = os.path.join(self.dir, f"photo-{n}.jpg")
            with open(path, "wb") as f:
                f.write(rng.randbytes(rng.randint(1, 4 * CHUNK)))
            files.append(path)
        job = daemon.submit([*files, "--to", "file://" + self.dest, "--chunk-size", "1MiB", "--max-rate", "6MiB"])
        self.sources[job], self.kind[job] = files, "file"
        self.events = []  # monotonic times of kills and faults while this round ran

    def ended(self, daemon):
        jobs = {j["id"]: j for j in daemon.request({"op": "list", "limit": 100000})["jobs"]}
        return all(jobs[i]["state"] in ("succeeded", "failed", "cancelled") for i in self.sources)


def s3_get(s3_port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{s3_port}{path}", timeout=10) as reply:
        return json.loads(reply.read())


def check(rounds, daemon, tus_files, s3_port):
    """Every check of the module docstring; returns the list of problems (empty when all held)."""
    problems = []
    jobs = {j["id"]: j for j in daemon.request({"op": "list", "limit": 100000})["jobs"]}
    named_uploads = set()
    for r in rounds:
        for job_id, sources in r.sources.items():
            job = jobs.get(job_id)
            if job is None:
                problems.append(f"job {job_id} is lost")
                continue
            if job["state"] != "succeeded":
                problems.append(f"job {job_id} ({r.kind[job_id]}) ended {job['state']}: {job.get('error')}")
                continue
            result = job["result"]
            by_name = {f["name"]: f for f in result["files"]}
            for source in sources:
                name = os.path.basename(source)
                entry = by_name.get(name)
                want = sha256_file(source)
                if entry is None:
                    problems.append(f"job {job_id}: no result for {name}")
                    continue
                if entry["sha256"] != want:
                    problems.append(f"job {job_id}: result digest of {name} is {entry['sha256']}, source {want}")
                if r.kind[job_id] == "tus":
                    upload = entry["url"].rstrip("/").rsplit("/", 1)[1]
                    named_uploads.add(upload)
                    stored = os.path.join(tus_files, upload)
                    got = sha256_file(stored) if os.path.exists(stored) else "missing"
                elif r.kind[job_id] == "s3":
                    try:
                        got = s3_get(s3_port, f"/__object?key=round-{r.index}/{name}")["sha256"]
                    except urllib.error.HTTPError:
                        got = "missing"
                else:
                    stored = os.path.join(r.dest, name)
                    got = sha256_file(stored) if os.path.exists(stored) else "missing"
                if got != want:
                    problems.append(f"job {job_id}: stored {name} has digest {got}, source {want} (corrupt)")
            bound = len(r.events) * CHUNK
            if result.get("bytes_resent", 0) > bound:
                problems.append(f"job {job_id}: bytes_resent {result['bytes_resent']} > {bound} "
                                f"(one chunk per kill or fault, {len(r.events)} during its round)")
        leftovers = glob.glob(os.path.join(r.dest, "*.part"))
        if leftovers:
            problems.append(f"round {r.index}: .part files left: {leftovers}")
    on_server = {os.path.basename(p)[:-5] for p in glob.glob(os.path.join(tus_files, "*.info"))}
    orphans = sorted(on_server - named_uploads)
    if orphans:
        problems.append(f"{len(orphans)} orphaned upload(s) on the tus server: {orphans[:5]}")
    multipart = s3_get(s3_port, "/__uploads")["uploads"]
    if multipart:
        problems.append(f"{len(multipart)} multipart upload(s) left on the S3 server: {multipart[:5]}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--binary", default=os.environ.get("TRAILBOOK_JOBS_BIN",
                                                           os.path.join(ROOT, ".build", "debug", "trailbook-jobs")))
    parser.add_argument("--keep", action="store_true", help="keep the work directory (its path is printed)")
    parser.add_argument("--settle", type=float, default=180, help="seconds the last round may take to finish")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    python = os.path.join(ROOT, ".venv-tus", "bin", "python")
    if not os.access(python, os.X_OK):
        print("crash-loop: no .venv-tus; run Tests/Support/tus-server/setup.sh first", file=sys.stderr)
        return 2
    s3_python = os.path.join(ROOT, ".venv-s3", "bin", "python")
    if not os.access(s3_python, os.X_OK):
        print("crash-loop: no .venv-s3; run Tests/Support/s3-server/setup.sh first", file=sys.stderr)
        return 2
    if not os.access(args.binary, os.X_OK):
        print(f"crash-loop: no binary at {args.binary}; run swift build first", file=sys.stderr)
        return 2

    work = tempfile.mkdtemp(prefix="tbj-crash-loop-")
    tus_files = os.path.join(work, "tus-files")
    os.makedirs(tus_files)
    log = open(os.path.join(work, "daemon.log"), "ab")
    server, server_port = start_ready([python, os.path.join(TUS, "server.py"), "--files-dir", tus_files])
    proxy, proxy_port = start_ready([python, os.path.join(TUS, "proxy.py"), "--upstream-port", str(server_port)])
    proxy_url = f"http://127.0.0.1:{proxy_port}/files/"
    s3_server, s3_port = start_ready([s3_python, os.path.join(S3, "server.py"), "--bucket", S3_BUCKET,
                                      "--min-part-size", str(CHUNK)])
    daemon = Daemon(args.binary, os.path.join(work, "home"), log, s3_port)
    os.makedirs(daemon.home)
    faults = 0
    started = time.monotonic()
    try:
        daemon.start()
        rounds = [Round(0, work, rng, daemon, proxy_url)]
        for kill in range(args.kills):
            time.sleep(rng.uniform(0.2, 1.5))
            if rng.random() < 0.3:
                fault = rng.choice(["status?code=503&count=1&method=PATCH",
                                    f"drop?after={rng.randint(1, CHUNK - 1)}&count=1"])
                urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{proxy_port}/__fault/{fault}",
                                                              method="POST"), timeout=5).read()
                faults += 1
                rounds[-1].events.append(time.monotonic())
            if rng.random() < 0.3:
                urllib.request.urlopen(urllib.request.Request(
                    f"http://127.0.0.1:{s3_port}/__fault/status?code=503&count=1&action=UploadPart&s3_code=SlowDown",
                    method="POST"), timeout=5).read()
                faults += 1
                rounds[-1].events.append(time.monotonic())
            daemon.kill9()
            rounds[-1].events.append(time.monotonic())
            daemon.start()
            if rounds[-1].ended(daemon) and kill < args.kills - 1:
                rounds.append(Round(len(rounds), work, rng, daemon, proxy_url))
        deadline = time.monotonic() + args.settle
        while not rounds[-1].ended(daemon) or not all(r.ended(daemon) for r in rounds):
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        problems = check(rounds, daemon, tus_files, s3_port)
    finally:
        daemon.stop()
        for p in (proxy, server, s3_server):
            p.stdin.close()
            p.kill()
            p.wait()
        log.close()
    jobs = sum(len(r.sources) for r in rounds)
    for problem in problems:
        print("crash-loop: FAIL " + problem)
    print(f"crash-loop: seed {seed}: {args.kills} kills, {faults} injected faults, {len(rounds)} rounds, {jobs} jobs, "
          f"{len(problems)} problems, {time.monotonic() - started:.0f} s")
    if args.keep or problems:
        print(f"crash-loop: work directory kept: {work} (daemon.log there)")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
