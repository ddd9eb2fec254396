#!/usr/bin/env python3
"""Benchmark: the upload job to a file:// directory against `cp` + `sync`, and `cp` + `sync` + `sha256sum`.

The daemon copies the file, makes the copy durable and computes its SHA-256, checkpointing every chunk (fsync +
SQLite commit). `cp` + `sync` is the disk's speed for the copy alone (issue 14's yardstick: the goal is at least
0.9x its throughput); `cp` + `sync` + `sha256sum` does the same work as the daemon. Runs alternate between the
three so drift on a shared machine hits all alike.

    bench/upload_file.py [--size-mib 256] [--rounds 5] [--chunk-size 8MiB] [--binary PATH]

Each round also uploads an empty file the same way: the job's fixed cost (the CLI's process start, the submit and
end commits, the rename and directory sync), given beside the ratios and subtracted in the last one. Prints each
round and the medians, with the ratios (time daemon / time peer: below 1.0 the daemon is faster;
throughput daemon / throughput peer is its inverse). `--binary` runs another build (e.g. an older one) instead of
building this checkout's release binary.
"""
import argparse, os, shutil, socket, json, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT as root, build, cpu_seconds  # noqa: E402


def settle():
    """Lets the disk finish what came before a timed run: `sync` writes back every dirty page and commits the journal,
    and with it the discards of the files the last run deleted (this ext4 is mounted with `discard`, so a delete's
    blocks are discarded at the next journal commit: the first fsync after a 256 MiB delete waited for them, and
    which contender came after a delete decided who paid)."""
    os.sync()
    time.sleep(0.2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunk-size", help="pass --chunk-size (default: none, the daemon's cadence: 64 MiB or 1 s)")
    parser.add_argument("--binary", help="the trailbook-jobs binary to run (default: build this checkout's)")
    args = parser.parse_args()
    binary = args.binary or build()
    work = tempfile.mkdtemp(prefix="tbj-bench-")
    try:
        source = os.path.join(work, "source.bin")
        with open(source, "wb") as f:
            for _ in range(args.size_mib):
                f.write(os.urandom(1 << 20))
        settle()
        env = dict(os.environ, TRAILBOOK_JOBS_HOME=os.path.join(work, "state"))
        daemon = subprocess.Popen([binary, "daemon"], env=env, stderr=subprocess.DEVNULL)
        sock = os.path.join(work, "state", "daemon.sock")
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        empty = os.path.join(work, "empty.bin")
        open(empty, "wb").close()
        rows = []
        for round_ in range(args.rounds):
            # The fixed cost of one upload job through the CLI (its process start, the submit and end commits, the
            # rename and directory sync), apart from its bytes: an empty file the same way.
            out = os.path.join(work, f"empty{round_}")
            os.mkdir(out)
            settle()
            started = time.monotonic()
            done = subprocess.run([binary, "submit", "upload", empty, "--to", "file://" + out, "--wait", "--json"],
                                  env=env, capture_output=True, text=True)
            fixed_wall = time.monotonic() - started
            assert json.loads(done.stdout)["state"] == "succeeded", done.stdout + done.stderr
            shutil.rmtree(out)

            out = os.path.join(work, f"out{round_}")
            os.mkdir(out)
            settle()
            before = cpu_seconds(daemon.pid)
            started = time.monotonic()
            chunk = ["--chunk-size", args.chunk_size] if args.chunk_size else []
            done = subprocess.run([binary, "submit", "upload", source, "--to", "file://" + out, *chunk, "--wait",
                                   "--json"], env=env, capture_output=True, text=True)
            daemon_wall = time.monotonic() - started
            daemon_cpu = cpu_seconds(daemon.pid) - before
            job = json.loads(done.stdout)
            assert job["state"] == "succeeded", done.stdout + done.stderr
            shutil.rmtree(out)

            copy = os.path.join(work, "copy.bin")
            settle()
            started = time.monotonic()
            subprocess.run(["cp", source, copy], check=True)
            subprocess.run(["sync", copy], check=True)
            copy_wall = time.monotonic() - started
            os.remove(copy)

            settle()
            started = time.monotonic()
            usage_before = os.times()
            subprocess.run(["cp", source, copy], check=True)
            subprocess.run(["sync", copy], check=True)
            digest = subprocess.run(["sha256sum", copy], check=True, capture_output=True, text=True).stdout.split()[0]
            peer_wall = time.monotonic() - started
            usage = os.times()
            peer_cpu = (usage.children_user - usage_before.children_user) + (usage.children_system - usage_before.children_system)
            os.remove(copy)
            assert digest == job["result"]["sha256"], "digests differ"
            rows.append((daemon_wall, daemon_cpu, peer_wall, peer_cpu, copy_wall, fixed_wall))
            print(f"round {round_ + 1}: daemon {daemon_wall:6.2f} s wall {daemon_cpu:5.2f} s cpu "
                  f"(empty file {fixed_wall * 1000:4.0f} ms) | "
                  f"cp+sync {copy_wall:6.2f} s | cp+sync+sha256sum {peer_wall:6.2f} s wall {peer_cpu:5.2f} s cpu")
        daemon.terminate()
        daemon.wait()
        med = [statistics.median(column) for column in zip(*rows)]
        mib = args.size_mib
        print(f"\nmedian of {args.rounds}, {mib} MiB file, chunk {args.chunk_size or 'default'}:")
        print(f"  trailbook-jobs upload   {med[0]:6.2f} s  {mib / med[0]:7.1f} MiB/s  cpu {med[1]:5.2f} s")
        print(f"  cp + sync               {med[4]:6.2f} s  {mib / med[4]:7.1f} MiB/s")
        print(f"  cp + sync + sha256sum   {med[2]:6.2f} s  {mib / med[2]:7.1f} MiB/s  cpu {med[3]:5.2f} s")
        print(f"  empty-file upload        {med[5] * 1000:6.0f} ms (the CLI's start, submit, commits: the job's fixed cost)")
        print(f"  vs cp + sync:           time {med[0] / med[4]:.2f}x, throughput {med[4] / med[0]:.2f}x")
        print(f"  less the fixed cost:    time {(med[0] - med[5]) / med[4]:.2f}x, throughput {med[4] / (med[0] - med[5]):.2f}x")
        print(f"  vs cp + sync + sha256sum: time {med[0] / med[2]:.2f}x, cpu {med[1] / med[3]:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
