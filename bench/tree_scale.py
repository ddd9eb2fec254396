#!/usr/bin/env python3
"""Folder upload at scale (issue 35): a tree of N files of S bytes to a file:// directory, S3 (the moto test
server) or tus (the tuspyserver test server); reports the wall time, the daemon's peak RSS (VmHWM), the size of
`show --json` and of one `show --files --json` page, and the largest checkpoint the job saved (read from the store
while it runs). It also samples the daemon's anonymous and file-backed resident memory (RssAnon, RssFile) every
0.2 s and reports the largest sample per phase: `listing` (the walk, the sync comparison and the writing of the
file list, until the list is sealed in the store), `transfer` (until the job ends) and `end` (the job ended), with
the number of file outcomes the store held before the transfer ended (0 means none were written during it).

    bench/tree_scale.py --files 100000 --size 1024            # release build (built incrementally)
    bench/tree_scale.py --files 10000 --size 1024 --binary .build/debug/trailbook-jobs
    bench/tree_scale.py --files 10000 --to s3                 # needs .venv-s3 (Tests/Support/s3-server/setup.sh)
    bench/tree_scale.py --files 10000 --to tus                # needs .venv-tus (Tests/Support/tus-server/setup.sh)"""
import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def start_ready(argv):
    """Starts a test server that prints `READY <port>`; returns (process, port). It exits when its stdin closes."""
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = process.stdout.readline().decode().split()
    if len(line) != 2 or line[0] != "READY":
        process.kill()
        raise SystemExit(f"tree_scale: {argv[1]} did not start")
    return process, int(line[1])


def destination(kind, work, env):
    """Starts the server for `kind` (file, s3, tus) if it needs one; returns (the --to URL, the server or None)."""
    support = os.path.join(benchlib.ROOT, "Tests", "Support")
    if kind == "file":
        dest = os.path.join(work, "dest")
        os.makedirs(dest)
        return "file://" + dest, None
    venv = os.path.join(benchlib.ROOT, ".venv-s3" if kind == "s3" else ".venv-tus", "bin", "python")
    if not os.path.exists(venv):
        raise SystemExit(f"tree_scale: no {os.path.dirname(os.path.dirname(venv))}; run its setup.sh first")
    if kind == "s3":
        server, port = start_ready([venv, os.path.join(support, "s3-server", "server.py"), "--bucket", "scale"])
        env.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1",
                   AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
                   AWS_CONFIG_FILE="/nonexistent", AWS_PROFILE="", AWS_SESSION_TOKEN="")
        return "s3://scale/tree/", server
    files = os.path.join(work, "tus-files")
    os.makedirs(files)
    server, port = start_ready([venv, os.path.join(support, "tus-server", "server.py"), "--files-dir", files])
    return f"http://127.0.0.1:{port}/files/", server


def checkpoint_bytes(home, job):
    """Bytes of the job's checkpoint in the daemon's SQLite store now (0 when none or unreadable)."""
    try:
        with sqlite3.connect(f"file:{os.path.join(home, 'jobs.sqlite3')}?mode=ro", uri=True, timeout=0.5) as db:
            row = db.execute("SELECT length(checkpoint) FROM jobs WHERE id = ?", (job,)).fetchone()
            return row[0] or 0 if row else 0
    except sqlite3.Error:
        return 0


def store_progress(home, job):
    """(whether the job's file list is sealed, entries recorded done) in the daemon's SQLite store now."""
    try:
        with sqlite3.connect(f"file:{os.path.join(home, 'jobs.sqlite3')}?mode=ro", uri=True, timeout=0.5) as db:
            sealed = db.execute("SELECT 1 FROM job_entry_lists WHERE job_id = ?", (job,)).fetchone() is not None
            done = db.execute("SELECT count(*) FROM job_entries WHERE job_id = ? AND state = 'done'",
                              (job,)).fetchone()[0]
            return sealed, done
    except sqlite3.Error:
        return False, 0


def rss_kib(pid):
    """(RssAnon, RssFile) of process `pid` now, KiB."""
    values = {}
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(("RssAnon:", "RssFile:")):
            values[line.split(":")[0]] = int(line.split()[1])
    return values.get("RssAnon", 0), values.get("RssFile", 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--size", type=int, default=1024, help="bytes per file")
    parser.add_argument("--per-folder", type=int, default=1000, help="files per sub-folder")
    parser.add_argument("--binary", help="trailbook-jobs to run (default: the release build)")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--to", choices=("file", "s3", "tus"), default="file", help="destination kind")
    parser.add_argument("--rerun", action="store_true",
                        help="then upload the same tree again (nothing changed) and report that run's peak RSS too")
    args = parser.parse_args()
    binary = os.path.abspath(args.binary) if args.binary else benchlib.build()
    work = tempfile.mkdtemp(prefix="tbj-tree-scale-")
    try:
        tree, home = (os.path.join(work, name) for name in ("tree", "home"))
        os.makedirs(home)
        payload = os.urandom(args.size)
        for number in range(args.files):
            folder = os.path.join(tree, f"d{number // args.per_folder:04d}")
            if number % args.per_folder == 0:
                os.makedirs(folder)
            with open(os.path.join(folder, f"f{number:06d}.bin"), "wb") as out:
                out.write(payload)
        env = dict(os.environ, TRAILBOOK_JOBS_HOME=home)
        to, server = destination(args.to, work, env)
        daemon = benchlib.start_daemon(binary, env)
        try:
            def cli(*arguments):
                return subprocess.run([binary, *arguments], env=env, check=True, capture_output=True).stdout

            started = time.monotonic()
            job = cli("submit", "upload", tree, "--to", to).decode().strip()
            peak = 0
            largest_checkpoint = 0
            phases = {}
            done_during_transfer = 0

            def sample(phase):
                anon, file = rss_kib(daemon.pid)
                top = phases.setdefault(phase, {"anon_mib": 0, "file_mib": 0, "total_mib": 0, "first_s": None})
                if top["first_s"] is None:
                    top["first_s"] = round(time.monotonic() - started, 1)
                top["anon_mib"] = max(top["anon_mib"], round(anon / 1024, 1))
                top["file_mib"] = max(top["file_mib"], round(file / 1024, 1))
                top["total_mib"] = max(top["total_mib"], round((anon + file) / 1024, 1))

            while True:
                peak = max(peak, benchlib.peak_rss_kib(daemon.pid))
                largest_checkpoint = max(largest_checkpoint, checkpoint_bytes(home, job))
                sealed, done = store_progress(home, job)
                state = json.loads(cli("show", job, "--json"))["state"]
                if state in ("succeeded", "failed", "cancelled"):
                    sample("end")
                    break
                sample("transfer" if sealed else "listing")
                if sealed:
                    done_during_transfer = max(done_during_transfer, done)
                if time.monotonic() - started > args.timeout:
                    raise SystemExit(f"timed out; job {job} is {state}")
                time.sleep(0.2)
            wall = time.monotonic() - started
            peak = max(peak, benchlib.peak_rss_kib(daemon.pid))
            show = cli("show", job, "--json")
            page = cli("show", job, "--files", "--json", "--limit", "100")
            result = {
                "to": args.to, "files": args.files, "file_bytes": args.size, "state": state, "wall_s": round(wall, 2),
                "daemon_peak_rss_mib": round(peak / 1024, 1), "show_json_bytes": len(show),
                "show_files_page_bytes": len(page), "largest_checkpoint_bytes_seen": largest_checkpoint,
                "sampled_rss_by_phase": phases, "outcomes_written_before_the_end": done_during_transfer,
                "binary": binary,
            }
            print(json.dumps(result))
            if args.rerun:
                # The same tree again: every file is already there (S3 keeps the prefix's listing meanwhile).
                benchlib.reset_peak_rss(daemon.pid)
                again = time.monotonic()
                rerun = cli("submit", "upload", tree, "--to", to).decode().strip()
                top_anon = top_file = 0
                phases_seen = {}
                while True:
                    anon, file = rss_kib(daemon.pid)
                    top_anon, top_file = max(top_anon, anon), max(top_file, file)
                    job_now = json.loads(cli("show", rerun, "--json"))
                    state = job_now["state"]
                    phase = (job_now.get("progress") or {}).get("phase")
                    if phase:
                        # What `show` said the job was doing while it listed and compared, with the largest count.
                        key = f"{phase['label']} ({phase['unit']})"
                        phases_seen[key] = max(phases_seen.get(key, 0), phase["count"])
                    if state in ("succeeded", "failed", "cancelled"):
                        break
                    if time.monotonic() - again > args.timeout:
                        raise SystemExit(f"timed out; job {rerun} is {state}")
                    time.sleep(0.2)
                shown = json.loads(cli("show", rerun, "--json"))
                tree_result = (shown.get("result") or {}).get("tree", {})
                print(json.dumps({
                    "rerun": True, "state": state, "wall_s": round(time.monotonic() - again, 2),
                    "daemon_peak_rss_mib": round(benchlib.peak_rss_kib(daemon.pid) / 1024, 1),
                    "sampled_anon_mib": round(top_anon / 1024, 1), "sampled_file_mib": round(top_file / 1024, 1),
                    "already_there": tree_result.get("already_there"), "uploaded": tree_result.get("uploaded"),
                    "error": shown.get("error"), "phases_shown": phases_seen,
                }))
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)
            if server:
                server.stdin.close()
                server.wait(timeout=30)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
