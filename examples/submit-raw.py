#!/usr/bin/env python3
"""Sends one raw control-protocol request (a JSON object) to the daemon and prints the reply.

    examples/submit-raw.py examples/upload-request.json
    echo '{"op": "list"}' | examples/submit-raw.py -

The socket is $TRAILBOOK_JOBS_HOME/daemon.sock (default ~/.local/state/trailbook-jobs/daemon.sock).
"""
import json, os, socket, sys

home = os.environ.get("TRAILBOOK_JOBS_HOME") or os.path.join(
    os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "trailbook-jobs")
source = sys.stdin if len(sys.argv) < 2 or sys.argv[1] == "-" else open(sys.argv[1])
request = json.load(source)
with socket.socket(socket.AF_UNIX) as connection:
    connection.connect(os.path.join(home, "daemon.sock"))
    connection.sendall((json.dumps(request) + "\n").encode())
    print(json.dumps(json.loads(connection.makefile().readline()), indent=2))
