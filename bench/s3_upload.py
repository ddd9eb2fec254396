#!/usr/bin/env python3
"""Benchmark: the upload job to S3 against `aws s3 cp` (awscli) and boto3's `upload_file`, side by side.

All three upload the same files to the same S3 API server (moto, Tests/Support/s3-server/server.py, 127.0.0.1) in
the same run, in rounds whose order rotates so drift on a shared machine hits each alike. Per upload: wall time,
CPU seconds (user + system) of the client's process tree — the daemon (from /proc/PID/stat) plus the `submit
--wait` CLI, or the aws / python process and its children (wait4) — and the client's peak RSS (the daemon's
VmHWM, reset before each upload through /proc/PID/clear_refs; ru_maxrss of the others); plus the server's CPU.
Every stored object's SHA-256 is checked against its source after each upload.

    Tests/Support/s3-server/setup.sh   # .venv-s3 with moto, boto3 and awscli, pinned
    .venv-s3/bin/python bench/s3_upload.py [--rounds 3] [--sets big,small] [--clients daemon,aws,boto3]
        [--daemon-args '--parts-in-flight 8'] [--binary PATH]

Sets: `big` is one 256 MiB file, `small` is 100 files of 1 MiB. Each client runs with its defaults: the daemon 8 MiB
parts, 4 requests in flight (parts of a large file, or small files, 4 at once), each part's MD5 and SHA-256
computed (Content-MD5, signed payload hash) and the file's SHA-256 (for a file in one PUT the same one); awscli
and boto3 8 MiB parts, 10 threads (awscli also over files), unsigned payloads, and botocore's default CRC
checksums. `--clients`, `--daemon-args` and `--binary` are for trying settings or builds (A/B), not for the
published figures.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (ROOT as root, build, cpu_seconds, peak_rss_kib, reset_peak_rss, run_child,  # noqa: E402
                      sha256_file, start_daemon)

venv = os.path.join(root, ".venv-s3", "bin")
BUCKET = "photos"
PREFIX = "bench/"

BOTO3 = r"""
import os, sys, boto3
endpoint, bucket, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
for path in sys.argv[4:]:
    s3.upload_file(path, bucket, prefix + os.path.basename(path))
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sets", default="big,small")
    parser.add_argument("--binary", help="a trailbook-jobs binary to run instead of building the release one (A/B runs)")
    parser.add_argument("--clients", default="daemon,aws,boto3", help="which clients to run (comma-separated)")
    parser.add_argument("--daemon-args", default="", help="extra `submit upload` options, e.g. '--parts-in-flight 8'")
    args = parser.parse_args()
    if not os.path.exists(os.path.join(venv, "aws")):
        sys.exit("run Tests/Support/s3-server/setup.sh first (it installs moto, boto3 and awscli into .venv-s3)")
    binary = args.binary or build()
    work = tempfile.mkdtemp(prefix="tbj-s3-bench-")
    server = daemon = None
    try:
        sets = {}
        for name in args.sets.split(","):
            directory = os.path.join(work, name)
            os.mkdir(directory)
            count, size = {"big": (1, 256 << 20), "small": (100, 1 << 20)}[name]
            paths = []
            for i in range(count):
                path = os.path.join(directory, f"{name}-{i:03d}.bin")
                with open(path, "wb") as f:
                    for _ in range(size >> 20):
                        f.write(os.urandom(1 << 20))
                paths.append(path)
            sets[name] = {"paths": paths, "dir": directory, "bytes": count * size,
                          "sha": {os.path.basename(p): sha256_file(p) for p in paths},
                          "label": f"{count} × {size >> 20} MiB"}

        server = subprocess.Popen([os.path.join(venv, "python"), os.path.join(root, "Tests/Support/s3-server/server.py"),
                                   "--bucket", BUCKET], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
        port = int(server.stdout.readline().split()[1])
        endpoint = f"http://127.0.0.1:{port}"
        env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIDBENCH", AWS_SECRET_ACCESS_KEY="bench-secret",
                   AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT_URL=endpoint,
                   AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent",
                   TRAILBOOK_JOBS_HOME=os.path.join(work, "state"))
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
            env.pop(name, None)
        daemon = start_daemon(binary, env)

        def check(s):
            for key, sha in s["sha"].items():
                with urllib.request.urlopen(f"{endpoint}/__object?key={PREFIX}{key}") as answer:
                    stored = json.load(answer)
                assert stored["sha256"] == sha, f"{key}: stored object differs"

        def upload(who, s):
            if who == "daemon":
                reset_peak_rss(daemon.pid)
                before = cpu_seconds(daemon.pid)
                wall, cli_cpu, _, out = run_child(
                    [binary, "submit", "upload", *s["paths"], "--to", f"s3://{BUCKET}/{PREFIX}", *args.daemon_args.split(),
                     "--wait", "--json"], env)
                job = json.loads(out)
                assert job["state"] == "succeeded", out
                return wall, cpu_seconds(daemon.pid) - before + cli_cpu, peak_rss_kib(daemon.pid)
            if who == "aws":
                target = f"s3://{BUCKET}/{PREFIX}"
                argv = [os.path.join(venv, "aws"), "s3", "cp", "--only-show-errors", "--endpoint-url", endpoint]
                argv += ([s["dir"], target, "--recursive"] if len(s["paths"]) > 1
                         else [s["paths"][0], target + os.path.basename(s["paths"][0])])
                wall, cpu, rss, _ = run_child(argv, env)
                return wall, cpu, rss
            wall, cpu, rss, _ = run_child(
                [os.path.join(venv, "python"), "-c", BOTO3, endpoint, BUCKET, PREFIX, *s["paths"]], env)
            return wall, cpu, rss

        clients = args.clients.split(",")
        load = [os.getloadavg()]
        results = {name: {who: [] for who in clients} for name in sets}
        for round_ in range(args.rounds):
            order = clients[round_ % len(clients):] + clients[:round_ % len(clients)]
            for name, s in sets.items():
                line = []
                for who in order:
                    server_before = cpu_seconds(server.pid)
                    wall, cpu, rss = upload(who, s)
                    server_cpu = cpu_seconds(server.pid) - server_before
                    check(s)
                    results[name][who].append((wall, cpu, rss, server_cpu))
                    line.append(f"{who} {wall:6.2f} s {cpu:5.2f} cpu {rss / 1024:6.0f} MiB (server {server_cpu:5.2f} cpu)")
                print(f"round {round_ + 1} {s['label']}: " + " | ".join(line), flush=True)
            load.append(os.getloadavg())

        labels = {"daemon": "trailbook-jobs upload", "aws": "aws s3 cp (awscli 1.46.3)",
                  "boto3": "boto3 1.44.8 upload_file"}
        print(f"\nload average (1, 5, 15 min) at start {load[0][0]:.2f} {load[0][1]:.2f} {load[0][2]:.2f}, "
              f"at end {load[-1][0]:.2f} {load[-1][1]:.2f} {load[-1][2]:.2f}")
        for name, s in sets.items():
            med = {who: [statistics.median(r[i] for r in results[name][who]) for i in range(4)] for who in clients}
            mib = s["bytes"] / (1 << 20)
            print(f"\n{s['label']}, median of {args.rounds}:")
            print("| client | wall | MiB/s | CPU s (client tree) | peak RSS | server CPU s |")
            print("|---|---|---|---|---|---|")
            for who in clients:
                wall, cpu, rss, server_cpu = med[who]
                print(f"| {labels[who]} | {wall:.2f} s | {mib / wall:.0f} | {cpu:.2f} | {rss / 1024:.0f} MiB | {server_cpu:.2f} |")
            if "daemon" not in med:
                continue
            d = med["daemon"]
            for peer in (p for p in ("aws", "boto3") if p in med):
                p = med[peer]
                print(f"| ratio daemon / {peer} | {d[0] / p[0]:.2f} | | {d[1] / p[1]:.2f} | {d[2] / p[2]:.2f} | |")
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait()
        if server:
            server.kill()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
