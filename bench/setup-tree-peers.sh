#!/bin/sh
# Installs the peers bench/tree_peers.py measures folder uploads against: rclone and rsync from Debian, and the
# .venv-s3 venv (moto's S3 server and awscli for `aws s3 sync`, pinned in Tests/Support/s3-server/setup.sh); and
# GNU time, which measures a peer's peak RSS (bench/benchlib.py's run_child).
# Nothing is downloaded when the benchmark runs. Needs root for apt-get.
set -eu
cd "$(dirname "$0")/.."
if ! command -v rclone >/dev/null || ! command -v rsync >/dev/null || [ ! -x /usr/bin/time ]; then
    apt-get install -y --no-install-recommends rclone rsync time
fi
if [ ! -x .venv-s3/bin/aws ]; then
    Tests/Support/s3-server/setup.sh
fi
rclone version | head -1
rsync --version | head -1
.venv-s3/bin/aws --version
