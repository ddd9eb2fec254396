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
# boto3: the --auth bootstrap in server.py and bench/s3_upload.py; awscli (1.46.3 goes with botocore 1.44.8):
# the `aws s3 cp` of bench/s3_upload.py.
"$venv/bin/pip" install --quiet --disable-pip-version-check 'moto[server]==5.2.5' 'boto3==1.44.8' 'awscli==1.46.3'
"$venv/bin/python" -c 'import moto, boto3, awscli; print("s3 venv ready:", "'"$venv"'", "moto", moto.__version__)'
