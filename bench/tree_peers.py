#!/usr/bin/env python3
"""Benchmark: a folder upload (issue 35) against the tools people copy trees with, side by side in one run.

To moto (Tests/Support/s3-server/server.py, 127.0.0.1): `trailbook-jobs submit upload DIR --to s3://…` (release
build, one daemon for the run) beside `rclone copy DIR moto:…` (Debian's rclone) and `aws s3 sync DIR s3://…`
(awscli from .venv-s3). To a local folder: the same upload with `--to file://…` beside `rclone copy` and
`rsync -a`. Each client uploads each tree twice: the first upload (the destination empty), then again with nothing
changed (every file already there, so all should be skipped). Rounds rotate the clients' order so drift on a shared
machine hits each alike. Per run: wall time; CPU seconds of the client's process tree (the daemon's from
/proc/PID/stat plus the `submit --wait` CLI's, or the peer and its children from wait4); peak RSS (the daemon's
VmHWM, reset before each run, or the peer's ru_maxrss); and at moto the requests and the request-body bytes it
received (from its request log). Every first upload's files are checked by SHA-256 against the source.

    bench/setup-tree-peers.sh            # once: rclone and rsync (Debian), .venv-s3 (moto, awscli)
    .venv-s3/bin/python bench/tree_peers.py [--rounds 2] [--sets small,photos] [--to s3,file]
        [--small 2000x100KiB] [--photos 200x5MiB|200x3-12MiB] [--binary PATH] [--clients daemon,rclone,aws,rsync]
        [--baseline PATH]    # another build of trailbook-jobs beside it, as client `base`

Each client runs with its defaults: the daemon 8 MiB parts and 4 requests (files) in flight, every byte hashed
(SHA-256, and MD5 for S3), each file fsynced at a file:// destination, its no-change check by the upload
memory's stat cache (no file read when its stat is the remembered one) with one lstat of each copy (file://) or the
prefix's listing (S3); rclone 4 transfers and 8 checkers, its
no-change check by size and modification time (on S3 read from each object's metadata); aws s3 sync 10 threads,
size and time from the listing; rsync -a by size and time. The peers do not fsync and do not hash what they send
to a folder.
"""
import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (ROOT as root, build, cpu_seconds, peak_rss_kib, reset_peak_rss, run_child,  # noqa: E402
                      sha256_file, start_daemon)

venv = os.path.join(root, ".venv-s3", "bin")
BUCKET = "photos"
PEERS = {"s3": ["daemon", "rclone", "aws"], "file": ["daemon", "rclone", "rsync"]}


def size_of(text):
    """'100KiB' / '5MiB' → bytes."""
    for suffix, factor in (("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("B", 1)):
        if text.endswith(suffix):
            return int(text[:-len(suffix)]) * factor
    return int(text)


def sizes_of(text):
    """'100KiB' → (102400, 102400); '3-12MiB' (a range: each file's size drawn uniformly, in whole KiB) → bounds."""
    if "-" in text:
        low, high = text.split("-", 1)
        unit = next((u for u in ("KiB", "MiB", "GiB", "B") if high.endswith(u)), "")
        return size_of(low if low.endswith(unit) and unit else low + unit), size_of(high)
    return size_of(text), size_of(text)


def make_tree(directory, count, sizes, per_folder=100, seed=35):
    """`count` files of random bytes, each of a size in `sizes` (low, high; drawn with `seed`, so every run and
    client gets the same tree), in sub-folders of `per_folder`; returns ({relative path: SHA-256}, total bytes)."""
    digests = {}
    draw = random.Random(seed)
    total = 0
    for number in range(count):
        relative = f"d{number // per_folder:03d}/IMG_{number:05d}.jpg"
        path = os.path.join(directory, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        size = sizes[0] if sizes[0] == sizes[1] else draw.randint(sizes[0] >> 10, sizes[1] >> 10) << 10
        total += size
        with open(path, "wb") as f:
            left = size
            while left:
                block = os.urandom(min(left, 1 << 20))
                f.write(block)
                left -= len(block)
        digests[relative] = sha256_file(path)
    return digests, total


class Moto:
    """The S3 API server, its request log, and the bucket's objects under a prefix."""

    def __init__(self):
        self.process = subprocess.Popen(
            [os.path.join(venv, "python"), os.path.join(root, "Tests/Support/s3-server/server.py"), "--bucket", BUCKET],
            stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
        self.endpoint = f"http://127.0.0.1:{int(self.process.stdout.readline().split()[1])}"
        import boto3  # from .venv-s3, for emptying a prefix between clients
        self.s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                               aws_access_key_id="AKIDBENCH", aws_secret_access_key="bench-secret")

    def log(self):
        with urllib.request.urlopen(self.endpoint + "/__log") as answer:
            return [json.loads(line) for line in answer.read().decode().splitlines() if line]

    def counted(self, since):
        """(requests, request-body bytes) the server logged after the first `since` entries, and the new length."""
        entries = self.log()
        new = entries[since:]
        return len(new), sum(e.get("length", 0) or 0 for e in new), len(entries)

    def sha256(self, key):
        try:
            with urllib.request.urlopen(f"{self.endpoint}/__object?key={urllib.parse.quote(key)}") as answer:
                return json.load(answer)["sha256"]
        except urllib.error.HTTPError:
            return None

    def empty(self, prefix):
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                self.s3.delete_objects(Bucket=BUCKET, Delete={"Objects": keys, "Quiet": True})

    def stop(self):
        self.process.kill()
        self.process.wait()


def phase_of(s, to):
    """"first" or "again": the daemon's runs of set `s` to `to` alternate, first upload then the re-run."""
    runs = s["runs"].get(to, 0)
    s["runs"][to] = runs + 1
    return "first" if runs % 2 == 0 else "again"


def attach_profiler(args, pid, name):
    """Starts `args.profile` on daemon `pid` (reports named after `name` in `args.profile_dir`); None without one."""
    if not args.profile:
        return None
    os.makedirs(args.profile_dir, exist_ok=True)
    base = os.path.join(args.profile_dir, name)
    if args.profile == "perf":
        command = ["perf", "record", "-g", "-F", "499", "-p", str(pid), "-o", base + ".perf.data"]
    else:
        command = ["strace", "-c", "-f", "-p", str(pid), "-o", base + ".strace.txt"]
    profiler = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)  # attached before the run starts (perf and strace print nothing to wait for)
    return profiler


def detach_profiler(profiler):
    """Stops a profiler from `attach_profiler`, letting it write its report."""
    if profiler:
        profiler.send_signal(signal.SIGINT)
        profiler.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sets", default="small,photos")
    parser.add_argument("--to", default="s3,file", help="destinations: s3 (moto), file (a local folder)")
    parser.add_argument("--small", default="2000x100KiB", help="the small-file tree: COUNTxSIZE")
    parser.add_argument("--photos", default="200x5MiB",
                        help="the photo tree: COUNTxSIZE, SIZE one size or a range LOW-HIGH (200x3-12MiB)")
    parser.add_argument("--binary", help="a trailbook-jobs binary to run instead of building the release one")
    parser.add_argument("--clients", default="daemon,rclone,aws,rsync", help="which clients to run")
    parser.add_argument("--baseline", help="a second trailbook-jobs binary (say, before a change) run as one more "
                                           "client, `base`, with its own daemon: before and after side by side")
    parser.add_argument("--profile", choices=("perf", "strace"),
                        help="attach `perf record -g` or `strace -c -f` to the daemon for each of its runs (slows them: "
                             "profile, do not time); the reports go to --profile-dir")
    parser.add_argument("--profile-dir", default="/tmp/tree-peers-profile", help="where --profile writes its reports")
    args = parser.parse_args()
    for tool in ("rclone", "rsync"):
        if tool in args.clients and not shutil.which(tool):
            sys.exit(f"no {tool}: run bench/setup-tree-peers.sh first")
    if "s3" in args.to and not os.path.exists(os.path.join(venv, "aws")):
        sys.exit("no .venv-s3/bin/aws: run bench/setup-tree-peers.sh first")
    binary = os.path.abspath(args.binary) if args.binary else build()
    binaries = {"daemon": binary}
    if args.baseline:
        binaries["base"] = os.path.abspath(args.baseline)
        for peers in PEERS.values():
            peers.insert(1, "base")
    work = tempfile.mkdtemp(prefix="tbj-tree-peers-")
    moto = None
    daemons = {}
    try:
        sets = {}
        for name in args.sets.split(","):
            count, size = getattr(args, name).split("x")
            count, sizes = int(count), sizes_of(size)
            directory = os.path.join(work, "src-" + name)
            digests, total = make_tree(directory, count, sizes)
            sets[name] = {"dir": directory, "sha": digests, "bytes": total, "label": f"{count} × {size}", "key": name,
                          "runs": {}}
        if "s3" in args.to:
            moto = Moto()
        env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIDBENCH", AWS_SECRET_ACCESS_KEY="bench-secret",
                   AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1",
                   AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent",
                   TRAILBOOK_JOBS_HOME=os.path.join(work, "state"), RCLONE_CONFIG="/nonexistent")
        # AWS_CA_BUNDLE: rclone's SDK refuses a custom CA bundle on its own transport; moto is plain HTTP anyway.
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CA_BUNDLE"):
            env.pop(name, None)
        if moto:
            env.update(AWS_ENDPOINT_URL=moto.endpoint, RCLONE_CONFIG_MOTO_TYPE="s3", RCLONE_CONFIG_MOTO_PROVIDER="Other",
                       RCLONE_CONFIG_MOTO_ENDPOINT=moto.endpoint, RCLONE_CONFIG_MOTO_ACCESS_KEY_ID="AKIDBENCH",
                       RCLONE_CONFIG_MOTO_SECRET_ACCESS_KEY="bench-secret", RCLONE_CONFIG_MOTO_REGION="us-east-1")
        envs = {who: dict(env, TRAILBOOK_JOBS_HOME=os.path.join(work, "state" if who == "daemon" else "state-" + who))
                for who in binaries}
        for who, path in binaries.items():
            daemons[who] = start_daemon(path, envs[who])

        def argv(who, to, source, target):
            if who in binaries:
                dest = f"s3://{BUCKET}/{target}/" if to == "s3" else "file://" + target
                return [binaries[who], "submit", "upload", source, "--to", dest, "--wait", "--json"]
            if who == "rclone":
                return ["rclone", "copy", source, f"moto:{BUCKET}/{target}" if to == "s3" else target]
            if who == "aws":
                return [os.path.join(venv, "aws"), "s3", "sync", "--only-show-errors", source, f"s3://{BUCKET}/{target}/"]
            return ["rsync", "-a", source + "/", target + "/"]

        def run(who, to, s, target):
            """One upload: (wall, cpu, rss KiB, requests, bytes at moto, skipped files or None)."""
            since = moto.counted(0)[2] if to == "s3" else 0
            command = argv(who, to, s["dir"], target)
            # What the previous client left unwritten (the peers do not sync) is flushed before this one starts,
            # untimed: otherwise a daemon's `syncfs` waits for it, and the order of the clients weighs on the times.
            os.sync()
            if who in daemons:
                daemon = daemons[who]
                reset_peak_rss(daemon.pid)
                before = cpu_seconds(daemon.pid)
                profiler = attach_profiler(args, daemon.pid, f"{s['key']}-{to}-{phase_of(s, to)}")
                try:
                    wall, cli_cpu, _, out = run_child(command, envs[who])
                finally:
                    detach_profiler(profiler)
                job = json.loads(out)
                assert job["state"] == "succeeded", out
                cpu, rss = cpu_seconds(daemon.pid) - before + cli_cpu, peak_rss_kib(daemon.pid)
                skipped = ((job.get("result") or {}).get("tree") or {}).get("already_there")
            else:
                wall, cpu, rss, _ = run_child(command, env)
                skipped = None
            requests, sent = moto.counted(since)[:2] if to == "s3" else (None, None)
            return wall, cpu, rss, requests, sent, skipped

        def check(to, s, target):
            for relative, sha in s["sha"].items():
                got = moto.sha256(f"{target}/{relative}") if to == "s3" else sha256_file(os.path.join(target, relative))
                assert got == sha, f"{target}/{relative}: stored copy differs"

        def clear(to, target):
            if to == "s3":
                moto.empty(target + "/")
            else:
                shutil.rmtree(target, ignore_errors=True)
                os.makedirs(target)

        load = [os.getloadavg()]
        results = {}  # (set, to, phase, who) -> [runs]
        for round_ in range(args.rounds):
            for name, s in sets.items():
                for to in args.to.split(","):
                    clients = [c for c in PEERS[to] if c in args.clients.split(",") + ["base"]]
                    shift = round_ % len(clients)
                    line = []
                    for who in clients[shift:] + clients[:shift]:
                        target = f"tree-{who}" if to == "s3" else os.path.join(work, f"dest-{who}")
                        clear(to, target)
                        first = run(who, to, s, target)
                        check(to, s, target)
                        again = run(who, to, s, target)
                        results.setdefault((name, to, "first", who), []).append(first)
                        results.setdefault((name, to, "again", who), []).append(again)
                        extra = f", {again[3]} req" if to == "s3" else ""
                        line.append(f"{who} {first[0]:6.2f} s / again {again[0]:5.2f} s{extra}")
                        clear(to, target)
                    print(f"round {round_ + 1} {s['label']} to {to}: " + " | ".join(line), flush=True)
            load.append(os.getloadavg())

        names = {"daemon": "trailbook-jobs", "base": "trailbook-jobs (baseline)", "rclone": "rclone copy (1.60.1)", "aws": "aws s3 sync (awscli 1.46.3)",
                 "rsync": "rsync -a (3.5.0)"}
        print(f"\nload average (1, 5, 15 min) at start {load[0][0]:.2f} {load[0][1]:.2f} {load[0][2]:.2f}, "
              f"after each round: " + "; ".join(f"{l[0]:.2f} {l[1]:.2f} {l[2]:.2f}" for l in load[1:]))
        for name, s in sets.items():
            for to in args.to.split(","):
                for phase in ("first", "again"):
                    clients = [c for c in PEERS[to] if (name, to, phase, c) in results]
                    if not clients:
                        continue
                    title = "first upload" if phase == "first" else "again, nothing changed"
                    print(f"\n{s['label']} to {to}, {title}, median of {args.rounds}:")
                    print("| client | wall s | CPU s | peak RSS MiB | requests at moto | MiB sent to moto |")
                    print("|---|---|---|---|---|---|")
                    med = {}
                    for who in clients:
                        runs = results[(name, to, phase, who)]
                        med[who] = [statistics.median(r[i] for r in runs) if runs[0][i] is not None else None
                                    for i in range(5)]
                        wall, cpu, rss, requests, sent = med[who]
                        print(f"| {names[who]} | {wall:.2f} | {cpu:.2f} | {rss / 1024:.0f} | "
                              f"{'' if requests is None else f'{requests:.0f}'} | "
                              f"{'' if sent is None else f'{sent / (1 << 20):.1f}'} |")
                    if "daemon" in med:
                        d = med["daemon"]
                        for peer in (c for c in clients if c != "daemon"):
                            p = med[peer]
                            print(f"| ratio trailbook-jobs / {peer} | {d[0] / p[0]:.2f} | {d[1] / p[1]:.2f} | "
                                  f"{d[2] / p[2]:.2f} | {'' if d[3] is None else f'{d[3] / max(p[3], 1):.2f}'} | |")
                        skipped = [r[5] for r in results[(name, to, phase, "daemon")]]
                        if phase == "again":
                            print(f"(trailbook-jobs files skipped as already there, per round: {skipped})")
    finally:
        for daemon in daemons.values():
            daemon.terminate()
            daemon.wait()
        if moto:
            moto.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
