#!/usr/bin/env python3
"""Folder upload at scale (issue 35): a tree of N files of S bytes to a file:// directory; reports the wall time,
the daemon's peak RSS (VmHWM), the size of `show --json` and of one `show --files --json` page.

    bench/tree_scale.py --files 100000 --size 1024            # release build (built incrementally)
    bench/tree_scale.py --files 10000 --size 1024 --binary .build/debug/trailbook-jobs

Only file:// for now; tus and the before/after comparison of several files at once are not here yet."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--size", type=int, default=1024, help="bytes per file")
    parser.add_argument("--per-folder", type=int, default=1000, help="files per sub-folder")
    parser.add_argument("--binary", help="trailbook-jobs to run (default: the release build)")
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args()
    binary = os.path.abspath(args.binary) if args.binary else benchlib.build()
    work = tempfile.mkdtemp(prefix="tbj-tree-scale-")
    try:
        tree, dest, home = (os.path.join(work, name) for name in ("tree", "dest", "home"))
        os.makedirs(dest)
        os.makedirs(home)
        payload = os.urandom(args.size)
        for number in range(args.files):
            folder = os.path.join(tree, f"d{number // args.per_folder:04d}")
            if number % args.per_folder == 0:
                os.makedirs(folder)
            with open(os.path.join(folder, f"f{number:06d}.bin"), "wb") as out:
                out.write(payload)
        env = dict(os.environ, TRAILBOOK_JOBS_HOME=home)
        daemon = benchlib.start_daemon(binary, env)
        try:
            def cli(*arguments):
                return subprocess.run([binary, *arguments], env=env, check=True, capture_output=True).stdout

            started = time.monotonic()
            job = cli("submit", "upload", tree, "--to", "file://" + dest).decode().strip()
            peak = 0
            while True:
                peak = max(peak, benchlib.peak_rss_kib(daemon.pid))
                state = json.loads(cli("show", job, "--json"))["state"]
                if state in ("succeeded", "failed", "cancelled"):
                    break
                if time.monotonic() - started > args.timeout:
                    raise SystemExit(f"timed out; job {job} is {state}")
                time.sleep(0.2)
            wall = time.monotonic() - started
            peak = max(peak, benchlib.peak_rss_kib(daemon.pid))
            show = cli("show", job, "--json")
            page = cli("show", job, "--files", "--json", "--limit", "100")
            result = {
                "files": args.files, "file_bytes": args.size, "state": state, "wall_s": round(wall, 2),
                "daemon_peak_rss_mib": round(peak / 1024, 1), "show_json_bytes": len(show),
                "show_files_page_bytes": len(page), "binary": binary,
            }
            print(json.dumps(result))
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
