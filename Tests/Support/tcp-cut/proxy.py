"""A TCP proxy that can cut the network silently, for the tests: no FIN, no RST, bytes simply stop arriving, as
when a cable is pulled, a host dies or a firewall starts dropping packets. 127.0.0.1 only; the Python standard
library only.

    python3 Tests/Support/tcp-cut/proxy.py --upstream-unix PATH | --upstream-port N

Prints ``READY <port>`` on stdout once listening. Commands, one a line on stdin, each answered ``OK <command>``:

    cut     every open connection stops forwarding in both directions and stays open, silent, for good (the far
            end lost it); connections made meanwhile are accepted and never forwarded
    heal    connections made from now on are forwarded again (the cut ones stay silent)
    stats   ``OK stats <forwarding> <silent>``: how many connections are forwarded and how many are cut

Closing stdin ends the proxy.
"""

import argparse
import selectors
import socket
import sys
import threading

MAX_CONNECTIONS = 256
PIECE = 64 * 1024


class Proxy:
    def __init__(self, upstream):
        self.upstream = upstream
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.lock = threading.Lock()
        self.cut = False
        self.pairs = []  # [client, server or None, forwarding]
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, None)

    def connect_upstream(self):
        if isinstance(self.upstream, str):
            server = socket.socket(socket.AF_UNIX)
            server.connect(self.upstream)
        else:
            server = socket.create_connection(("127.0.0.1", self.upstream))
        return server

    def run(self):
        while True:
            for key, _ in self.selector.select():
                sock = key.fileobj
                if sock is self.listener:
                    self.accept()
                else:
                    self.pump(sock, key.data)

    def accept(self):
        client, _ = self.listener.accept()
        with self.lock:
            if len(self.pairs) >= MAX_CONNECTIONS:
                client.close()
                return
            pair = [client, None, not self.cut]
            self.pairs.append(pair)
        if not pair[2]:
            return  # accepted, never answered: the host is unreachable
        try:
            pair[1] = self.connect_upstream()
        except OSError:
            self.close(pair)
            return
        self.selector.register(client, selectors.EVENT_READ, (pair, 1))
        self.selector.register(pair[1], selectors.EVENT_READ, (pair, 0))

    def pump(self, source, data):
        pair, to = data
        if not pair[2]:
            # Cut: its bytes stay unread, as on a dead link (and the socket stops waking this thread).
            for sock in pair[:2]:
                try:
                    self.selector.unregister(sock)
                except (KeyError, ValueError):
                    pass
            return
        try:
            piece = source.recv(PIECE)
        except OSError:
            piece = b""
        if not piece:
            self.close(pair)
            return
        try:
            pair[to].sendall(piece)
        except OSError:
            self.close(pair)

    def close(self, pair):
        for sock in pair[:2]:
            if sock is None:
                continue
            try:
                self.selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()
        with self.lock:
            if pair in self.pairs:
                self.pairs.remove(pair)

    def command(self, line):
        with self.lock:
            if line == "cut":
                self.cut = True
                for pair in self.pairs:
                    pair[2] = False
            elif line == "heal":
                self.cut = False
            elif line == "stats":
                forwarding = sum(1 for pair in self.pairs if pair[2])
                return f"OK stats {forwarding} {len(self.pairs) - forwarding}"
            else:
                return f"ERR unknown command {line!r}"
        return f"OK {line}"


def main():
    parser = argparse.ArgumentParser()
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--upstream-unix")
    group.add_argument("--upstream-port", type=int)
    args = parser.parse_args()
    proxy = Proxy(args.upstream_unix if args.upstream_unix else args.upstream_port)
    threading.Thread(target=proxy.run, daemon=True).start()
    print(f"READY {proxy.listener.getsockname()[1]}", flush=True)
    for line in sys.stdin:
        line = line.strip()
        if line:
            print(proxy.command(line), flush=True)


if __name__ == "__main__":
    main()
