#!/usr/bin/env python3
"""HTTP/2 attack vectors, frame by frame, against a server on loopback.

    h2_attacks.py VECTOR HOST PORT [PID [DIR]]

Run by crates/stoa/tests/http2.rs, one vector per test, each bounded in frames
and in time. Frames are built with hyperframe and hpack (Debian's python3-h2
brings both). Prints what the server did and exits 0 when that is the expected
defence, 1 otherwise:

  rapid_reset         HEADERS + RST_STREAM pairs (CVE-2023-44487): GOAWAY
                      ENHANCE_YOUR_CALM before 5,000 pairs.
  reset_running DIR   five requests to a CGI script that marks its start in
                      DIR and sleeps; once all five run, each stream is reset
                      (the caller then checks the scripts are gone).
  continuation_flood  HEADERS without END_HEADERS, then CONTINUATION frames
                      (CVE-2024-27316 and kin): GOAWAY ENHANCE_YOUR_CALM
                      within 100 frames.
  hpack_bomb          one HEADERS block whose fields, small on the wire,
                      decode to ~80 KB through HPACK's dynamic table: that
                      stream refused (431 or RST_STREAM), the next one on the
                      same connection answered 200.
  stream_limit        more streams at once than SETTINGS_MAX_CONCURRENT_STREAMS
                      advertises: the ones beyond refused (RST_STREAM
                      REFUSED_STREAM), the connection kept.
  oversize_body       a POST to a CGI script declaring 2 MiB, more than any
                      handler takes: answered 413 at once, before the body.
  slow_window         not an attack: eight requests for /slow.bin (40,000
                      bytes each) with the connection's window opened 12 KiB
                      every 0.5 s, about 10 s in all, past the server's
                      keep-alive timeout (the test sets 1 s): every stream
                      ends whole, the connection kept while bytes move.
  zero_window FILE    eight connections that set SETTINGS_INITIAL_WINDOW_SIZE
                      to 0, each asking 128 times for FILE (/big.bin, a file
                      of the docroot, 32-64 KiB): once every answer's HEADERS
                      came, the server's memory (PID's VmRSS) has grown by less
                      than 16 MiB and another connection is answered 200; then
                      the windows open and every stream gets FILE whole.
  ping_flood          100,000 PINGs without reading a byte, then
  settings_flood      100,000 SETTINGS likewise: the server's memory (PID's
                      VmRSS) grows by less than 32 MiB, and a second
                      connection is answered 200 while the first is stalled.
"""

import socket
import ssl
import sys
import time

from hpack import Encoder
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
ENHANCE_YOUR_CALM = 0xB
REFUSED_STREAM = 0x7
CANCEL = 0x8


def connect(host, port):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    raw = socket.create_connection((host, port), timeout=10)
    conn = ctx.wrap_socket(raw, server_hostname="localhost")
    if conn.selected_alpn_protocol() != "h2":
        sys.exit(f"the server did not choose h2: {conn.selected_alpn_protocol()!r}")
    conn.sendall(PREFACE + SettingsFrame(0).serialize())
    return conn


class Frames:
    """The frames a connection receives, one at a time."""

    def __init__(self, conn):
        self.conn = conn
        self.buf = b""
        self.closed = False

    def _fill(self, deadline):
        self.conn.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = self.conn.recv(65536)
        except (socket.timeout, ssl.SSLWantReadError):
            return False
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            self.closed = True
            return False
        if not data:
            self.closed = True
            return False
        self.buf += data
        return True

    def next(self, timeout=10.0):
        """The next frame, or None at the end of input or after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 9:
                frame, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
                if len(self.buf) >= 9 + length:
                    frame.parse_body(memoryview(self.buf[9 : 9 + length]))
                    self.buf = self.buf[9 + length :]
                    return frame
            if self.closed or time.monotonic() >= deadline:
                return None
            self._fill(deadline)


def request(enc, stream, path="/hello.txt", extra=(), end_stream=True):
    block = enc.encode(
        [(":method", "GET" if end_stream else "POST"), (":scheme", "https"),
         (":authority", "localhost"), (":path", path)] + list(extra)
    )
    flags = ["END_HEADERS"] + (["END_STREAM"] if end_stream else [])
    return HeadersFrame(stream, block, flags=flags).serialize()


def status_of(frame, dec):
    """The :status of a HEADERS frame."""
    for name, value in dec.decode(frame.data):
        if name in (":status", b":status"):
            return int(value)
    return None


def first_status(frames, dec, timeout=10.0):
    """The :status of stream 1's response; otherwise what came first instead
    (RST_STREAM or GOAWAY and its code), or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        frame = frames.next(deadline - time.monotonic())
        if frame is None:
            return None
        if isinstance(frame, HeadersFrame) and frame.stream_id == 1:
            return status_of(frame, dec)
        if isinstance(frame, GoAwayFrame) or (
            isinstance(frame, RstStreamFrame) and frame.stream_id == 1
        ):
            return f"{type(frame).__name__} {frame.error_code}"
    return None


def until_goaway(frames, timeout=10.0):
    """The GOAWAY's error code, or None if the connection ended (or time ran
    out) without one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        frame = frames.next(deadline - time.monotonic())
        if frame is None:
            return None
        if isinstance(frame, GoAwayFrame):
            return frame.error_code
    return None


def rapid_reset(host, port, _pid, path="/hello.txt", name="rapid_reset"):
    conn = connect(host, port)
    frames = Frames(conn)
    enc = Encoder()
    sent = 0
    conn.settimeout(10)
    try:
        for batch in range(50):
            burst = b""
            for i in range(100):
                stream = 1 + 2 * (batch * 100 + i)
                burst += request(enc, stream, path=path)
                burst += RstStreamFrame(stream, error_code=CANCEL).serialize()
            conn.sendall(burst)
            sent += 100
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout):
        pass
    code = until_goaway(frames)
    print(f"{name}: sent {sent} HEADERS+RST_STREAM pairs; GOAWAY code {code}")
    return code == ENHANCE_YOUR_CALM


def reset_running(host, port, _pid, marks):
    import os

    conn = connect(host, port)
    enc = Encoder()
    streams = [1, 3, 5, 7, 9]
    conn.sendall(b"".join(request(enc, s, path="/cgi-bin/slow") for s in streams))
    deadline = time.monotonic() + 10
    started = 0
    while started < len(streams) and time.monotonic() < deadline:
        started = len(os.listdir(marks))
        time.sleep(0.05)
    conn.sendall(b"".join(RstStreamFrame(s, error_code=CANCEL).serialize() for s in streams))
    # The server may answer nothing more; give it the frames before closing.
    Frames(conn).next(0.5)
    print(f"reset_running: {started} scripts running, their streams reset")
    return started == len(streams)


def continuation_flood(host, port, _pid):
    conn = connect(host, port)
    frames = Frames(conn)
    enc = Encoder()
    block = enc.encode(
        [(":method", "GET"), (":scheme", "https"), (":authority", "localhost"),
         (":path", "/hello.txt")]
    )
    conn.sendall(HeadersFrame(1, block, flags=["END_STREAM"]).serialize())
    sent = 0
    try:
        for _ in range(100):
            pad = enc.encode([("x-pad", "a" * 100)])
            conn.sendall(ContinuationFrame(1, pad).serialize())
            sent += 1
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout):
        pass
    code = until_goaway(frames)
    print(f"continuation_flood: sent {sent} CONTINUATION frames; GOAWAY code {code}")
    return code == ENHANCE_YOUR_CALM


def hpack_bomb(host, port, _pid):
    from hpack import Decoder

    conn = connect(host, port)
    frames = Frames(conn)
    enc, dec = Encoder(), Decoder()
    bomb = [("x-bomb", "b" * 4000)] * 20
    first = request(enc, 1, extra=bomb)
    conn.sendall(first + request(enc, 3))
    print(f"hpack_bomb: {len(first)} bytes on the wire for ~{20 * 4040} decoded")
    outcome = {}
    deadline = time.monotonic() + 10
    while len(outcome) < 2 and time.monotonic() < deadline:
        frame = frames.next(deadline - time.monotonic())
        if frame is None:
            break
        if isinstance(frame, HeadersFrame):
            outcome.setdefault(frame.stream_id, f"status {status_of(frame, dec)}")
        elif isinstance(frame, RstStreamFrame):
            outcome.setdefault(frame.stream_id, f"reset {frame.error_code}")
        elif isinstance(frame, GoAwayFrame):
            outcome.setdefault("goaway", frame.error_code)
            break
    print(f"hpack_bomb: {outcome}")
    refused = outcome.get(1) in ("status 431", f"reset {REFUSED_STREAM}")
    return refused and outcome.get(3) == "status 200"


def stream_limit(host, port, _pid):
    conn = connect(host, port)
    frames = Frames(conn)
    enc = Encoder()
    advertised = None
    deadline = time.monotonic() + 5
    while advertised is None and time.monotonic() < deadline:
        frame = frames.next(deadline - time.monotonic())
        if frame is None:
            break
        if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
            advertised = frame.settings.get(SettingsFrame.MAX_CONCURRENT_STREAMS)
    if not advertised:
        print("stream_limit: no SETTINGS_MAX_CONCURRENT_STREAMS advertised")
        return False
    extra = 8
    # Each stream's body never comes, so each stays open.
    burst = b"".join(
        request(enc, 1 + 2 * i, end_stream=False) for i in range(advertised + extra)
    )
    conn.sendall(burst)
    refused = set()
    deadline = time.monotonic() + 10
    while len(refused) < extra and time.monotonic() < deadline:
        frame = frames.next(deadline - time.monotonic())
        if frame is None:
            break
        if isinstance(frame, RstStreamFrame) and frame.error_code == REFUSED_STREAM:
            refused.add(frame.stream_id)
        if isinstance(frame, GoAwayFrame):
            print(f"stream_limit: GOAWAY {frame.error_code}")
            return False
    beyond = {1 + 2 * i for i in range(advertised, advertised + extra)}
    print(f"stream_limit: {advertised} advertised; refused {sorted(refused)}")
    return refused == beyond


def oversize_body(host, port, _pid):
    from hpack import Decoder

    conn = connect(host, port)
    frames = Frames(conn)
    enc, dec = Encoder(), Decoder()
    block = enc.encode(
        [(":method", "POST"), (":scheme", "https"), (":authority", "localhost"),
         (":path", "/cgi-bin/echo"), ("content-length", str(2 * 1024 * 1024))]
    )
    conn.sendall(
        HeadersFrame(1, block, flags=["END_HEADERS"]).serialize()
        + DataFrame(1, b"x" * 16384).serialize()
    )
    status = first_status(frames, dec)
    print(f"oversize_body: {status}")
    return status == 413


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def flood(host, port, pid, frame_bytes, name):
    before = rss_kib(pid)
    conn = connect(host, port)
    conn.settimeout(3)
    sent = 0
    stalled = False
    chunk = frame_bytes * 1000
    try:
        for _ in range(100):
            conn.sendall(chunk)
            sent += 1000
    except socket.timeout:
        stalled = True
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
        pass
    grown = rss_kib(pid) - before
    # Another client meanwhile, the flooding connection still open and unread.
    other = connect(host, port)
    other_frames = Frames(other)
    from hpack import Decoder

    dec = Decoder()
    other.sendall(request(Encoder(), 1))
    status = first_status(other_frames, dec)
    print(
        f"{name}: sent {sent} frames ({'stalled: the server stopped reading' if stalled else 'all taken'}); "
        f"server RSS grew {grown} KiB; another connection got {status}"
    )
    conn.close()
    return grown < 32 * 1024 and status == 200


def ping_flood(host, port, pid):
    return flood(host, port, pid, PingFrame(0, opaque_data=b"12345678").serialize(), "ping_flood")


def settings_flood(host, port, pid):
    frame = SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 65535})
    return flood(host, port, pid, frame.serialize(), "settings_flood")


def slow_window(host, port, _pid, streams=8, size=40_000):
    conn = connect(host, port)
    frames = Frames(conn)
    enc = Encoder()
    ids = [1 + 2 * i for i in range(streams)]
    conn.sendall(b"".join(request(enc, i, "/slow.bin") for i in ids))
    got = {i: 0 for i in ids}
    ended = set()
    deadline = time.monotonic() + 60
    next_grant = time.monotonic() + 0.5
    while len(ended) < streams and time.monotonic() < deadline:
        frame = frames.next(max(0.01, next_grant - time.monotonic()))
        if time.monotonic() >= next_grant:
            conn.sendall(WindowUpdateFrame(0, window_increment=12 * 1024).serialize())
            next_grant += 0.5
        if frame is None:
            if frames.closed:
                break
            continue
        if isinstance(frame, (GoAwayFrame, RstStreamFrame)) and frame.error_code != 0:
            print(f"slow_window: {type(frame).__name__} {frame.error_code}")
            return False
        if isinstance(frame, DataFrame) and frame.stream_id in got:
            got[frame.stream_id] += len(frame.data)
            if "END_STREAM" in frame.flags:
                ended.add(frame.stream_id)
    print(f"slow_window: bytes per stream {got}, ended {sorted(ended)}, closed {frames.closed}")
    return len(ended) == streams and all(n == size for n in got.values())


def zero_window(host, port, pid, path, conns=8, streams=128):
    from hpack import Decoder

    expected = open(path, "rb").read()
    before = rss_kib(pid)
    clients = []
    for _ in range(conns):
        conn = socket.create_connection((host, port), timeout=10)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"])
        conn = ctx.wrap_socket(conn, server_hostname="localhost")
        shut = SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 0})
        enc = Encoder()
        ids = [1 + 2 * i for i in range(streams)]
        conn.sendall(
            PREFACE + shut.serialize() + b"".join(request(enc, i, "/big.bin") for i in ids)
        )
        clients.append((conn, Frames(conn), Decoder(), {i: None for i in ids}))
    # Every answer's head comes (HEADERS are not flow-controlled): by then the
    # server has done what it does with the bodies.
    deadline = time.monotonic() + 20
    for conn, frames, dec, status in clients:
        while None in status.values() and time.monotonic() < deadline:
            frame = frames.next(deadline - time.monotonic())
            if frame is None:
                break
            if isinstance(frame, HeadersFrame) and frame.stream_id in status:
                status[frame.stream_id] = status_of(frame, dec)
            elif isinstance(frame, (GoAwayFrame, RstStreamFrame)):
                print(f"zero_window: {type(frame).__name__} {frame.error_code}")
                return False
            elif isinstance(frame, DataFrame) and frame.data:
                print(f"zero_window: DATA on stream {frame.stream_id} with a shut window")
                return False
    heads = sum(1 for _, _, _, st in clients for s in st.values() if s == 200)
    grown = rss_kib(pid) - before
    other = connect(host, port)
    other.sendall(request(Encoder(), 1))
    other_status = first_status(Frames(other), Decoder())
    other.close()
    # The windows open: every body must come whole.
    whole = 0
    for conn, frames, _, status in clients:
        conn.sendall(
            SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 1 << 20}).serialize()
            + WindowUpdateFrame(0, window_increment=(1 << 31) - 1 - 65535).serialize()
        )
        got = {i: b"" for i in status}
        ended = set()
        deadline = time.monotonic() + 30
        while len(ended) < len(got) and time.monotonic() < deadline:
            frame = frames.next(deadline - time.monotonic())
            if frame is None:
                break
            if isinstance(frame, DataFrame) and frame.stream_id in got:
                got[frame.stream_id] += frame.data
                if "END_STREAM" in frame.flags:
                    ended.add(frame.stream_id)
            elif isinstance(frame, (GoAwayFrame, RstStreamFrame)) and frame.error_code != 0:
                print(f"zero_window: {type(frame).__name__} {frame.error_code}")
                break
        whole += sum(1 for i in ended if got[i] == expected)
        conn.close()
    total = conns * streams
    print(
        f"zero_window: {conns} connections x {streams} streams of {len(expected)} bytes; "
        f"{heads} heads 200; server RSS grew {grown} KiB with the windows shut; "
        f"another connection got {other_status}; {whole}/{total} bodies whole once opened"
    )
    return heads == total and grown < 16 * 1024 and other_status == 200 and whole == total


VECTORS = {
    "rapid_reset": rapid_reset,
    "reset_running": reset_running,
    "continuation_flood": continuation_flood,
    "hpack_bomb": hpack_bomb,
    "stream_limit": stream_limit,
    "oversize_body": oversize_body,
    "ping_flood": ping_flood,
    "settings_flood": settings_flood,
    "slow_window": slow_window,
    "zero_window": zero_window,
}

if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] not in VECTORS:
        sys.exit(f"usage: h2_attacks.py {{{'|'.join(VECTORS)}}} HOST PORT [PID]")
    pid = sys.argv[4] if len(sys.argv) > 4 else None
    ok = VECTORS[sys.argv[1]](sys.argv[2], int(sys.argv[3]), pid, *sys.argv[5:])
    sys.exit(0 if ok else 1)
