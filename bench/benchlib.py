"""Helpers shared by the benchmark scripts: the release binary and a process's CPU time."""
import os
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build():
    """Builds the release binaries (incrementally) and returns the command line's path (`trailbook-jobsd`, which
    `trailbook-jobs daemon` execs, is beside it)."""
    subprocess.run(["swift", "build", "-c", "release"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    return os.path.join(out, "trailbook-jobs")


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid` (all its threads), from /proc/PID/stat fields 14 and 15."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_daemon(binary, env):
    """Starts `binary daemon` with `env` (its TRAILBOOK_JOBS_HOME set) and waits up to 10 s for its socket."""
    daemon = subprocess.Popen([binary, "daemon"], env=env, stderr=subprocess.DEVNULL)
    sock = os.path.join(env["TRAILBOOK_JOBS_HOME"], "daemon.sock")
    for _ in range(200):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    return daemon
