#!/usr/bin/env bash
# Quick start: the steps of docs/tutorial.md, end to end. Installs what is missing, builds, starts a daemon in a
# temporary state directory, uploads sample files to a file:// directory while showing their progress, cancels an
# upload, kills the daemon with kill -9 in the middle of another and shows it resume, checks the copies, and stops
# the daemon.
#
#   examples/quickstart.sh            # about 30 s on a 2-core machine after the first build
#
# Nothing outside the temporary directory is touched; it is printed at the end so you can look around.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
swift build -c release 2>&1 | { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }
PATH="$(swift build -c release --show-bin-path):$PATH"

demo="$(mktemp -d "${TMPDIR:-/tmp}/trailbook-demo.XXXXXX")"
export TRAILBOOK_JOBS_HOME="$demo/state"
mkdir -p "$demo/photos" "$demo/uploaded"
cd "$demo"

# Sample files: any JPEGs of the folder named by TRAILBOOK_EXTRA_PHOTOS, plus three larger files of random bytes so
# the progress bars have something to show.
extra="${TRAILBOOK_EXTRA_PHOTOS:-}"
if [ -n "$extra" ] && [ -d "$extra" ]; then cp "$extra"/*.jpg photos/ 2>/dev/null || true; fi
for n in 1 2 3; do head -c $((16 * 1024 * 1024)) /dev/urandom > "photos/VID_000$n.mov"; done
head -c $((64 * 1024 * 1024)) /dev/urandom > big.mov

start_daemon() {
  trailbook-jobs daemon 2>> daemon.log &
  daemon=$!
  for _ in $(seq 50); do trailbook-jobs list >/dev/null 2>&1 && return; sleep 0.1; done
  echo "the daemon did not start; see $demo/daemon.log" >&2
  exit 1
}
start_daemon
trap 'kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true' EXIT

echo "== 1. uploading $(ls photos | wc -l) files to file://$demo/uploaded at 24 MiB/s"
trailbook-jobs submit upload photos/* --to uploaded --max-rate 24MiB --watch

echo
echo "== 2. the jobs"
trailbook-jobs list

echo
echo "== 3. cancelling an upload"
id=$(trailbook-jobs submit upload big.mov --to uploaded --max-rate 8MiB)
sleep 1
trailbook-jobs cancel "$id"
if ls uploaded | grep -q '\.part$'; then echo "a partial file is left"; else echo "no partial file left"; fi

echo
echo "== 4. kill -9 in the middle of an upload, then resume"
id=$(trailbook-jobs submit upload big.mov --to uploaded --max-rate 16MiB --chunk-size 4MiB)
sleep 2
kill -9 "$daemon"
wait "$daemon" 2>/dev/null || true
trailbook-jobs show "$id" || echo "(no daemon: the CLI exits 3)"
start_daemon
trailbook-jobs watch "$id"
trailbook-jobs show "$id"

echo
echo "== 5. checking every copy against its source"
cp big.mov photos/
(cd photos && sha256sum -- *) > source.sha256
(cd uploaded && sha256sum -c --quiet ../source.sha256) && echo "all $(wc -l < source.sha256) copies match"

kill -TERM "$daemon"
wait "$daemon" || true
trap - EXIT
echo
echo "state, logs and files are in $demo (remove it when done)"
