#!/usr/bin/env python3
"""POP3 session load for compare-pop3.sh (Python 3 standard library only).

    pop3-sessions.py --port PORT --users N --clients C --messages M --templates DIR
                     [--login-only] [--timeout 300]

Users are u1@example.test .. uN@example.test with password pw-u<i>. C worker processes
(multiprocessing) each take the users i with i % C == worker and run one session per
user, one after the other: USER, PASS, STAT, then (unless --login-only) RETR and DELE
of every message, then QUIT. All workers start together on an event; the wall time
runs from that event to the last worker's end, and sessions/s = N / wall time.

Checks (each failure counts as one error, with the first few printed to stderr):
- every step answers +OK (poplib raises otherwise) within the socket timeout (30 s);
- STAT reports M messages (0 with --login-only, which expects empty mailboxes);
- the octets RETR returns equal LIST's size for that message;
- the body (after the first empty line) of every retrieved message equals the body
  of one of the M template files in DIR (*.eml), and each template body is seen
  exactly once per mailbox (headers differ: the servers add their own).

Prints one line of JSON: sessions, ok, errors, wall_s, sessions_per_sec, bytes
(octets retrieved), bytes_per_sec. Exit status 0 even with errors (the caller
records them); 2 on bad arguments or if the workers overran --timeout.
"""

import argparse
import json
import multiprocessing as mp
import os
import poplib
import sys
import time


def body_of(lines):
    """The lines after the first empty one, as bytes joined with CRLF."""
    try:
        i = lines.index(b"")
    except ValueError:
        return None
    return b"\r\n".join(lines[i + 1 :])


def load_templates(directory):
    bodies = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".eml"):
            continue
        with open(os.path.join(directory, name), "rb") as f:
            raw = f.read().replace(b"\r\n", b"\n")
        lines = raw.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        bodies.append(body_of(lines))
    return bodies


def session(port, user, password, want, bodies, login_only):
    """One POP3 session; returns (errors, octets, first error message or None)."""
    p = poplib.POP3("127.0.0.1", port, timeout=30)
    errors = 0
    msg = None
    octets = 0
    try:
        p.user(user)
        p.pass_(password)
        count, _size = p.stat()
        if count != want:
            return 1, 0, f"{user}: STAT says {count} messages, want {want}"
        if not login_only:
            sizes = {}
            for entry in p.list()[1]:
                n, s = entry.split()
                sizes[int(n)] = int(s)
            seen = [0] * len(bodies)
            for n in range(1, count + 1):
                _resp, lines, got = p.retr(n)
                octets += got
                b = body_of(lines)
                # poplib counts the octets of each line plus CRLF, after removing the
                # byte-stuffing; LIST counts the message as sent unstuffed, so these
                # must agree.
                if got != sizes.get(n):
                    errors += 1
                    msg = msg or f"{user}: RETR {n} gave {got} octets, LIST said {sizes.get(n)}"
                if b in bodies:
                    seen[bodies.index(b)] += 1
                else:
                    errors += 1
                    msg = msg or f"{user}: RETR {n}: body matches no template"
                p.dele(n)
            if seen != [1] * len(bodies):
                errors += 1
                msg = msg or f"{user}: template bodies seen {seen} times, want once each"
        p.quit()
    finally:
        try:
            p.close()
        except OSError:
            pass
    return errors, octets, msg


def worker(w, args, bodies, start, out):
    want = 0 if args.login_only else args.messages
    res = {"sessions": 0, "ok": 0, "errors": 0, "bytes": 0, "msgs": []}
    start.wait()
    for i in range(1, args.users + 1):
        if i % args.clients != w:
            continue
        res["sessions"] += 1
        try:
            errs, octets, msg = session(
                args.port, f"u{i}@example.test", f"pw-u{i}", want, bodies, args.login_only
            )
        except Exception as e:  # noqa: BLE001 - any failure is one error
            errs, octets, msg = 1, 0, f"u{i}: {type(e).__name__}: {e}"
        res["bytes"] += octets
        if errs:
            res["errors"] += errs
            if len(res["msgs"]) < 5:
                res["msgs"].append(msg)
        else:
            res["ok"] += 1
    out.put(res)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--users", type=int, required=True)
    ap.add_argument("--clients", type=int, required=True)
    ap.add_argument("--messages", type=int, required=True)
    ap.add_argument("--templates", required=True)
    ap.add_argument("--login-only", action="store_true")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    if args.users < 1 or args.clients < 1:
        ap.error("users and clients must be positive")
    bodies = load_templates(args.templates)
    if len(bodies) != args.messages or None in bodies:
        ap.error(f"{args.templates}: want {args.messages} *.eml templates with a header, got {len(bodies)}")

    ctx = mp.get_context("fork")
    start = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(w, args, bodies, start, out)) for w in range(args.clients)]
    for p in procs:
        p.start()
    time.sleep(0.2)  # let every worker reach the start line
    t0 = time.monotonic()
    start.set()
    results = []
    deadline = t0 + args.timeout
    while len(results) < len(procs):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            results.append(out.get(timeout=left))
        except Exception:  # queue.Empty
            break
    wall = time.monotonic() - t0
    for p in procs:
        p.join(timeout=max(0.1, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    if len(results) < len(procs):
        print(f"pop3-sessions: workers overran --timeout {args.timeout}s", file=sys.stderr)
        sys.exit(2)
    tot = {k: sum(r[k] for r in results) for k in ("sessions", "ok", "errors", "bytes")}
    for r in results:
        for m in r["msgs"]:
            print(f"pop3-sessions: {m}", file=sys.stderr)
    tot["wall_s"] = round(wall, 4)
    tot["sessions_per_sec"] = round(tot["sessions"] / wall, 2) if wall > 0 else 0
    tot["bytes_per_sec"] = round(tot["bytes"] / wall) if wall > 0 else 0
    print(json.dumps(tot))


if __name__ == "__main__":
    main()
