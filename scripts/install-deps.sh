#!/usr/bin/env bash
# Installs the Debian packages trailbook-jobs builds, tests and benchmarks with, if any is missing.
# Idempotent and quick when everything is there. Needs root (or sudo) only when something must be installed.
set -euo pipefail

packages=(
  pkg-config
  libuv1-dev            # event loop, pipes, timers, signals, thread pool, process spawn, fs
  libsqlite3-dev        # job store, photo library (WAL)
  libssl-dev            # SHA-256 and other digests (libcrypto)
  libcurl4-openssl-dev  # HTTP for tus uploads (multi interface on the loop)
  libexif-dev           # photo metadata
  libjpeg62-turbo-dev   # photo pixels
  libexempi-dev         # XMP sidecars and embedded XMP keywords
  libheif-dev           # HEIC/HEIF and AVIF photos
  libheif-examples      # heif-enc: HEIC fixtures made at test time
  tmux                  # terminal tests of `watch`
  python3-venv          # the tus test server's virtualenv
  libimage-exiftool-perl # exiftool: the peer of the autotag benchmark; writes the EXIF of test and bench photos
  libjpeg-turbo-progs   # cjpeg: encodes the benchmark's generated photos
  systemd               # systemd-socket-activate: the socket-activation test
  faketime              # libfaketime: clock-step tests of the scheduler (retry waits, due-time clamping)
  libpq-dev             # PostgreSQL client library: the shared job store (issue 15)
  postgresql            # PostgreSQL 15 server: the test harness starts a throwaway one (initdb, pg_ctl)
  jq                    # the docs' examples (docs/how-to), which DocsExamplesEndToEndTests runs
  zsh                   # syntax check of the generated zsh completion
  fish                  # syntax check of the generated fish completion
  man-db                # man -l: the generated man page renders
  libmicrohttpd-dev     # the HTTP server of `trailbook-jobs web`
  chromium              # the browser tests of `web` (headless)
  chromium-driver       # /usr/bin/chromedriver, which selenium drives
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done

if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
