#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, and runs every test (unit and end to end).
# End-to-end tests start the real daemon binary in temporary directories and a real tus server on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
if [ -x Tests/Support/tus-server/setup.sh ]; then Tests/Support/tus-server/setup.sh; fi
if [ -x Tests/Support/s3-server/setup.sh ]; then Tests/Support/s3-server/setup.sh; fi
if [ -x Tests/Support/browser/setup.sh ]; then Tests/Support/browser/setup.sh; fi

swift build --build-tests
# The example package (examples/thumbnails) builds its own copy of the library (a debug build in its own .build); it
# builds beside the two local crash loops below, which mostly wait on their servers, and its tests run last.
example_log=$(mktemp)
(cd examples/thumbnails && swift build --build-tests) >"$example_log" 2>&1 &
example_build=$!
# kill -9 at random moments during tus, s3:// and file:// uploads (with injected faults), then check nothing was lost,
# corrupted or orphaned; a small count here, long runs by hand (CONTRIBUTING.md, "Crash loop").
python3 scripts/crash-loop.py --kills "${CRASH_LOOP_KILLS:-8}"
# The same with a folder of files uploaded as one job every round (a few kills, a small folder; by hand:
# --tree-files 2000 and many kills), to every destination (tus: at most one empty upload per kill and upload being
# created may stay, made by a POST whose answer the kill cut off: 4 for a folder; the loop prints them).
python3 scripts/crash-loop.py --kills "${CRASH_LOOP_TREE_KILLS:-4}" --tree-files "${CRASH_LOOP_TREE_FILES:-300}" --tree-to tus,s3,file
if ! wait "$example_build"; then
    cat "$example_log"
    echo "the example package (examples/thumbnails) did not build" >&2
    exit 1
fi
rm -f "$example_log"
# Three daemons sharing one PostgreSQL: kill -9 of daemons, server restarts, stops past the lease and cut links; every
# job must end exactly once in the store and once on every watcher. A small count here (under 2 minutes), long runs
# by hand.
python3 scripts/shared-crash-loop.py --kills "${SHARED_CRASH_LOOP_KILLS:-4}"
# Serially: the end-to-end tests measure latencies and CPU, which parallel suites on 2 cores would distort.
swift test --skip-build --no-parallel "$@"
# The example package (examples/thumbnails): a package outside the project's targets built against its library
# products, with its own kind, executable and harness tests, and its own daemon end to end (submit, progress,
# cancel and clean-up; a timeout and a resumed attempt), built above.
(cd examples/thumbnails && swift test --skip-build)
