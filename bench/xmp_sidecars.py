#!/usr/bin/env python3
"""XMP sidecars: add one keyword to N photos that have sidecars, with `submit tag --xmp`, against exiftool doing the
same work in the same run.

Usage: bench/xmp_sidecars.py [--photos 10000] [--folders 10] [--o-photos N] [--bin PATH]

Setup (not timed): N small JPEGs (cjpeg) in F folders, each with a darktable sidecar (`NAME.jpg.xmp`) holding
another app's rating, label, namespace and keyword, imported into a fresh library. Then, timed:
- trailbook-jobs: `submit tag --tag KW --all --xmp --wait` (the tags are committed in the store too).
- exiftool, updating the same sidecars in place, one run per folder:
  `exiftool -XMP-dc:Subject+=KW -overwrite_original -ext xmp FOLDER` (on a copy of the folders).
- exiftool as the issue words it, one run per folder: `exiftool -XMP-dc:Subject+=KW -o %d%f.%e.xmp FOLDER`, which
  writes a new sidecar per JPEG (it refuses to overwrite one, so it runs on a copy of the folders without sidecars),
  over `--o-photos` photos (default all; it is the slowest, so a smaller count keeps the run short) in as many
  folders; its ratio compares photos per second.
Every sidecar is checked after each run (the keyword once, the foreign content kept, for trailbook-jobs).
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from tagging import Daemon  # noqa: E402

FOREIGN = ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
           '<rdf:Description rdf:about="" xmlns:xmp="http://ns.adobe.com/xap/1.0/" '
           'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:darktable="http://darktable.sf.net/" '
           'xmp:Rating="4" xmp:Label="Red" darktable:history_end="3"><dc:subject><rdf:Bag><rdf:li>beach</rdf:li>'
           '</rdf:Bag></dc:subject></rdf:Description></rdf:RDF></x:xmpmeta>\n')


def make_photos(root, photos, folders, sidecars):
    """Small distinct JPEGs (one cjpeg encode, then a different trailer per file) in `folders` folders."""
    os.makedirs(root, exist_ok=True)
    ppm = os.path.join(root, "seed.ppm")
    with open(ppm, "wb") as f:
        f.write(b"P6 16 16 255\n" + bytes((x * 7 + y * 3) % 256 for y in range(16) for x in range(48)))
    jpeg = subprocess.run(["cjpeg", ppm], capture_output=True, check=True).stdout
    os.remove(ppm)
    paths = []
    for n in range(photos):
        folder = os.path.join(root, "f%02d" % (n % folders))
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "IMG_%05d.jpg" % n)
        with open(path, "wb") as f:
            f.write(jpeg + b"variant %d" % n)
        if sidecars:
            with open(path + ".xmp", "w") as f:
                f.write(FOREIGN)
        paths.append(path)
    return paths


def subjects(folder_root, pattern_ext):
    """Every sidecar's XMP:Subject and XMP:Rating as exiftool reads them (one run over the tree)."""
    out = subprocess.run(["exiftool", "-q", "-j", "-r", "-ext", pattern_ext, "-XMP:Subject", "-XMP:Rating",
                          folder_root], capture_output=True, text=True).stdout
    return json.loads(out) if out.strip() else []


def children_cpu():
    """User + system CPU seconds of the waited-for child processes (exiftool runs) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def check(found, count, keyword, foreign):
    bad = 0
    for item in found:
        subject = item.get("Subject")
        subject = subject if isinstance(subject, list) else [subject]
        want = ["beach", keyword] if foreign else [keyword]
        if subject != want or (foreign and item.get("Rating") != 4):
            bad += 1
    if len(found) != count or bad:
        sys.exit(f"check failed: {len(found)} sidecars of {count}, {bad} not as expected")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", type=int, default=10_000)
    parser.add_argument("--folders", type=int, default=10)
    parser.add_argument("--o-photos", type=int, default=None, help="photos for the exiftool -o run (default --photos)")
    parser.add_argument("--bin", default=None, help="trailbook-jobs binary (default: build release)")
    args = parser.parse_args()
    binary = args.bin or benchlib.build()
    keyword = "trip:Lisbon"
    work = tempfile.mkdtemp(prefix="tbj-xmp-bench-")
    daemon = None
    try:
        ours = os.path.join(work, "ours")
        make_photos(ours, args.photos, args.folders, sidecars=True)
        in_place = os.path.join(work, "exiftool-in-place")
        make_photos(in_place, args.photos, args.folders, sidecars=True)
        new_sidecars = os.path.join(work, "exiftool-o")
        o_photos = args.o_photos or args.photos
        make_photos(new_sidecars, o_photos, args.folders, sidecars=False)
        home = os.path.join(work, "home")
        os.mkdir(home)
        daemon = Daemon(binary, home)
        daemon.start()
        daemon.cli("photos", "import", ours, "--wait")
        subprocess.run(["sync"])

        started, cpu = time.time(), benchlib.cpu_seconds(daemon.proc.pid)
        final = json.loads(daemon.cli("submit", "tag", "--tag", keyword, "--all", "--xmp", "--wait", "--json"))
        ours_s, ours_cpu = time.time() - started, benchlib.cpu_seconds(daemon.proc.pid) - cpu
        xmp = final["result"]["xmp"]
        if final["state"] != "succeeded" or xmp["sidecars"] != args.photos or xmp["failed"]:
            sys.exit(f"tag job: {final['state']} {xmp}")
        check(subjects(ours, "xmp"), args.photos, keyword, foreign=True)

        started, cpu = time.time(), children_cpu()
        for folder in sorted(os.listdir(in_place)):
            subprocess.run(["exiftool", "-q", "-XMP-dc:Subject+=" + keyword, "-overwrite_original", "-ext", "xmp",
                            os.path.join(in_place, folder)], check=True)
        subprocess.run(["sync"])
        in_place_s, in_place_cpu = time.time() - started, children_cpu() - cpu
        check(subjects(in_place, "xmp"), args.photos, keyword, foreign=True)

        started, cpu = time.time(), children_cpu()
        for folder in sorted(os.listdir(new_sidecars)):
            subprocess.run(["exiftool", "-q", "-XMP-dc:Subject+=" + keyword, "-o", "%d%f.%e.xmp", "-ext", "jpg",
                            os.path.join(new_sidecars, folder)], check=True)
        subprocess.run(["sync"])
        new_s, new_cpu = time.time() - started, children_cpu() - cpu
        check(subjects(new_sidecars, "xmp"), o_photos, keyword, foreign=False)

        print(f"{args.photos} photos in {args.folders} folders, one keyword added to each sidecar")
        print(f"trailbook-jobs submit tag --xmp (tags + sidecars, durable): {ours_s:7.2f} s  "
              f"{args.photos / ours_s:8.0f} photos/s  CPU {ours_cpu:6.2f} s (the daemon)")
        print(f"exiftool in place (-overwrite_original -ext xmp) + sync:   {in_place_s:7.2f} s  "
              f"{args.photos / in_place_s:8.0f} photos/s  ratio {in_place_s / ours_s:5.1f}x  "
              f"CPU {in_place_cpu:6.2f} s  ratio {in_place_cpu / ours_cpu:5.1f}x")
        print(f"exiftool -o %d%f.%e.xmp (new sidecars) + sync, {o_photos} photos: {new_s:7.2f} s  "
              f"{o_photos / new_s:8.0f} photos/s  ratio {(args.photos / ours_s) / (o_photos / new_s):5.1f}x  "
              f"CPU {new_cpu:6.2f} s  ratio per photo {(new_cpu / o_photos) / (ours_cpu / args.photos):5.1f}x")
    finally:
        if daemon:
            daemon.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
