#!/usr/bin/env bash
# Quick start: installs what is missing, builds, starts a daemon in a temporary state directory, uploads a few
# sample files to a file:// directory while `watch` shows their progress, checks the copies, and stops the daemon.
#
#   examples/quickstart.sh            # about 30 s on a 2-core machine after the first build
#
# Nothing outside the temporary directory is touched; it is printed at the end so you can look around.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
swift build -c release 2>&1 | grep -vE '^\[[0-9]+/[0-9]+\]' || true
bin="$(swift build -c release --show-bin-path)/trailbook-jobs"

demo="$(mktemp -d "${TMPDIR:-/tmp}/trailbook-demo.XXXXXX")"
export TRAILBOOK_JOBS_HOME="$demo/state"
mkdir -p "$demo/photos" "$demo/uploaded"

# Sample files: any JPEGs of the folder named by TRAILBOOK_EXTRA_PHOTOS, plus three larger files of random bytes so
# the progress bars have something to show.
extra="${TRAILBOOK_EXTRA_PHOTOS:-}"
if [ -n "$extra" ] && [ -d "$extra" ]; then cp "$extra"/*.jpg "$demo/photos/" 2>/dev/null || true; fi
for n in 1 2 3; do head -c $((16 * 1024 * 1024)) /dev/urandom > "$demo/photos/VID_000$n.mov"; done

"$bin" daemon 2> "$demo/daemon.log" &
daemon=$!
trap 'kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true' EXIT
for _ in $(seq 50); do "$bin" list >/dev/null 2>&1 && break; sleep 0.1; done

echo "== uploading $(ls "$demo/photos" | wc -l) files to file://$demo/uploaded at 24 MiB/s"
"$bin" submit upload "$demo"/photos/* --to "file://$demo/uploaded" --max-rate 24MiB --chunk-size 4MiB --watch

echo
echo "== the job"
"$bin" list
echo
echo "== checking every copy against its source"
(cd "$demo/photos" && sha256sum -- *) > "$demo/source.sha256"
(cd "$demo/uploaded" && sha256sum -c --quiet "$demo/source.sha256") && echo "all $(wc -l < "$demo/source.sha256") copies match"

kill -TERM "$daemon"
wait "$daemon" || true
trap - EXIT
echo
echo "state, logs and files are in $demo (remove it when done)"
