#!/usr/bin/env python3
"""Tagging benchmarks: bulk tag by ID at scale (with kill -9 and restart), ID-only vs full-record tagging, and
autotag vs exiftool on the same files, with the daemon's peak RSS.

Usage: bench/tagging.py [million|records|duplicates|autotag|all] [--photos N] [--copies N] [--order library|random]
                        [--bin PATH]

Builds nothing: run `swift build -c release` first (the default binary is .build/release/trailbook-jobs).
Every run uses a fresh temporary TRAILBOOK_JOBS_HOME and removes it afterwards. Synthetic libraries are made
with direct SQL inserts (a recursive CTE) into the photo store the daemon created; they have no files behind them,
which `tag` never needs (it works on identifiers only).
"""
import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Optional real camera JPEGs: the folder named by $TRAILBOOK_EXTRA_PHOTOS. Without it the
# benchmarks use photos generated here (cjpeg for the pixels, exiftool for the EXIF; see generate_photos).
EXTRA_PHOTOS = os.environ.get("TRAILBOOK_EXTRA_PHOTOS") or ""

# Generated camera photos: (file, width, height, exiftool arguments). Several makers, GPS in four hemispheres,
# orientations 1, 5 and 6, sizes from 100 px to 2 megapixels, like a phone's and a camera's library.
GENERATED = [
    ("gen_canon.jpg", 100, 68, ["-Make=Canon", "-Model=Canon EOS 40D", "-DateTimeOriginal=2008:05:30 15:56:01"]),
    ("gen_nikon_gps.jpg", 640, 480, ["-Make=NIKON", "-Model=COOLPIX P6000", "-DateTimeOriginal=2008:10:22 16:28:39",
                                     "-GPSLatitude=43.4674483", "-GPSLatitudeRef=N", "-GPSLongitude=11.8851267",
                                     "-GPSLongitudeRef=E"]),
    ("gen_iphone.jpg", 1632, 1224, ["-Make=Apple", "-Model=iPhone 6", "-DateTimeOriginal=2015:04:10 20:12:23",
                                    "-GPSLatitude=40.4469722", "-GPSLatitudeRef=N", "-GPSLongitude=3.7247528",
                                    "-GPSLongitudeRef=W"]),
    ("gen_sydney.jpg", 800, 600, ["-Make=SONY", "-Model=HDR-HC3", "-DateTimeOriginal=2007:06:15 04:42:32",
                                  "-GPSLatitude=33.8688", "-GPSLatitudeRef=S", "-GPSLongitude=151.2093",
                                  "-GPSLongitudeRef=E"]),
    ("gen_orient6.jpg", 450, 600, ["-Orientation#=6"]),
    ("gen_orient5.jpg", 600, 450, ["-Orientation#=5"]),
    ("gen_big.jpg", 1920, 1080, ["-Make=FUJIFILM", "-Model=X-T3", "-DateTimeOriginal=2021:08:01 10:00:00"]),
]


def generate_photos(target):
    """Writes the GENERATED photos into `target`: a smooth pattern as a PPM, encoded by cjpeg (libjpeg-turbo),
    EXIF added by exiftool. Needs cjpeg and exiftool (scripts/install-deps.sh)."""
    import math
    for n, (name, w, h, tags) in enumerate(GENERATED):
        rows = bytearray()
        for y in range(h):
            for x in range(w):
                s = 128 + 100 * math.sin(x * 160 / w / 17 + n) * math.cos(y * 90 / h / 11)
                rows += bytes((int(s), 255 - int(s), 90))
        ppm = os.path.join(target, name + ".ppm")
        with open(ppm, "wb") as f:
            f.write(b"P6 %d %d 255\n" % (w, h) + bytes(rows))
        path = os.path.join(target, name)
        subprocess.run(["cjpeg", "-quality", "90", "-outfile", path, ppm], check=True)
        os.unlink(ppm)
        subprocess.run(["exiftool", "-q", "-overwrite_original"] + tags + [path], check=True)
    return target


def photo_source(home):
    """The folder of source photos: the extra real ones when present, else photos generated into `home`."""
    if os.path.isdir(EXTRA_PHOTOS) and any(n.lower().endswith(".jpg") for n in os.listdir(EXTRA_PHOTOS)):
        return EXTRA_PHOTOS
    target = os.path.join(home, "generated")
    os.makedirs(target, exist_ok=True)
    return generate_photos(target)


def sample_photo(source):
    """One camera JPEG with EXIF from `source` (the first in name order)."""
    return os.path.join(source, sorted(n for n in os.listdir(source) if n.lower().endswith(".jpg"))[0])


class Daemon:
    def __init__(self, binary, home):
        self.binary, self.home, self.proc = binary, home, None
        self.env = dict(os.environ, TRAILBOOK_JOBS_HOME=home, NO_COLOR="1")

    def start(self):
        log = open(os.path.join(self.home, "daemon.log"), "a")
        self.proc = subprocess.Popen([self.binary, "daemon"], env=self.env, stdout=log, stderr=log)
        for _ in range(500):
            if subprocess.run([self.binary, "list"], env=self.env, capture_output=True).returncode == 0:
                return
            time.sleep(0.02)
        sys.exit("daemon did not start; see " + self.home + "/daemon.log")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait()

    def cli(self, *args):
        out = subprocess.run([self.binary, *args], env=self.env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{' '.join(args)} failed ({out.returncode}): {out.stderr}{self.post_mortem()}")
        return out.stdout

    def post_mortem(self):
        """Whether the daemon still runs and the end of its log (a crash's backtrace is there): the benchmarks
        remove their temporary home, log included, when they end."""
        if not self.proc:
            return ""
        state = "running" if self.proc.poll() is None else f"exited with {self.proc.returncode}"
        try:
            with open(os.path.join(self.home, "daemon.log"), errors="replace") as f:
                tail = f.read()[-4000:]
        except OSError as error:
            tail = str(error)
        return f"\ndaemon {state}; its log ends:\n{tail}"

    def submit(self, *args):
        return self.cli("submit", *args).strip().splitlines()[-1]

    def show(self, job):
        return json.loads(self.cli("show", job, "--json"))

    def wait(self, job, state="succeeded", timeout=3600):
        deadline = time.time() + timeout
        while time.time() < deadline:
            j = self.show(job)
            if j["state"] == state:
                return j
            if j["state"] in ("failed", "cancelled"):
                sys.exit(f"job {job} ended {j['state']}: {j['error']}")
            time.sleep(0.05)
        sys.exit(f"timed out waiting for {job}")

    def peak_rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])


def new_home():
    return tempfile.mkdtemp(prefix="tbj-bench-")


def create_store(daemon):
    """Lets the daemon create the photo store (an import of an empty directory)."""
    empty = os.path.join(daemon.home, "empty")
    os.mkdir(empty)
    daemon.cli("photos", "import", empty, "--wait")


def synthetic_library(daemon, count, order="library"):
    started = time.time()
    db = sqlite3.connect(os.path.join(daemon.home, "photos.sqlite3"))
    db.execute(
        # Random version-5-shaped UUIDs, as content hashes give: local-ID order (the ID file's order, as
        # `photos list` gives) is unrelated to stable-ID order, so lookups do not walk the index in order for free.
        """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?),
                r(i, h) AS (SELECT i, lower(hex(randomblob(16))) FROM n)
           INSERT INTO photos (stable_id, path, bytes, mtime_ns, inode, width, height, taken_at, camera_make,
                               camera_model, gps_lat, gps_lon)
           SELECT substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-5' || substr(h, 14, 3) || '-8' || substr(h, 18, 3)
                  || '-' || substr(h, 21, 12), '/synthetic/' || i || '.jpg', 2000000, 0, i,
                  4032, 3024, '2024-05-03T18:22:10', 'Canon', 'Canon EOS 40D', 38.69, -9.21 FROM r""",
        (count,))
    db.commit()
    ids_file = os.path.join(daemon.home, "ids.txt")
    with open(ids_file, "w") as f:
        # "library": local-ID order, as `photos list` writes it; "random": a shuffled selection, as a list of IDs
        # gathered elsewhere (another device, a search) would come.
        for (sid,) in db.execute("SELECT stable_id FROM photos ORDER BY " + ("id" if order == "library" else "random()")):
            f.write(sid + "\n")
    db.close()
    return ids_file, time.time() - started


def tag_count(daemon, tag):
    """Photos that have `tag`, through the store's `tags` view (one row per photo and tag). A photo cannot hold a
    tag twice (it is one bit of a bitmap), so a batch applied twice after a crash would show in the job's result
    instead: already_had > 0 and tagged < the count."""
    db = sqlite3.connect(os.path.join(daemon.home, "photos.sqlite3"))
    n = db.execute("SELECT count(*) FROM tags WHERE tag = ?", (tag,)).fetchone()[0]
    db.close()
    return n


def run_seconds(daemon, *args):
    started = time.time()
    job = daemon.submit(*args)
    final = daemon.wait(job)
    return time.time() - started, final


def wait_seconds(daemon, *args):
    """Wall time of `submit ... --wait --json`, as a user runs it: the CLI's start, the submit, and the job's end
    as the feed reports it (no polling)."""
    started = time.time()
    final = json.loads(daemon.cli("submit", *args, "--wait", "--json"))
    if final["state"] != "succeeded":
        sys.exit(f"job {final['id']} ended {final['state']}: {final['error']}")
    return time.time() - started, final


def million(binary, count):
    home = new_home()
    d = Daemon(binary, home)
    try:
        d.start()
        create_store(d)
        ids_file, setup = synthetic_library(d, count)
        print(f"setup: {count} synthetic photos + ID file in {setup:.1f} s")
        # 1. A clean run, for the rate.
        seconds, final = run_seconds(d, "tag", "--tag", "clean", "--ids-file", ids_file)
        r = final["result"]
        print(f"clean run: {count} IDs in {seconds:.2f} s = {count / seconds:,.0f} photos/s; "
              f"tagged {r['tagged']}, already_had {r['already_had']}, unknown {r['unknown_count']}")
        # 2. kill -9 in the middle, restart, finish.
        started = time.time()
        job = d.submit("tag", "--tag", "trip", "--ids-file", ids_file)
        while d.show(job)["progress"]["completed"] < count * 0.4:
            time.sleep(0.01)
        d.kill9()
        at_kill = tag_count(d, "trip")
        print(f"kill -9 at {at_kill} tagged photos ({time.time() - started:.2f} s after submit)")
        restarted = time.time()
        d.start()
        final = d.wait(job)
        total = time.time() - started
        r = final["result"]
        n = tag_count(d, "trip")
        exact = r["tagged"] == count and r["already_had"] == 0 and n == count
        print(f"after restart: finished in {time.time() - restarted:.2f} s (total {total:.2f} s incl. restart); "
              f"result tagged {r['tagged']}, already_had {r['already_had']}, unknown {r['unknown_count']}; "
              f"photos with the tag {n}; attempt {final['attempt']}")
        print("EXACT" if exact else "NOT EXACT")
        return exact
    finally:
        d.stop()
        shutil.rmtree(home, ignore_errors=True)


class FeedClock:
    """Watches the daemon's feed and notes when each state event arrives (local monotonic clock), so a job's run
    time can be taken from its `running` event to its end, without the CLI's start-up or polling in it."""

    def __init__(self, daemon):
        import socket
        import threading
        self.events = []
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(os.path.join(daemon.home, "daemon.sock"))
        self.sock.sendall(b'{"op":"watch"}\n')
        self.file = self.sock.makefile()
        self.file.readline()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.file:
            event = json.loads(line)
            if event.get("type") == "state":
                with self.lock:
                    self.events.append((time.monotonic(), event))

    def run_seconds(self, job, timeout=600):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                mine = [(t, e) for t, e in self.events if e["job"] == job]
            started = [t for t, e in mine if e["to"] == "running"]
            ended = [(t, e) for t, e in mine if e["to"] in ("succeeded", "failed", "cancelled")]
            if started and ended:
                if ended[-1][1]["to"] != "succeeded":
                    sys.exit(f"job {job} ended {ended[-1][1]['to']}")
                return ended[-1][0] - started[0]
            time.sleep(0.01)
        sys.exit(f"timed out waiting for {job}")


def records(binary, count, rounds=5, order="library"):
    home = new_home()
    d = Daemon(binary, home)
    try:
        d.start()
        create_store(d)
        ids_file, _ = synthetic_library(d, count, order)
        print(f"ID file in {order} order")
        rows = []
        feed = FeedClock(d)
        print("times: `submit ... --wait` as a user runs it (CLI start to the job's end), and the job's own run time"
              " (its running -> succeeded state events on the feed)")
        for i in range(rounds):
            ids_s, ids_job = wait_seconds(d, "tag", "--tag", f"ids{i}", "--ids-file", ids_file)
            rec_s, rec_job = wait_seconds(d, "tag", "--tag", f"rec{i}", "--ids-file", ids_file, "--load-records")
            ids_run = feed.run_seconds(ids_job["id"])
            rec_run = feed.run_seconds(rec_job["id"])
            rows.append((ids_s, rec_s, ids_run, rec_run))
            print(f"round {i + 1}: ID-only {count / ids_s:,.0f} photos/s ({ids_s:.2f} s; run {ids_run:.3f} s); "
                  f"full records {count / rec_s:,.0f} photos/s ({rec_s:.2f} s; run {rec_run:.3f} s); "
                  f"ratio {rec_s / ids_s:.1f}x (runs {rec_run / ids_run:.1f}x)")
        med = [sorted(column)[len(rows) // 2] for column in zip(*rows)]
        print(f"median, submit --wait: ID-only {count / med[0]:,.0f} photos/s, full records "
              f"{count / med[1]:,.0f} photos/s, ratio {med[1] / med[0]:.1f}x")
        print(f"median, job run: ID-only {count / med[2]:,.0f} photos/s, full records {count / med[3]:,.0f} photos/s,"
              f" ratio {med[3] / med[2]:.1f}x")
    finally:
        d.stop()
        shutil.rmtree(home, ignore_errors=True)


def duplicates(binary, count, new=100, rounds=3):
    """autotag of `new` photos at the end of a library of `count` photos that already have perceptual hashes: each
    new photo's `duplicate-of:` search passes over every earlier hash. The library rows are synthetic (random
    hashes, like unrelated photos) and point at hard links to one real JPEG; the new photos are real files."""
    home = new_home()
    d = Daemon(binary, home)
    try:
        d.start()
        create_store(d)
        files = os.path.join(home, "files")
        os.mkdir(files)
        source = sample_photo(photo_source(home))
        for i in range(new):
            os.link(source, os.path.join(files, f"new-{i}.jpg"))
        db = sqlite3.connect(os.path.join(home, "photos.sqlite3"))
        db.execute(
            """WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
               INSERT INTO photos (stable_id, path, bytes, mtime_ns, inode, phash)
               SELECT printf('%08x-0000-5000-8000-%012x', i, i), '/synthetic/' || i || '.jpg', 1, 0, i,
                      random() FROM n""", (count,))
        db.execute(
            """INSERT INTO photos (stable_id, path, bytes, mtime_ns, inode)
               SELECT printf('ffffffff-0000-5000-8000-%012x', value), ? || '/new-' || value || '.jpg', 1, 0, value
               FROM json_each(?)""", (files, json.dumps(list(range(new)))))
        db.commit()
        ids_file = os.path.join(home, "new.txt")
        with open(ids_file, "w") as f:
            for (sid,) in db.execute("SELECT stable_id FROM photos WHERE path LIKE ? ORDER BY id", (files + "/%",)):
                f.write(sid + "\n")
        db.close()
        print(f"library: {count} photos with hashes; autotag of {new} more (real JPEG), {rounds} rounds")
        times = []
        for r in range(rounds):
            seconds, final = wait_seconds(d, "autotag", "--ids-file", ids_file)
            res = final["result"]
            times.append(seconds)
            print(f"round {r + 1}: {seconds:.2f} s ({new / seconds:,.0f} photos/s); tagged {res['tagged']}, "
                  f"duplicates {res.get('duplicates')}")
        med = sorted(times)[len(times) // 2]
        print(f"median: {med:.2f} s = {new / med:,.1f} photos/s")
        return med
    finally:
        d.stop()
        shutil.rmtree(home, ignore_errors=True)


def make_folder(target, copies, source):
    """`copies` variants of each photo of `source` (a distinct trailer after the JPEG data, so each has its own
    stable ID; EXIF and pixels unchanged), plus the bad photos."""
    names = sorted(n for n in os.listdir(source) if n.lower().endswith((".jpg", ".jpeg")))
    good = []
    for name in names:
        data = open(os.path.join(source, name), "rb").read()
        for c in range(copies):
            path = os.path.join(target, f"{c:04d}-{name}")
            with open(path, "wb") as f:
                f.write(data + b"trailbook-bench-%d" % c)
            good.append(path)
    bad = os.path.join(target, "bad")
    os.mkdir(bad)
    sample = open(sample_photo(source), "rb").read()
    open(os.path.join(bad, "zero-byte.jpg"), "wb").close()
    open(os.path.join(bad, "not-a-jpeg.jpg"), "wb").write(b"GIF89a not a jpeg at all\n" * 10)
    open(os.path.join(bad, "truncated.jpg"), "wb").write(sample[: len(sample) // 3])
    bomb = bytearray(sample)
    # The main image's frame header is the last SOF marker (the EXIF thumbnail has one earlier).
    i = max(bomb.rfind(b"\xff\xc0"), bomb.rfind(b"\xff\xc2"))
    bomb[i + 5:i + 9] = (60000).to_bytes(2, "big") * 2  # 60000 x 60000 = 3.6 gigapixels
    open(os.path.join(bad, "huge-header.jpg"), "wb").write(bytes(bomb))
    return good


def autotag(binary, copies):
    home = new_home()
    folder = os.path.join(home, "photos")
    os.mkdir(folder)
    source = photo_source(home)
    print(f"source photos: {source}")
    good = make_folder(folder, copies, source)
    files = len(good) + 4
    d = Daemon(binary, home)
    try:
        d.start()
        started = time.time()
        job = d.cli("photos", "import", folder).strip().splitlines()[-1]
        imp = d.wait(job)
        imp_s = time.time() - started
        tag_s, final = run_seconds(d, "autotag", "--all")
        r = final["result"]
        peak = d.peak_rss_kib()
        # exiftool reading the same EXIF fields of the same files (one process, like the daemon).
        fields = ["-Make", "-Model", "-DateTimeOriginal", "-OffsetTimeOriginal", "-Orientation",
                  "-GPSLatitude", "-GPSLongitude", "-ImageWidth", "-ImageHeight"]
        started = time.time()
        out = subprocess.run(["exiftool", "-fast", "-j", "-n", "-r", *fields, folder], capture_output=True, text=True)
        exif_s = time.time() - started
        exif_n = len(json.loads(out.stdout or "[]"))
        print(f"files: {files} ({len(good)} real-photo variants + 4 bad)")
        print(f"import (EXIF + SHA-256 in 2 workers, upsert): {files / imp_s:,.0f} files/s ({imp_s:.2f} s); "
              f"failed {imp['result']['failed']}")
        print(f"autotag (EXIF + pixels at reduced scale + pHash + places + tags): {r['photos'] / tag_s:,.0f} photos/s "
              f"({tag_s:.2f} s); unreadable {r['unreadable_count']}")
        codes = {}
        for u in r["unreadable"]:
            codes[u["code"]] = codes.get(u["code"], 0) + 1
        print("  unreadable by code (first 1000 listed): " + ", ".join(f"{c}={n}" for c, n in sorted(codes.items())))
        print("  bad photos: import failures " + ", ".join(
            f"{os.path.basename(f['path'])}={f['code']}" for f in imp["result"]["failures"]) + "; autotag unreadable "
            + ", ".join(f"{os.path.basename(u['path'])}={u['code']}" for u in r["unreadable"] if "/bad/" in u["path"]))
        print(f"exiftool -fast (same EXIF fields, same files): {exif_n / exif_s:,.0f} files/s ({exif_s:.2f} s, "
              f"{exif_n} files, exit {out.returncode})")
        print(f"daemon peak RSS (VmHWM) after import + autotag: {peak / 1024:.1f} MiB")
    finally:
        d.stop()
        shutil.rmtree(home, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", nargs="?", default="all",
                        choices=["million", "records", "autotag", "duplicates", "all"])
    parser.add_argument("--photos", type=int, help="photos for million (default 1000000) / records (100000)")
    parser.add_argument("--copies", type=int, default=100, help="variants of each real photo for autotag")
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/release/trailbook-jobs"))
    parser.add_argument("--order", choices=["library", "random"], default="library",
                        help="order of the ID file for records (library: as `photos list` gives it)")
    args = parser.parse_args()
    print(f"binary {args.bin}; {os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    ok = True
    if args.which in ("million", "all"):
        print("\n== (a) tag 1 000 000 IDs, kill -9 mid-run, restart ==")
        ok = million(args.bin, args.photos or 1_000_000) and ok
    if args.which in ("records", "all"):
        print("\n== (b) ID-only tag vs full-record tag ==")
        records(args.bin, args.photos or 100_000, order=args.order)
    if args.which in ("duplicates", "all"):
        print("\n== (d) autotag at the end of a large hashed library (duplicate-of: search) ==")
        duplicates(args.bin, args.photos or 200_000)
    if args.which in ("autotag", "all"):
        print("\n== (c) autotag vs exiftool, peak RSS with bad photos ==")
        autotag(args.bin, args.copies)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
