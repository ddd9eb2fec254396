#!/usr/bin/env python3
"""Crash loop: kill -9 the daemon at random moments during tus, s3:// and file:// uploads and batched submits, then check
nothing was lost or doubled.

    python3 scripts/crash-loop.py [--kills 8] [--seed N] [--binary PATH] [--keep] [--tree-files N] [--tree-to LIST]

What it does, on 127.0.0.1 only, in a temporary directory it removes afterwards (unless --keep):
- starts the real tus server (Tests/Support/tus-server/server.py, from the .venv-tus that
  Tests/Support/tus-server/setup.sh makes) behind the fault-injecting proxy (proxy.py), and a daemon;
- starts the S3 test server (moto, Tests/Support/s3-server/server.py, from the .venv-s3 that
  Tests/Support/s3-server/setup.sh makes) with 1 MiB parts allowed;
- submits rounds of uploads: three tus uploads of random files (one job each) through the proxy, one s3:// upload
  of a multipart file and a one-PUT file, and one directory (file://) upload of several files, all in 1 MiB chunks under --max-rate, so they run for seconds;
  with --tree-files N, also a folder of N files (nested folders, 0 B to 48 KiB, one of 3 MiB) uploaded as one job
  to each destination of --tree-to (default tus,s3,file);
- --kills times: waits a random 0.2-1.5 s (and 3 times in 10 then waits for a batch submit to start, and 0-60 ms
  more, to aim the kill at it), sometimes arms a proxy fault (a 503 or a reset in the middle of a
  PATCH) or an S3 fault (a 503 SlowDown to an UploadPart), kill -9s the daemon and starts it again. When a round's jobs have all ended it is checked and a new
  round is submitted, so a long run (--kills 1000) keeps uploads in flight for every kill;
- meanwhile a second thread submits batches of `sleep` test jobs through the CLI (`submit --from -`, 1-30 jobs a
  batch, each with its own idempotency key), and now and then submits an acknowledged batch again with the same
  keys; a batch the CLI could not hand over (exit 3: the daemon was down) is sent again with the same keys until it
  is acknowledged. A kill that lands between a submit's commit and its reply is recovered by the CLI itself, which
  asks again with the same keys (counted as "lost replies");
- after the last kill, lets the daemon finish and checks every round:
  * every job ended `succeeded`;
  * every uploaded object's SHA-256 (the tus server's stored file, the S3 object, the destination directory's
    file) equals its source's, and the job's result reports the same digest; a folder's every file is in its
    result exactly once, by its relative path;
  * no orphan: the tus server holds exactly the uploads the results name (but for empty ones, at most one per kill
    and upload being created, 4 for a folder:
    a kill between a POST and the store write after its answer leaves an upload tus gives no way to find; they are
    printed), the S3 server no multipart upload in progress, and the destination directory holds no `.part` file;
  * a job's `bytes_resent` is at most what was in flight per kill and per injected fault during its life: one
    chunk for tus and file://, S3_PARTS_IN_FLIGHT parts for s3:// (each part in flight at a kill is sent again
    whole and counted whole, as the tus PATCH under way is);
  and every batched job:
  * every acknowledged key names exactly one job in the store, the one its acknowledgement gave, and a batch sent
    again got the same IDs back, marked existing (a resubmitted key never doubles a job);
  * there is no job with a key that was never submitted, and none without a key;
  * every one ended `succeeded`, and its end was logged by the daemon at most once (never run twice).
Prints one summary line and exits 0 when every check held, 1 otherwise (each failed check is printed), 2 when it
could not run (no venv, no binary).

CI runs it with a small count (scripts/test.sh); CONTRIBUTING.md gives the figure of the longest run made.
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
import threading
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUS = os.path.join(ROOT, "Tests", "Support", "tus-server")
S3 = os.path.join(ROOT, "Tests", "Support", "s3-server")
S3_BUCKET = "crash"
CHUNK = 1024 * 1024
# The daemon's default parts in flight for one s3:// upload (docs/explanation/uploads.md, "Parts"); parts here are CHUNK bytes.
S3_PARTS_IN_FLIGHT = 4


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
        self.env = dict(os.environ, TRAILBOOK_JOBS_HOME=home, NO_COLOR="1", TRAILBOOK_JOBS_TEST_KINDS="1",
                        AWS_ACCESS_KEY_ID="crash",
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

    def __init__(self, index, work, rng, daemon, proxy_url, tree_files=0, tree_to=("tus", "s3", "file")):
        self.index = index
        self.dir = os.path.join(work, f"round-{index}")
        self.dest = os.path.join(self.dir, "dest")
        os.makedirs(self.dest)
        self.sources = {}  # job id -> {name at the destination: source path}
        self.kind = {}  # job id -> "tus", "s3" or "file"
        self.started = time.monotonic()
        for n in range(3):
            path = os.path.join(self.dir, f"trip-{n}.bin")
            with open(path, "wb") as f:
                f.write(rng.randbytes(rng.randint(3 * CHUNK, 9 * CHUNK) + rng.randint(0, CHUNK)))
            job = daemon.submit([path, "--to", proxy_url, "--chunk-size", "1MiB", "--max-rate", "4MiB"])
            self.sources[job], self.kind[job] = names([path]), "tus"
        s3_files = []
        for n, size in enumerate([rng.randint(3 * CHUNK, 8 * CHUNK), rng.randint(1, CHUNK)]):
            path = os.path.join(self.dir, f"s3-{n}.bin")
            with open(path, "wb") as f:
                f.write(rng.randbytes(size))
            s3_files.append(path)
        job = daemon.submit([*s3_files, "--to", f"s3://{S3_BUCKET}/round-{index}/", "--chunk-size", "1MiB",
                             "--min-part-size", "1MiB", "--max-rate", "4MiB"])
        self.sources[job], self.kind[job] = names(s3_files), "s3"
        files = []
        for n in range(4):
            path = os.path.join(self.dir, f"photo-{n}.jpg")
            with open(path, "wb") as f:
                f.write(rng.randbytes(rng.randint(1, 4 * CHUNK)))
            files.append(path)
        job = daemon.submit([*files, "--to", "file://" + self.dest, "--chunk-size", "1MiB", "--max-rate", "6MiB"])
        self.sources[job], self.kind[job] = names(files), "file"
        self.s3_prefix = {}  # job id -> its S3 prefix
        self.dests = {}  # job id -> its destination directory (file://)
        if tree_files:
            self.tree_round(rng, daemon, proxy_url, tree_files, tree_to)
        self.events = []  # monotonic times of kills and faults while this round ran
        self.faults = 0  # faults armed while it was the last round

    def tree_round(self, rng, daemon, proxy_url, count, tree_to):
        """A folder of `count` files, uploaded as one job to each destination of `tree_to`."""
        tree = os.path.join(self.dir, "tree")
        files = {}
        for n in range(count):
            name = f"d{n % 17}/" + (f"s{n % 5}/" if n % 3 == 0 else "") + f"f {n}.bin"
            path = os.path.join(tree, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            size = 3 * CHUNK if n == count // 2 else rng.choice([0, 1, rng.randint(2, 48 * 1024)])
            with open(path, "wb") as f:
                f.write(rng.randbytes(size))
            files[name] = path
        if "tus" in tree_to:
            # --again: every round's folder has the same names at the same endpoint, and the upload memory would
            # leave out the ones whose bytes match an earlier round's (the empty files): this checks crashes, not sync.
            job = daemon.submit([tree, "--to", proxy_url, "--chunk-size", "1MiB", "--max-rate", "4MiB", "--again"])
            self.sources[job], self.kind[job] = dict(files), "tus"
        if "s3" in tree_to:
            prefix = f"round-{self.index}-tree/"
            job = daemon.submit([tree, "--to", f"s3://{S3_BUCKET}/{prefix}", "--chunk-size", "1MiB",
                                 "--min-part-size", "1MiB", "--max-rate", "4MiB"])
            self.sources[job], self.kind[job], self.s3_prefix[job] = dict(files), "s3", prefix
        if "file" in tree_to:
            dest = os.path.join(self.dir, "dest-tree")
            job = daemon.submit([tree, "--to", "file://" + dest, "--chunk-size", "1MiB", "--max-rate", "6MiB"])
            self.sources[job], self.kind[job], self.dests[job] = dict(files), "file", dest

    def ended(self, daemon):
        # Only the unfinished uploads: a long run holds thousands of ended batched jobs.
        waiting = daemon.request({"op": "list", "kind": "upload", "limit": 100000,
                                  "states": ["queued", "running", "paused", "needs_retry"]})["jobs"]
        return not any(j["id"] in self.sources for j in waiting)


class Batches(threading.Thread):
    """Submits batches of `sleep` jobs with idempotency keys through the CLI until stopped, while the main thread
    kills the daemon; records what each acknowledgement said."""

    def __init__(self, daemon, seed):
        super().__init__(daemon=True)
        self.daemon_, self.rng = daemon, random.Random(seed)
        self.stopping = threading.Event()
        self.sending = threading.Event()  # set while a CLI submit runs, so a kill can be aimed at it
        self.acked = {}  # key -> job id, from the first acknowledgement
        self.submitted = set()  # every key sent
        self.sent = []  # the NDJSON text of each acknowledged batch, to send again
        self.batches = self.resubmits = self.lost_replies = self.lost_after_commit = self.unreachable = 0
        self.ends_logged = 0
        self.problems = []

    def submit(self, text, again):
        """Sends one batch until it is acknowledged (the CLI retries a lost reply itself; exit 3 means it never
        reached a daemon, so it is sent again here, with the same keys)."""
        while True:
            self.sending.set()
            try:
                out = subprocess.run([self.daemon_.binary, "submit", "--from", "-", "--json"], input=text,
                                     env=self.daemon_.env, capture_output=True, text=True, timeout=90)
            finally:
                self.sending.clear()
            if "asking again with the same key" in out.stderr:
                self.lost_replies += 1
            if out.returncode == 3:
                self.unreachable += 1
                time.sleep(0.05)
                continue
            if out.returncode != 0:
                self.problems.append(f"batch submit failed ({out.returncode}): {out.stderr.strip()[:300]}")
                return
            reply = json.loads(out.stdout)
            keys = [json.loads(line)["key"] for line in text.splitlines()]
            if "asking again with the same key" in out.stderr and not again and any(reply["existing"]):
                self.lost_after_commit += 1  # the kill fell between the commit and the reply
            if len(reply["ids"]) != len(keys):
                self.problems.append(f"batch of {len(keys)} answered with {len(reply['ids'])} ids")
                return
            for key, job, existing in zip(keys, reply["ids"], reply["existing"]):
                known = self.acked.setdefault(key, job)
                if known != job:
                    self.problems.append(f"key {key} acknowledged as job {known}, then as job {job} (doubled)")
                if again and not existing:
                    self.problems.append(f"key {key} sent again was not marked existing")
            return

    def run(self):
        while not self.stopping.is_set():
            if self.sent and self.rng.random() < 0.2:
                self.resubmits += 1
                self.submit(self.rng.choice(self.sent), again=True)
            else:
                lines = []
                for n in range(self.rng.randint(1, 30)):
                    key = f"b{self.batches}-{n}"
                    self.submitted.add(key)
                    lines.append(json.dumps({"kind": "sleep", "key": key,
                                             "params": {"units": self.rng.randint(0, 3), "unit_ms": 5}}))
                text = "\n".join(lines) + "\n"
                self.batches += 1
                self.submit(text, again=False)
                self.sent.append(text)
            time.sleep(self.rng.uniform(0.05, 0.4))

    def ended(self, daemon):
        return not daemon.request({"op": "list", "kind": "sleep", "limit": 1,
                                   "states": ["queued", "running", "paused", "needs_retry"]})["jobs"]

    def check(self, daemon, log_path):
        problems = list(self.problems)
        jobs = daemon.request({"op": "list", "kind": "sleep", "limit": 100000})["jobs"]
        by_key = {}
        for job in jobs:
            if job.get("key") is None:
                problems.append(f"sleep job {job['id']} has no key")
                continue
            by_key.setdefault(job["key"], []).append(job)
        for key, job_id in self.acked.items():
            found = by_key.get(key, [])
            if len(found) != 1:
                problems.append(f"acknowledged key {key} names {len(found)} jobs (job {job_id})")
            elif found[0]["id"] != job_id:
                problems.append(f"acknowledged key {key} gave job {job_id}, the store holds {found[0]['id']}")
        for key in set(by_key) - self.submitted:
            problems.append(f"job(s) with key {key}, never submitted")
        if set(self.acked) != self.submitted:
            problems.append(f"{len(self.submitted - set(self.acked))} submitted key(s) never acknowledged")
        with open(log_path, "rb") as f:
            log = f.read().decode(errors="replace")
        prefixes = {}
        for job in jobs:
            prefixes.setdefault(job["id"][:8], []).append(job["id"])
            if job["state"] != "succeeded":
                problems.append(f"sleep job {job['id']} ended {job['state']}: {job.get('error')}")
        for prefix, ids in prefixes.items():
            ends = log.count(f"job {prefix} sleep running -> succeeded")
            self.ends_logged += 1 if len(ids) == 1 and ends == 1 else 0
            if len(ids) == 1 and ends > 1:
                problems.append(f"sleep job {ids[0]} ended {ends} times")
        return problems, len(jobs)


def names(paths):
    """Files given one by one: each goes under its own name."""
    return {os.path.basename(p): p for p in paths}


def s3_get(s3_port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{s3_port}{path}", timeout=10) as reply:
        return json.loads(reply.read())


def tus_offset(tus_files, upload):
    """The bytes tuspyserver holds of `upload` (its .info's offset); None if unreadable."""
    try:
        with open(os.path.join(tus_files, upload + ".info")) as f:
            return json.load(f).get("offset")
    except (OSError, ValueError):
        return None


def landed_files(daemon, job_id):
    """A folder upload's landed files from its file list (the `files` request, paged), as a result lists files:
    {"name", "sha256", "url"} (url: where the file is, a tus upload's URL)."""
    files, after = [], -1
    while after is not None:
        reply = daemon.request({"op": "files", "job": job_id, "state": "done", "after": after, "limit": 10000})
        for entry in reply["files"]:
            files.append({"name": entry["item"]["name"], "sha256": entry.get("code"), "url": entry.get("message", "")})
        after = reply["next_after"]
    return files


def check(rounds, daemon, tus_files, s3_port, empty_bound):
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
            files = result["files"]
            if "tree" in result:
                # A folder upload's result holds counts; its files are its file list (`show ID --files`).
                if files:
                    problems.append(f"job {job_id}: a folder upload's result lists {len(files)} files")
                files = landed_files(daemon, job_id)
            by_name = {f["name"]: f for f in files}
            if len(by_name) != len(files):
                problems.append(f"job {job_id}: {len(files) - len(by_name)} file(s) listed twice")
            if set(by_name) != set(sources):
                problems.append(f"job {job_id}: {len(set(sources) - set(by_name))} file(s) missing from the result, "
                                f"{len(set(by_name) - set(sources))} unknown")
            for name, source in sources.items():
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
                        key = r.s3_prefix.get(job_id, f"round-{r.index}/") + name
                        got = s3_get(s3_port, "/__object?key=" + urllib.parse.quote(key))["sha256"]
                    except urllib.error.HTTPError:
                        got = "missing"
                else:
                    stored = os.path.join(r.dests.get(job_id, r.dest), name)
                    got = sha256_file(stored) if os.path.exists(stored) else "missing"
                if got != want:
                    problems.append(f"job {job_id}: stored {name} has digest {got}, source {want} (corrupt)")
            in_flight = S3_PARTS_IN_FLIGHT if r.kind[job_id] == "s3" else 1
            bound = len(r.events) * in_flight * CHUNK
            if result.get("bytes_resent", 0) > bound:
                problems.append(f"job {job_id}: bytes_resent {result['bytes_resent']} > {bound} "
                                f"({in_flight} chunk(s) in flight per kill or fault, {len(r.events)} during its round)")
        leftovers = glob.glob(os.path.join(r.dest, "*.part"))
        for dest in r.dests.values():
            leftovers += glob.glob(os.path.join(dest, "**", "*.part"), recursive=True)
        if leftovers:
            problems.append(f"round {r.index}: .part files left: {leftovers}")
    on_server = {os.path.basename(p)[:-5] for p in glob.glob(os.path.join(tus_files, "*.info"))}
    orphans = sorted(on_server - named_uploads)
    # The one leftover tus cannot avoid: an upload the server created for a POST whose answer a kill -9 cut off
    # before the daemon could write its URL down (the protocol has no way to find it again). It holds no byte, and
    # there is at most one per kill and upload being created (one per tus job of files, 4 for a folder): at most
    # `empty_bound`. Any other orphan is a problem.
    empty = [o for o in orphans if tus_offset(tus_files, o) == 0]
    if len(orphans) > len(empty) or len(empty) > empty_bound:
        problems.append(f"{len(orphans)} orphaned upload(s) on the tus server ({len(empty)} empty, at most "
                        f"{empty_bound} allowed): {orphans[:5]}")
    elif empty:
        print(f"crash-loop: {len(empty)} empty tus upload(s) left by kills between a POST and its answer "
              f"(the server expires them): {empty[:5]}")
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
    parser.add_argument("--tree-files", type=int, default=0,
                        help="also upload a folder of this many files to each destination every round (e.g. 2000)")
    parser.add_argument("--tree-to", default="tus,s3,file",
                        help="the destinations of the folder uploads, comma-separated (tus, s3, file)")
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
        rounds = [Round(0, work, rng, daemon, proxy_url, args.tree_files, args.tree_to.split(","))]
        batches = Batches(daemon, rng.randrange(1 << 30))
        batches.start()
        for kill in range(args.kills):
            time.sleep(rng.uniform(0.2, 1.5))
            if rng.random() < 0.3 and batches.sending.wait(2):
                # Aimed at a batch submit under way: before, during or after its commit, before its reply.
                time.sleep(rng.uniform(0.0, 0.06))
            if rng.random() < 0.3:
                fault = rng.choice(["status?code=503&count=1&method=PATCH",
                                    f"drop?after={rng.randint(1, CHUNK - 1)}&count=1"])
                urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{proxy_port}/__fault/{fault}",
                                                              method="POST"), timeout=5).read()
                faults += 1
                rounds[-1].events.append(time.monotonic())
                rounds[-1].faults += 1
            if rng.random() < 0.3:
                urllib.request.urlopen(urllib.request.Request(
                    f"http://127.0.0.1:{s3_port}/__fault/status?code=503&count=1&action=UploadPart&s3_code=SlowDown",
                    method="POST"), timeout=5).read()
                faults += 1
                rounds[-1].events.append(time.monotonic())
                rounds[-1].faults += 1
            daemon.kill9()
            rounds[-1].events.append(time.monotonic())
            daemon.start()
            if rounds[-1].ended(daemon) and kill < args.kills - 1:
                # A fault armed while the last round ran may not have met a request of it, and then meets the
                # new round's first one: it counts there too.
                carried = rounds[-1].faults
                rounds.append(Round(len(rounds), work, rng, daemon, proxy_url, args.tree_files,
                                    args.tree_to.split(",")))
                rounds[-1].events += [time.monotonic()] * carried
        batches.stopping.set()
        batches.join()
        deadline = time.monotonic() + args.settle
        while not all(r.ended(daemon) for r in rounds) or not batches.ended(daemon):
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        # A folder to tus creates up to 4 uploads at once (its small files go 4 at a time): 4 POSTs a kill can cut.
        tus_jobs = 3 + (4 if args.tree_files and "tus" in args.tree_to.split(",") else 0)
        problems = check(rounds, daemon, tus_files, s3_port, args.kills * tus_jobs)
        batch_problems, batch_jobs = batches.check(daemon, os.path.join(work, "daemon.log"))
        problems += batch_problems
    finally:
        if "batches" in locals():
            batches.stopping.set()
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
          f"{batches.batches} batches ({batch_jobs} jobs, {batches.resubmits} sent again, {batches.lost_replies} lost "
          f"replies recovered ({batches.lost_after_commit} after the commit), {batches.ends_logged} ends logged once, "
          f"{batches.unreachable} sends to a stopped daemon), {len(problems)} problems, "
          f"{time.monotonic() - started:.0f} s")
    if args.keep or problems:
        print(f"crash-loop: work directory kept: {work} (daemon.log there)")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
