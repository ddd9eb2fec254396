#!/bin/sh
# Makes bench/.venv-huey with huey pinned, the peer that bench/jobs.py measures the scheduler against.
set -eu
cd "$(dirname "$0")"
if [ ! -x .venv-huey/bin/python ]; then
    python3 -m venv .venv-huey
fi
.venv-huey/bin/pip install --quiet --disable-pip-version-check huey==3.5.4
.venv-huey/bin/python -c 'import huey; print("huey", huey.__version__)'
