"""Helpers shared by the benchmark scripts: the release binary, a process's CPU time and peak RSS, running a
peer's command with its resource use, a file's SHA-256."""
import hashlib
import os
import subprocess
import tempfile
import threading
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


def peak_rss_kib(pid):
    """The process's peak resident set (VmHWM), KiB; 0 if /proc has no such line."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def reset_peak_rss(pid):
    """Resets process `pid`'s VmHWM to its current RSS (/proc/PID/clear_refs), so the next peak is this run's."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def sha256_file(path):
    """The file's SHA-256, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def run_child(argv, env):
    """Runs argv to its end; returns (wall s, CPU s of its process tree, peak RSS KiB, stdout). Raises
    RuntimeError with the end of its stderr if it exits non-zero.

    The peak RSS is GNU time's `%M` for argv (Debian's `time`): a process this script starts directly would
    count this script's own resident pages in its ru_maxrss, as the kernel takes the high-water mark of the memory
    it had before exec (a boto3-importing script's 50 MiB showed as rsync's). Without /usr/bin/time it is the
    ru_maxrss, an overestimate."""
    timed = os.path.exists("/usr/bin/time")
    if timed:
        rss_file = tempfile.NamedTemporaryFile(prefix="tbj-bench-rss-", delete=False)
        rss_file.close()
        argv = ["/usr/bin/time", "-f", "%M", "-o", rss_file.name, *argv]
    started = time.monotonic()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Read the pipes on the side so a chatty child cannot block; wait4 gives this child's own usage.
    chunks = {"out": [], "err": []}
    readers = [threading.Thread(target=lambda s=s, k=k: chunks[k].append(s.read()))
               for s, k in ((child.stdout, "out"), (child.stderr, "err"))]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    for r in readers:
        r.join()
    child.returncode = os.waitstatus_to_exitcode(status)
    out, err = b"".join(chunks["out"]), b"".join(chunks["err"])
    rss = usage.ru_maxrss
    if timed:
        with open(rss_file.name) as f:
            lines = f.read().split()
        os.unlink(rss_file.name)
        rss = int(lines[-1]) if lines and lines[-1].isdigit() else rss
        argv = argv[5:]
    if child.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {child.returncode}: {err.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, rss, out.decode()
