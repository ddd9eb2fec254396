#!/bin/sh
# Creates the Python venv with the real tus server used by Tests/HTTPTests (tuspyserver on FastAPI/uvicorn).
#
#   Tests/Support/tus-server/setup.sh          # creates .venv-tus at the package root (ignored by git)
#
# Versions are pinned so test results do not drift with PyPI.
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
venv="${TUS_VENV:-$root/.venv-tus}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check \
    'tuspyserver==4.4.3' 'fastapi' 'uvicorn' 'tuspy==1.1.0'  # tuspy: the peer client of bench/tus_upload.py
"$venv/bin/python" -c 'import tuspyserver, fastapi, uvicorn; print("tus venv ready:", "'"$venv"'")'
