#!/usr/bin/env python3
"""Benchmark: what a command-line call costs, the process's start included (issue 14), for two builds side by side.

Every `trailbook-jobs submit`, `list` or `show` is a new process: the dynamic loader maps its shared libraries
before `main` runs. This times, as a user or a script calling the CLI sees it (fork + exec + the request + exit):

- `--version` (no daemon at all: the start alone),
- `list --limit 20` and `list --state queued --limit 20` against a daemon with `--jobs N` queued jobs,
- `show ID` of one of them,

for each binary of `--binaries A,B` in turn, alternating call by call so that drift on a shared machine hits both
alike, beside `/bin/true` (fork + exec of a program that links only libc). One daemon (B's) serves both clients:
the protocol is the same, so only the client differs.

    bench/cli_start.py [--jobs 1000000] [--rounds 30] [--binaries OLD,NEW]

Without `--binaries` it compares nothing: it times this checkout's release build (built by benchlib) alone. Prints
the medians and p90s in ms and the ratio NEW / OLD of the medians (below 1.0 the new client is faster).
"""
import argparse, os, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import jobs  # noqa: E402


def call_ms(argv, env):
    started = time.monotonic()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.monotonic() - started) * 1000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000, help="jobs queued behind one long job (default 1000)")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--binaries", help="OLD,NEW: two trailbook-jobs binaries (each with its trailbook-jobsd, if "
                                           "it has one, beside it); the daemon is NEW's")
    args = parser.parse_args()
    binaries = args.binaries.split(",") if args.binaries else [benchlib.build()]
    daemon = jobs.Daemon(binaries[-1], "--concurrency", "1")
    try:
        seconds, _ = jobs.fill_queue(daemon, args.jobs)
        some_job = daemon.call({"op": "list", "limit": 1})["jobs"][0]["id"]
        print(f"{args.jobs} jobs queued in {seconds:.1f} s; {args.rounds} rounds, load average "
              f"{os.getloadavg()[0]:.1f}")
        commands = [
            ("--version", ["--version"]),
            ("list --limit 20", ["list", "--limit", "20"]),
            ("list --state queued --limit 20", ["list", "--state", "queued", "--limit", "20"]),
            ("show ID", ["show", some_job]),
        ]
        floor = [call_ms(["/bin/true"], daemon.env) for _ in range(args.rounds)]
        print(f"  /bin/true: median {statistics.median(floor):.1f} ms")
        for label, command in commands:
            times = {binary: [] for binary in binaries}
            for binary in binaries:
                call_ms([binary, *command], daemon.env)  # warm the page cache
            for _ in range(args.rounds):
                for binary in binaries:
                    times[binary].append(call_ms([binary, *command], daemon.env))
            cells = []
            for binary in binaries:
                values = sorted(times[binary])
                p90 = values[int(0.9 * (len(values) - 1))]
                cells.append(f"{binary}: median {statistics.median(values):.1f} ms, p90 {p90:.1f} ms")
            line = f"  {label:32s} " + " | ".join(cells)
            if len(binaries) == 2:
                old, new = (statistics.median(times[b]) for b in binaries)
                line += f" | new/old {new / old:.2f}"
            print(line)
            sys.stdout.flush()
    finally:
        daemon.stop()


if __name__ == "__main__":
    main()
