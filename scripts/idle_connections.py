#!/usr/bin/env python3
"""Measures what idle client connections cost `shale serve`: starts the server on a free
port with a fresh data directory, opens N connections that each answer one `ping` and then
stay idle, and prints the process's resident memory (VmRSS) and threads from
/proc/<pid>/status before, with the connections open, and after they close, with the cost
per connection. Standard library only (the ping is encoded by hand).

    python3 scripts/idle_connections.py [--bin target/release/shale] [--connections 1000]

The client needs N descriptors too: raise `ulimit -n` past N if it is lower."""

import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time


def ping_message(request_id: int) -> bytes:
    """An OP_MSG `{ping: 1, $db: "admin"}`."""
    elements = b"\x10ping\x00" + struct.pack("<i", 1)
    elements += b"\x02$db\x00" + struct.pack("<i", 6) + b"admin\x00"
    body = struct.pack("<i", 4 + len(elements) + 1) + elements + b"\x00"
    payload = struct.pack("<I", 0) + b"\x00" + body
    return struct.pack("<iiii", 16 + len(payload), request_id, 0, 2013) + payload


def read_reply(sock: socket.socket) -> None:
    head = recv_exact(sock, 16)
    (length,) = struct.unpack("<i", head[:4])
    recv_exact(sock, length - 16)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("the server closed the connection")
        data += chunk
    return data


def status(pid: int) -> tuple[float, int]:
    """(VmRSS in MiB, threads) of `pid`."""
    rss, threads = 0.0, 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, threads


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(port: int, seconds: float = 30) -> socket.socket:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def settle(pid: int, threads_at_most: int | None = None, seconds: float = 10) -> tuple[float, int]:
    """Waits a moment (and, if asked, until the thread count falls to a bound) and samples."""
    deadline = time.monotonic() + seconds
    time.sleep(1)
    while threads_at_most is not None and status(pid)[1] > threads_at_most:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return status(pid)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default="target/release/shale", help="the shale binary")
    parser.add_argument("--connections", type=int, default=1000)
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="shale-idle-") as tmp:
        log = open(os.path.join(tmp, "shale.log"), "wb")
        proc = subprocess.Popen(
            [args.bin, "serve", "--dbpath", os.path.join(tmp, "data"), "--port", str(port),
             "--quiet"],
            stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            probe = connect(port)
            probe.sendall(ping_message(1))
            read_reply(probe)
            probe.close()
            rss0, threads0 = settle(proc.pid)
            clients = []
            for i in range(args.connections):
                s = connect(port)
                s.sendall(ping_message(i + 2))
                read_reply(s)
                clients.append(s)
            rss1, threads1 = settle(proc.pid)
            for s in clients:
                s.close()
            rss2, threads2 = settle(proc.pid, threads_at_most=threads0)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()
    n = args.connections
    print(f"binary {args.bin}, {n} idle connections (each answered one ping)")
    print(f"{'':28} {'VmRSS MiB':>10} {'threads':>8}")
    print(f"{'before':28} {rss0:10.1f} {threads0:8}")
    print(f"{'with the connections open':28} {rss1:10.1f} {threads1:8}")
    print(f"{'after they closed':28} {rss2:10.1f} {threads2:8}")
    print(f"per idle connection: {(rss1 - rss0) * 1024 / n:.1f} KiB of RSS, "
          f"{(threads1 - threads0) / n:.2f} threads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
