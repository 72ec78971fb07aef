#!/usr/bin/env python3
"""Memory a server spends per idle keep-alive connection (user space only).

    idle-memory.py --pid PID [--pid PID ...] [-n 10000] [--path /1k.bin] HOST:PORT
    idle-memory.py --imap USER:PASSWORD [--imap-users K] (--pid PID | --pid-tree PID)
                   [-n 10000] HOST:PORT
    idle-memory.py --imap USER:PASSWORD [--imap-users K] --imap-fill M HOST:PORT

Opens N connections to HOST:PORT, sends one `GET PATH HTTP/1.1` on each, reads each
full response (Content-Length framed), and leaves them all open and idle. The memory
of the server process(es) PID is read before, right after the last response, and
again after --settle seconds of idleness (servers may release buffers once a
connection goes idle). It reports, per idle connection, (after - before) / N for:

  VmRSS          /proc/PID/status
  Rss, Pss, Private_Dirty   /proc/PID/smaps_rollup

Finally it checks that none of the N connections was closed by the server.

IMAP (--imap USER:PASSWORD): instead of the GET, each connection reads the
greeting, logs in (`LOGIN`), selects INBOX (`SELECT INBOX`), starts `IDLE` and
waits for its `+` continuation; the session then stays idle in IDLE. USER may hold
`%d`: connection i (0-based) logs in as USER with %d = i mod K + 1 (--imap-users K),
so N sessions are spread over K users. At the end a connection counts as closed on
EOF, a reset or an untagged `BYE`; other untagged data during IDLE (`* OK Still
here`) is counted, not an error. --imap-fill M only prepares: it APPENDs M small
messages (the same bytes for every server) to each user's INBOX, selects it once
(so the server's own files for it exist before any measurement) and exits.

--pid-tree PID measures PID and every descendant it has at each reading (a server
with a process per session, such as Dovecot: the sum of Pss over all its
processes is the memory the tree holds, each shared page counted once; the sum of
Rss counts a shared page once per process that maps it). The readings also give
the number of processes and of open file descriptors.

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


def descendants(roots):
    """roots and every process below them (from /proc/*/stat's ppid)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # Field 4 (ppid) is the second field after the ")" that closes comm.
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def count_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def read_mems(pids, trees=()):
    """Memory summed over pids (each must exist) and over the trees below the
    pids in trees (members that exit meanwhile are skipped), with the number of
    processes, their open descriptors and the most one of them has."""
    total = {"VmRSS": 0, "Rss": 0, "Pss": 0, "Private_Dirty": 0}
    procs = fds = max_fds = 0
    for pid in pids:
        for k, v in read_mem(pid).items():
            total[k] += v
        procs += 1
        n = count_fds(pid)
        fds, max_fds = fds + n, max(max_fds, n)
    for root in trees:
        if not os.path.exists(f"/proc/{root}"):
            raise FileNotFoundError(root)
        for pid in descendants([root]):
            try:
                mem = read_mem(pid)
            except (FileNotFoundError, ProcessLookupError):
                continue
            for k, v in mem.items():
                total[k] += v
            procs += 1
            n = count_fds(pid)
            fds, max_fds = fds + n, max(max_fds, n)
    return total, {"processes": procs, "fds": fds, "max_fds_one_process": max_fds}


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


class ImapConn:
    __slots__ = ("sock", "state", "buf", "attempts", "user", "literal")

    def __init__(self, user):
        self.sock = None
        self.state = "new"
        self.buf = bytearray()
        self.attempts = 0
        self.user = user
        self.literal = 0  # bytes of a literal still to skip


# The longest response line (or buffered bytes) accepted from the server.
IMAP_MAX_LINE = 1 << 20


def imap_quote(s):
    """An IMAP quoted string (RFC 9051 quoted: backslash and dquote escaped)."""
    if any(c in s for c in "\r\n\0"):
        raise SystemExit("idle-memory: --imap: no CR, LF or NUL in user names and passwords")
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def imap_user(pattern, i, users):
    return pattern.replace("%d", str(i % users + 1)) if "%d" in pattern else pattern


def open_imap_idle(host, port, n, creds, max_inflight, deadline):
    """Opens n IMAP connections; each logs in, selects INBOX and enters IDLE.
    Returns the sockets, all still open, in IDLE. Raises Failure on a refusal, a
    NO or BAD, a closed connection or the deadline."""
    pattern, password, users = creds
    sel = selectors.DefaultSelector()
    conns = [ImapConn(imap_user(pattern, i, users)) for i in range(n)]
    pending = list(range(n - 1, -1, -1))
    inflight = 0
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

    def send(c, data):
        # Commands are small: one send of a fresh connection's tiny command takes it all.
        try:
            sent = c.sock.send(data)
        except OSError as e:
            raise Failure(f"send: {e} ({done}/{n} sessions in IDLE)") from e
        if sent != len(data):
            raise Failure("short send of a small command")

    def on_line(c, line):
        """One complete response line; returns True once the session is in IDLE."""
        text = line.decode("latin-1")
        if c.state == "greeting":
            if text.startswith("* OK"):
                send(c, f"a LOGIN {imap_quote(c.user)} {imap_quote(password)}\r\n".encode())
                c.state = "login"
                return False
            raise Failure(f"greeting: {text[:200]!r}")
        if text.startswith("* BYE"):
            raise Failure(f"server said {text[:200]!r} ({c.state} of {c.user}; {done}/{n} sessions in IDLE)")
        if text.startswith("*"):
            return False  # untagged data (CAPABILITY, EXISTS, FLAGS, ...)
        if c.state == "idle-wait":
            if text.startswith("+"):
                return True
            raise Failure(f"IDLE: {text[:200]!r} ({c.user})")
        tag, _, rest = text.partition(" ")
        want = {"login": "a", "select": "b"}[c.state]
        if tag != want:
            raise Failure(f"{c.state}: unexpected {text[:200]!r}")
        if not rest.startswith("OK"):
            raise Failure(f"{c.state} as {c.user}: {text[:200]!r} ({done}/{n} sessions in IDLE)")
        if c.state == "login":
            send(c, b"b SELECT INBOX\r\n")
            c.state = "select"
        else:
            send(c, b"c IDLE\r\n")
            c.state = "idle-wait"
        return False

    while done < n:
        while pending and inflight < max_inflight:
            start(conns[pending.pop()])
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            states = {}
            for c in conns:
                states[c.state] = states.get(c.state, 0) + 1
            raise Failure(f"timed out: {done}/{n} sessions in IDLE; states {states}")
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
                c.state = "greeting"
                sel.modify(s, selectors.EVENT_READ, c)
                continue
            try:
                chunk = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError as e:
                raise Failure(f"recv: {e} ({c.state} of {c.user}; {done}/{n} sessions in IDLE)") from e
            if not chunk:
                raise Failure(f"server closed a connection ({c.state} of {c.user}; {done}/{n} sessions in IDLE)")
            c.buf += chunk
            while True:
                if c.literal:
                    skip = min(c.literal, len(c.buf))
                    del c.buf[:skip]
                    c.literal -= skip
                    if c.literal:
                        break
                end = c.buf.find(b"\r\n")
                if end < 0:
                    if len(c.buf) > IMAP_MAX_LINE:
                        raise Failure("response line over 1 MiB")
                    break
                line = bytes(c.buf[:end])
                del c.buf[: end + 2]
                # A literal {n} at the end of a line: skip its n bytes, the line goes on.
                if line.endswith(b"}") and b"{" in line:
                    size = line[line.rindex(b"{") + 1 : -1].rstrip(b"+")
                    if size.isdigit():
                        c.literal = int(size)
                        if c.literal > IMAP_MAX_LINE:
                            raise Failure("literal over 1 MiB in a response")
                        continue
                if on_line(c, line):
                    if c.buf:
                        raise Failure(f"data after IDLE's continuation: {bytes(c.buf[:100])!r}")
                    c.state = "idle"
                    c.buf = bytearray()
                    sel.unregister(s)
                    inflight -= 1
                    done += 1
                    break
    sel.close()
    return [c.sock for c in conns]


# The message --imap-fill appends: small, plain, the same bytes on every server.
FILL_MESSAGE = (
    "From: Idle Memory <idle@bench.invalid>\r\n"
    "To: {user}\r\n"
    "Subject: idle-memory fill {k}\r\n"
    "Date: Mon, 07 Dec 2026 12:00:00 +0000\r\n"
    "Message-ID: <fill-{k}-{user}>\r\n"
    "MIME-Version: 1.0\r\n"
    "Content-Type: text/plain; charset=us-ascii\r\n"
    "\r\n" + "A line of the fill message's body, the same for every server.\r\n" * 30
)


def imap_fill(host, port, creds, per_user, timeout):
    """APPENDs per_user messages to each user's INBOX, then SELECTs it once."""
    import imaplib

    pattern, password, users = creds
    for u in range(users):
        user = imap_user(pattern, u, users)
        try:
            m = imaplib.IMAP4(host, port, timeout=timeout)
            m.login(user, password)
            for k in range(per_user):
                msg = FILL_MESSAGE.format(user=user, k=k + 1).encode()
                typ, data = m.append("INBOX", None, None, msg)
                if typ != "OK":
                    sys.exit(f"idle-memory: APPEND for {user}: {typ} {data}")
            typ, data = m.select("INBOX")
            if typ != "OK" or int(data[0]) < per_user:
                sys.exit(f"idle-memory: SELECT INBOX of {user}: {typ} {data}")
            m.logout()
        except (OSError, imaplib.IMAP4.error) as e:
            sys.exit(f"idle-memory: fill of {user} at {host}:{port}: {e}")
    print(f"filled {users} INBOX(es) with {per_user} message(s) each ({len(FILL_MESSAGE) + 60} bytes or so)")


def count_closed_imap(socks, timeout=0.5):
    """Sessions the server closed (EOF, reset or an untagged BYE), and sessions
    that sent something else while idle (`* OK Still here`, counted only)."""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    closed = chatty = 0
    for key, _ in sel.select(timeout=timeout):
        try:
            data = key.fileobj.recv(65536)
        except BlockingIOError:
            continue
        except OSError:
            closed += 1
            continue
        if not data or b"* BYE" in data:
            closed += 1
        else:
            chatty += 1
    sel.close()
    return closed, chatty


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
    ap.add_argument("--pid", action="append", default=[], help="server process to measure (repeatable, or comma-separated)")
    ap.add_argument("--pid-tree", action="append", default=[],
                    help="server process measured with all its descendants at each reading (repeatable)")
    ap.add_argument("--imap", metavar="USER:PASSWORD",
                    help="IMAP mode: LOGIN (USER may hold %%d), SELECT INBOX, IDLE on each connection")
    ap.add_argument("--imap-users", type=int, default=1, metavar="K", help="%%d in --imap's USER runs over 1..K")
    ap.add_argument("--imap-fill", type=int, metavar="M",
                    help="only APPEND M messages to each user's INBOX (and SELECT it), then exit")
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
    creds = None
    if args.imap:
        user, sep, password = args.imap.partition(":")
        if not sep or not user or not password:
            sys.exit("idle-memory: --imap takes USER:PASSWORD")
        if args.imap_users < 1:
            sys.exit("idle-memory: --imap-users must be at least 1")
        creds = (user, password, args.imap_users)
        if args.imap_fill is not None:
            if args.imap_fill < 1:
                sys.exit("idle-memory: --imap-fill must be at least 1")
            imap_fill(host, port, creds, args.imap_fill, min(args.timeout, 60))
            return
    elif args.imap_fill is not None:
        sys.exit("idle-memory: --imap-fill needs --imap")
    pids = [int(p) for arg in args.pid for p in arg.split(",") if p]
    trees = [int(p) for arg in args.pid_tree for p in arg.split(",") if p]
    if not pids and not trees:
        sys.exit("idle-memory: give the server's processes (--pid or --pid-tree)")
    n = args.connections
    if n < 1:
        sys.exit("idle-memory: -n must be at least 1")
    for pid in pids + trees:
        if not os.path.exists(f"/proc/{pid}/smaps_rollup"):
            sys.exit(f"idle-memory: no /proc/{pid}/smaps_rollup (no such process, or not allowed)")
    raise_nofile(n + args.warmup + 64)
    host_header = args.host_header or args.target
    request = f"GET {args.path} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: stoa-idle-memory\r\n\r\n".encode()
    t0 = time.monotonic()
    deadline = t0 + args.timeout

    def open_all(count):
        if creds:
            return open_imap_idle(host, port, count, creds, args.max_inflight, deadline)
        return open_and_fetch(host, port, count, request, args.max_inflight, deadline)

    try:
        if args.warmup:
            for s in open_all(args.warmup):
                s.close()
            time.sleep(0.5)
        before, before_procs = read_mems(pids, trees)
        t1 = time.monotonic()
        socks = open_all(n)
        t2 = time.monotonic()
        after, after_procs = read_mems(pids, trees)
    except Failure as e:
        sys.exit(f"idle-memory: FAILED against {args.target}: {e} (after {time.monotonic() - t0:.1f} s)")
    except FileNotFoundError:
        sys.exit(f"idle-memory: FAILED: a server process in {pids + trees} went away")
    time.sleep(args.settle)
    try:
        settled, settled_procs = read_mems(pids, trees)
    except FileNotFoundError:
        sys.exit(f"idle-memory: FAILED: a server process in {pids + trees} went away")
    if creds:
        # Untagged data during IDLE is allowed; it is reported, not an error.
        closed, idle_data = count_closed_imap(socks)
        unexpected = 0
    else:
        closed, unexpected = count_closed(socks)
        idle_data = 0
    still_open = n - closed

    result = {
        "target": args.target,
        "pids": pids,
        "pid_trees": trees,
        "protocol": "imap" if creds else "http",
        "imap_users": args.imap_users if creds else None,
        "connections": n,
        "path": None if creds else args.path,
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
        "untagged_while_idle": idle_data,
        "processes": {"before": before_procs, "after": after_procs, "after_settled": settled_procs},
    }
    what = f"pids {pids}" + (f", trees below {trees}" if trees else "")
    if creds:
        print(f"target {args.target}, {what}: {n} IMAP sessions (LOGIN, SELECT INBOX, IDLE) over "
              f"{args.imap_users} user(s) opened in {t2 - t1:.2f} s")
    else:
        print(f"target {args.target}, {what}: {n} idle keep-alive connections opened and answered in {t2 - t1:.2f} s")
    print(f"{'metric':<14} {'before':>12} {'after':>12} {'settled':>12} {'B/conn after':>13} {'B/conn settled':>15}")
    for k in before:
        print(
            f"{k:<14} {before[k] / KB:>10.0f}Ki {after[k] / KB:>10.0f}Ki {settled[k] / KB:>10.0f}Ki "
            f"{result['per_conn_after'][k]:>13.0f} {result['per_conn_settled'][k]:>15.0f}"
        )
    for label, p in (("before", before_procs), ("after", after_procs), ("settled", settled_procs)):
        print(f"{label:<8} {p['processes']} process(es), {p['fds']} open fds (at most {p['max_fds_one_process']} in one)")
    if creds:
        print(f"still open at the end: {still_open}/{n} (closed by server or BYE: {closed}, "
              f"untagged data while idle: {idle_data})")
    else:
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
