#!/bin/sh
# Creates the Python venv with the real S3 API server used by the s3:// upload tests (moto's server mode).
#
#   Tests/Support/s3-server/setup.sh          # creates .venv-s3 at the package root (ignored by git)
#
# Versions are pinned so test results do not drift with PyPI.
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
venv="${S3_VENV:-$root/.venv-s3}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check 'moto[server]==5.2.5' 'boto3==1.44.8'  # boto3: the --auth bootstrap in server.py
"$venv/bin/python" -c 'import moto, boto3; print("s3 venv ready:", "'"$venv"'", "moto", moto.__version__)'
