#!/usr/bin/env python3
"""Benchmark: the upload job to a tus server against the `tuspy` client (PyPI `tuspy`), side by side.

Both upload the same file to the same real tus server (tuspyserver under uvicorn, 127.0.0.1, no proxy) in chunks
of the same size. Rounds alternate between the two so drift on a shared machine hits both alike. Reports wall time,
throughput (MiB/s) and CPU seconds of each client — the daemon from /proc/PID/stat, the tuspy client (a child
process) from its resource usage — plus the server's CPU seconds during each, and the ratios.

    Tests/Support/tus-server/setup.sh && .venv-tus/bin/pip install 'tuspy==1.1.0'
    .venv-tus/bin/python bench/tus_upload.py [--size-mib 256] [--rounds 3] [--chunk-size 8MiB]

The daemon also hashes every byte with SHA-256 (its result carries the file's digest) and commits a checkpoint
twice per chunk; tuspy does neither. Each upload's stored copy is checked against the source.
"""
import argparse, hashlib, json, os, resource, shutil, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT as root, build, cpu_seconds  # noqa: E402
venv_python = os.path.join(root, ".venv-tus", "bin", "python")

TUSPY = r"""
import sys
from tusclient import client
url, path, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3])
uploader = client.TusClient(url).uploader(path, chunk_size=chunk)
uploader.upload()
print(uploader.url)
"""


def size_bytes(text):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * factor
    return int(text)


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk-size", default="8MiB")
    args = parser.parse_args()
    if not os.path.exists(venv_python):
        sys.exit("run Tests/Support/tus-server/setup.sh and .venv-tus/bin/pip install 'tuspy==1.1.0' first")
    chunk = size_bytes(args.chunk_size)
    binary = build()
    work = tempfile.mkdtemp(prefix="tbj-tus-bench-")
    try:
        source = os.path.join(work, "source.bin")
        with open(source, "wb") as f:
            for _ in range(args.size_mib):
                f.write(os.urandom(1 << 20))
        expected = sha256_file(source)
        files = os.path.join(work, "files")
        os.mkdir(files)
        server = subprocess.Popen([venv_python, os.path.join(root, "Tests/Support/tus-server/server.py"),
                                   "--files-dir", files], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
        port = int(server.stdout.readline().split()[1])
        endpoint = f"http://127.0.0.1:{port}/files/"
        env = dict(os.environ, TRAILBOOK_JOBS_HOME=os.path.join(work, "state"))
        daemon = subprocess.Popen([binary, "daemon"], env=env, stderr=subprocess.DEVNULL)
        sock = os.path.join(work, "state", "daemon.sock")
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)

        def stored(url):
            path = os.path.join(files, url.rstrip("/").rsplit("/", 1)[1])
            assert sha256_file(path) == expected, "stored copy differs"
            os.remove(path)
            if os.path.exists(path + ".info"):
                os.remove(path + ".info")

        rows = []
        for round_ in range(args.rounds):
            order = ["daemon", "tuspy"] if round_ % 2 == 0 else ["tuspy", "daemon"]
            row = {}
            for who in order:
                server_before = cpu_seconds(server.pid)
                if who == "daemon":
                    before = cpu_seconds(daemon.pid)
                    started = time.monotonic()
                    done = subprocess.run([binary, "submit", "upload", source, "--to", endpoint, "--chunk-size",
                                           str(chunk), "--wait", "--json"], env=env, capture_output=True, text=True)
                    wall = time.monotonic() - started
                    cpu = cpu_seconds(daemon.pid) - before
                    job = json.loads(done.stdout)
                    assert job["state"] == "succeeded", done.stdout + done.stderr
                    assert job["result"]["sha256"] == expected
                    stored(job["result"]["url"])
                else:
                    usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    started = time.monotonic()
                    done = subprocess.run([venv_python, "-c", TUSPY, endpoint, source, str(chunk)],
                                          capture_output=True, text=True, check=True)
                    wall = time.monotonic() - started
                    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = (usage.ru_utime - usage_before.ru_utime) + (usage.ru_stime - usage_before.ru_stime)
                    stored(done.stdout.strip())
                row[who] = (wall, cpu, cpu_seconds(server.pid) - server_before)
            rows.append(row)
            print(f"round {round_ + 1}: " + " | ".join(
                f"{who} {row[who][0]:6.2f} s wall {args.size_mib / row[who][0]:6.1f} MiB/s "
                f"{row[who][1]:5.2f} s cpu (server {row[who][2]:5.2f} s cpu)" for who in order), flush=True)
        daemon.terminate()
        daemon.wait()
        server.kill()
        server.wait()
        med = {who: [statistics.median(r[who][i] for r in rows) for i in range(3)] for who in ("daemon", "tuspy")}
        print(f"\nmedian of {args.rounds}, {args.size_mib} MiB, chunk {args.chunk_size}:")
        print("| client | wall | MiB/s | client CPU s | server CPU s |")
        print("|---|---|---|---|---|")
        for who, label in (("daemon", "trailbook-jobs upload"), ("tuspy", "tuspy 1.1.0")):
            wall, cpu, server_cpu = med[who]
            print(f"| {label} | {wall:.2f} s | {args.size_mib / wall:.0f} | {cpu:.2f} | {server_cpu:.2f} |")
        d, t = med["daemon"], med["tuspy"]
        print(f"| ratio daemon / tuspy | {d[0] / t[0]:.2f} | {t[0] / d[0]:.2f}× | {d[1] / t[1]:.2f} | |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
