#!/usr/bin/env bash
# Runs the daemon under valgrind through a short workload (jobs that finish, one reclaimed by SIGTERM, watchers,
# bad requests) and fails unless valgrind reports 0 bytes "definitely lost" and no memory errors.
#
#   scripts/leak-check.sh          # about 30 s; needs valgrind (apt-get install -y valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
swift build >/dev/null
bin="$(swift build --show-bin-path)/trailbook-jobs"
home="$(mktemp -d "${TMPDIR:-/tmp}/tbj-leak.XXXXXX")"
trap 'rm -rf "$home"' EXIT
export TRAILBOOK_JOBS_HOME="$home" TRAILBOOK_JOBS_TEST_KINDS=1

# trailbook-jobsd itself: `trailbook-jobs daemon` would exec it, and valgrind does not follow an exec by default.
valgrind --suppressions=scripts/valgrind.supp --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite --error-exitcode=99 \
  "${bin}d" daemon 2> "$home/valgrind.log" &
daemon=$!
for _ in $(seq 200); do [ -S "$home/daemon.sock" ] && break; sleep 0.1; done

request() { python3 -c 'import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode()+b"\n"); print(s.makefile().readline().strip())' "$home/daemon.sock" "$1"; }

head -c $((4 << 20)) /dev/urandom > "$home/src.bin"; mkdir "$home/out"
"$bin" submit upload "$home/src.bin" --to "$home/out" --wait >/dev/null
for _ in 1 2 3; do request '{"op":"submit","kind":"sleep","params":{"units":20,"unit_ms":10}}' >/dev/null; done
request '{"op":"submit","kind":"sleep","params":{"units":100000,"unit_ms":10}}' >/dev/null
timeout 2 "$bin" watch >/dev/null || true
request 'not json' >/dev/null; request '{"op":"nope"}' >/dev/null
sleep 1
kill -TERM "$daemon"
status=0; wait "$daemon" || status=$?
grep -E "definitely lost|ERROR SUMMARY" "$home/valgrind.log"
if [ "$status" -ne 0 ]; then echo "leak check failed (exit $status); see the log above"; exit 1; fi
echo "leak check passed"
