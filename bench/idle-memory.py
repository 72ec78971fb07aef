#!/usr/bin/env python3
"""Memory a server spends per idle keep-alive connection (user space only).

    idle-memory.py --pid PID [--pid PID ...] [-n 10000] [--path /1k.bin] HOST:PORT

Opens N connections to HOST:PORT, sends one `GET PATH HTTP/1.1` on each, reads each
full response (Content-Length framed), and leaves them all open and idle. The memory
of the server process(es) PID is read before, right after the last response, and
again after --settle seconds of idleness (servers may release buffers once a
connection goes idle). It reports, per idle connection, (after - before) / N for:

  VmRSS          /proc/PID/status
  Rss, Pss, Private_Dirty   /proc/PID/smaps_rollup

Finally it checks that none of the N connections was closed by the server.

This is user-space memory of the server process only: kernel socket buffers and
socket structures are not in RSS and are not counted. Give every process that holds
connections (e.g. the nginx worker, not its master); values are summed over PIDs.

Exit status: 0 ok; 1 failure (timeout, refused, bad response); 3 measured, but some
connections were closed by the server.
"""

import argparse
import errno
import json
import os
import resource
import selectors
import socket
import sys
import time

KB = 1024


def read_mem(pid):
    """Returns {VmRSS, Rss, Pss, Private_Dirty} in bytes for one process."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                out["VmRSS"] = int(line.split()[1]) * KB
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss", "Private_Dirty"):
                out[key] = int(rest.split()[0]) * KB
    return out


def read_mems(pids):
    total = {"VmRSS": 0, "Rss": 0, "Pss": 0, "Private_Dirty": 0}
    for pid in pids:
        for k, v in read_mem(pid).items():
            total[k] += v
    return total


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, need))
            return
        except (ValueError, OSError):
            sys.exit(f"idle-memory: need {need} open files but the hard limit is {hard} (raise `ulimit -Hn`, or run as root)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


class Conn:
    __slots__ = ("sock", "state", "buf", "need", "attempts", "status", "close_hdr")

    def __init__(self):
        self.sock = None
        self.state = "new"
        self.buf = bytearray()
        self.need = None  # total bytes of head + body, once the head is parsed
        self.attempts = 0
        self.status = None
        self.close_hdr = False


class Failure(Exception):
    pass


def open_and_fetch(host, port, n, request, max_inflight, deadline):
    """Opens n connections, one request each, reads every response. Returns the
    sockets, all still open. Raises Failure on a bad response, refusal or timeout."""
    sel = selectors.DefaultSelector()
    conns = [Conn() for _ in range(n)]
    pending = list(range(n - 1, -1, -1))  # indices still to connect, popped from the end
    inflight = 0  # connecting or waiting for their response
    done = 0
    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    def start(c):
        nonlocal inflight
        c.attempts += 1
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setblocking(False)
        c.sock = s
        c.state = "connecting"
        rc = s.connect_ex((host, port))
        if rc not in (0, errno.EINPROGRESS, errno.EAGAIN):
            raise Failure(f"connect: {os.strerror(rc)}")
        sel.register(s, selectors.EVENT_WRITE, c)
        inflight += 1

    while done < n:
        while pending and inflight < max_inflight:
            start(conns[pending.pop()])
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            connected = sum(1 for c in conns if c.state in ("waiting", "done"))
            raise Failure(
                f"timed out: {done}/{n} responses complete, {connected} connections established, {inflight} in flight"
            )
        for key, _ in sel.select(timeout=min(1.0, remaining)):
            c = key.data
            s = c.sock
            if c.state == "connecting":
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    sel.unregister(s)
                    s.close()
                    inflight -= 1
                    if c.attempts >= 3:
                        raise Failure(f"connect failed 3 times: {os.strerror(err)} ({done}/{n} done)")
                    start(c)
                    continue
                try:
                    sent = s.send(request)
                except OSError as e:
                    raise Failure(f"send: {e}") from e
                if sent != len(request):
                    raise Failure("short send of a tiny request")
                c.state = "waiting"
                sel.modify(s, selectors.EVENT_READ, c)
            elif c.state == "waiting":
                try:
                    chunk = s.recv(262144)
                except BlockingIOError:
                    continue
                except OSError as e:
                    raise Failure(f"recv: {e} after {done}/{n} responses") from e
                if not chunk:
                    raise Failure(f"server closed a connection before its response was complete ({done}/{n} done)")
                c.buf += chunk
                if c.need is None:
                    end = c.buf.find(b"\r\n\r\n")
                    if end < 0:
                        if len(c.buf) > 65536:
                            raise Failure("response head over 64 KiB")
                        continue
                    head = bytes(c.buf[:end]).decode("latin-1").split("\r\n")
                    parts = head[0].split(" ", 2)
                    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
                        raise Failure(f"bad status line: {head[0]!r}")
                    c.status = int(parts[1])
                    length = None
                    for h in head[1:]:
                        name, _, value = h.partition(":")
                        name = name.strip().lower()
                        if name == "content-length":
                            length = int(value.strip())
                        elif name == "connection" and "close" in value.lower():
                            c.close_hdr = True
                        elif name == "transfer-encoding":
                            raise Failure("response is not Content-Length framed")
                    if length is None:
                        raise Failure("response without Content-Length")
                    if c.status != 200:
                        raise Failure(f"status {c.status}, want 200")
                    if c.close_hdr:
                        raise Failure("server answered `Connection: close`; it will not keep connections")
                    c.need = end + 4 + length
                if len(c.buf) > c.need:
                    raise Failure("more bytes than the response should have")
                if len(c.buf) == c.need:
                    c.state = "done"
                    c.buf = bytearray()  # free the client side
                    sel.unregister(s)
                    inflight -= 1
                    done += 1
    sel.close()
    return [c.sock for c in conns]


def count_closed(socks, timeout=0.5):
    """Sockets the server closed (EOF or reset) and sockets with unexpected data."""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    closed = unexpected = 0
    for key, _ in sel.select(timeout=timeout):
        try:
            data = key.fileobj.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            continue
        except OSError:
            closed += 1
            continue
        if data:
            unexpected += 1
        else:
            closed += 1
    sel.close()
    return closed, unexpected


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", metavar="HOST:PORT")
    ap.add_argument("--pid", action="append", required=True, help="server process to measure (repeatable, or comma-separated)")
    ap.add_argument("-n", "--connections", type=int, default=10000)
    ap.add_argument("--path", default="/1k.bin")
    ap.add_argument("--host-header", default=None, help="Host header (default: HOST:PORT)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds allowed to open and use all connections")
    ap.add_argument("--settle", type=float, default=3.0, help="idle seconds before the second 'after' reading")
    ap.add_argument("--max-inflight", type=int, default=256, help="connections being opened/answered at once")
    ap.add_argument("--warmup", type=int, default=1, help="connections opened, used and closed before 'before' (first-request allocations)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args()

    host, _, port_s = args.target.rpartition(":")
    host = host.strip("[]")
    port = int(port_s)
    pids = [int(p) for arg in args.pid for p in arg.split(",") if p]
    n = args.connections
    if n < 1:
        sys.exit("idle-memory: -n must be at least 1")
    for pid in pids:
        if not os.path.exists(f"/proc/{pid}/smaps_rollup"):
            sys.exit(f"idle-memory: no /proc/{pid}/smaps_rollup (no such process, or not allowed)")
    raise_nofile(n + args.warmup + 64)
    host_header = args.host_header or args.target
    request = f"GET {args.path} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: stoa-idle-memory\r\n\r\n".encode()
    t0 = time.monotonic()
    deadline = t0 + args.timeout

    try:
        if args.warmup:
            for s in open_and_fetch(host, port, args.warmup, request, args.max_inflight, deadline):
                s.close()
            time.sleep(0.5)
        before = read_mems(pids)
        t1 = time.monotonic()
        socks = open_and_fetch(host, port, n, request, args.max_inflight, deadline)
        t2 = time.monotonic()
        after = read_mems(pids)
    except Failure as e:
        sys.exit(f"idle-memory: FAILED against {args.target}: {e} (after {time.monotonic() - t0:.1f} s)")
    except FileNotFoundError:
        sys.exit(f"idle-memory: FAILED: a server process in {pids} went away")
    time.sleep(args.settle)
    try:
        settled = read_mems(pids)
    except FileNotFoundError:
        sys.exit(f"idle-memory: FAILED: a server process in {pids} went away")
    closed, unexpected = count_closed(socks)
    still_open = n - closed

    result = {
        "target": args.target,
        "pids": pids,
        "connections": n,
        "path": args.path,
        "open_seconds": round(t2 - t1, 3),
        "settle_seconds": args.settle,
        "before": before,
        "after": after,
        "after_settled": settled,
        "per_conn_after": {k: (after[k] - before[k]) / n for k in before},
        "per_conn_settled": {k: (settled[k] - before[k]) / n for k in before},
        "still_open": still_open,
        "closed_by_server": closed,
        "unexpected_data": unexpected,
    }
    print(f"target {args.target}, pids {pids}: {n} idle keep-alive connections opened and answered in {t2 - t1:.2f} s")
    print(f"{'metric':<14} {'before':>12} {'after':>12} {'settled':>12} {'B/conn after':>13} {'B/conn settled':>15}")
    for k in before:
        print(
            f"{k:<14} {before[k] / KB:>10.0f}Ki {after[k] / KB:>10.0f}Ki {settled[k] / KB:>10.0f}Ki "
            f"{result['per_conn_after'][k]:>13.0f} {result['per_conn_settled'][k]:>15.0f}"
        )
    print(f"still open at the end: {still_open}/{n} (closed by server: {closed}, unexpected data: {unexpected})")
    print("(user-space memory only: kernel socket buffers are not in RSS)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    for s in socks:
        s.close()
    if closed or unexpected:
        print(f"idle-memory: WARNING: {closed} connections closed by the server, {unexpected} with unexpected data", file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    main()
