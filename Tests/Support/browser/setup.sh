#!/bin/sh
# Creates the Python venv with selenium, which the browser tests of `trailbook-jobs web` use to drive Debian's
# headless chromium through /usr/bin/chromedriver (both from scripts/install-deps.sh; no browser is downloaded).
#
#   Tests/Support/browser/setup.sh          # creates .venv-browser at the package root (ignored by git)
#
# The version is pinned so test results do not drift with PyPI.
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
venv="${BROWSER_VENV:-$root/.venv-browser}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check 'selenium==4.27.1'
"$venv/bin/python" -c 'import selenium; print("browser venv ready:", "'"$venv"'")'
