#!/usr/bin/env bash
# Instructions per keep-alive GET of a small static file, counted by callgrind.
#
# usage: bench/callgrind-keepalive.sh [--stoa BINARY] [--requests N] [--sites N]
#                                     [--only FUNCTION] [--fresh] [--log]
#
# Runs `stoa serve` (one worker, no access log) under `valgrind --tool=callgrind`
# twice: once answering N requests on one keep-alive connection, once 11 x N.
# The difference of the two totals divided by 10 x N is the server's instructions
# per request, start-up and shutdown cancelled out. Deterministic to a few
# instructions, so two builds compare without load noise: run it on the binary
# before and after a change of the request path. Prints one line; writes nothing
# under bench-results/. Needs valgrind and python3 (installed when missing).
# --sites N (N >= 2) serves N [[site]]s instead of --docroot: the requests'
# Host (bench) is a name of the last one, so every request is looked up.
# --only FUNCTION counts inside FUNCTION only (callgrind's --toggle-collect),
# e.g. stoa_web::conn::Conn::process, where each batch is parsed and answered:
# without the system calls and wake-ups, whose count depends on when the
# client's next request arrives, so it stays exact on a loaded machine.
# --fresh sends each request on a connection of its own, which the client closes
# after the answer, as the SPECweb99 kit's client does with most of its
# connections: the server answers, parks the connection, and is woken by the
# close (accept, answer, park, wake, close per request). --log turns the access
# log on (combined, to a file), as the kit requires.
set -euo pipefail
cd "$(dirname "$0")/.."

stoa=""
requests=2000
sites=1
only=()
fresh=0
log=0
while [ $# -gt 0 ]; do
  case "$1" in
    --stoa) stoa="$2"; shift 2 ;;
    --requests) requests="$2"; shift 2 ;;
    --sites) sites="$2"; shift 2 ;;
    --only) only=(--toggle-collect="$2"); shift 2 ;;
    --fresh) fresh=1; shift ;;
    --log) log=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
for cmd in valgrind python3; do
  command -v "$cmd" >/dev/null || apt-get install -y -qq --no-install-recommends "$cmd"
done
if [ -z "$stoa" ]; then
  cargo build --release --locked -p stoa
  stoa="${CARGO_TARGET_DIR:-target}/release/stoa"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/root"
printf 'hello, world\n' > "$work/root/hello.txt"
# One connection for every request: no keep-alive cap in the way.
printf '%s\n' '[web]' 'access_log = "off"' '[web.limits]' \
  'keepalive_requests = 100000000' 'keepalive_timeout = "60s"' > "$work/stoa.toml"
log_args=()
if [ "$log" = 1 ]; then
  sed -i '/^access_log/d' "$work/stoa.toml"
  log_args=(--access-log "$work/access.log" --log-format combined)
fi
root_args=(--docroot "$work/root")
if [ "$sites" -gt 1 ]; then
  root_args=()
  for i in $(seq 2 "$sites"); do
    mkdir "$work/other$i"
    printf '%s\n' '' '[[site]]' "names = [\"other$i.test\", \"*.other$i.test\"]" \
      "docroot = \"$work/other$i\"" >> "$work/stoa.toml"
  done
  printf '%s\n' '' '[[site]]' 'names = ["bench"]' "docroot = \"$work/root\"" >> "$work/stoa.toml"
fi

# Total instructions of one server run answering $1 requests.
run() {
  local n="$1" out="$work/callgrind.$1"
  valgrind --tool=callgrind --callgrind-out-file="$out" "${only[@]}" \
    "$stoa" serve --config "$work/stoa.toml" "${root_args[@]}" "${log_args[@]}" \
    --listen 127.0.0.1:0 --workers 1 2> "$work/stderr.$n" &
  local pid=$!
  local port=""
  for _ in $(seq 600); do
    port="$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$work/stderr.$n")"
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$work/stderr.$n" >&2; exit 1; }
  python3 - "$port" "$n" "$fresh" <<'EOF'
import socket, sys
port, n, fresh = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
s = socket.create_connection(("127.0.0.1", port), timeout=30)
req = b"GET /hello.txt HTTP/1.1\r\nHost: bench\r\n\r\n"
buf = b""
for _ in range(n):
    if fresh:
        s.close()
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        buf = b""
    s.sendall(req)
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0 and len(buf) >= end + 4 + 13:
            buf = buf[end + 4 + 13:]
            break
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("server closed the connection")
        buf += chunk
s.close()
EOF
  kill -TERM "$pid"
  wait "$pid" || true
  sed -n 's/^summary: //p' "$out"
}

small="$(run "$requests")"
large="$(run $((requests * 11)))"
per=$(( (large - small) / (requests * 10) ))
what="keep-alive GET"
[ "$fresh" = 1 ] && what="GET on a connection of its own"
[ "$log" = 1 ] && what="$what, access log on"
echo "instructions per $what: $per (totals $small for $requests requests, $large for $((requests * 11)))"
