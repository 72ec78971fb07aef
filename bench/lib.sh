# shellcheck shell=bash
# Globals set here (STOA_PORT, WRK_*, ...) are read by the scripts that source it.
# shellcheck disable=SC2034
# Shared helpers for the bench/*.sh scripts. Source it; do not run it.
#
# Conventions: every helper that starts a server records its PID in SERVER_PIDS so
# `bench_cleanup` (installed as an EXIT/INT/TERM trap by `bench_install_traps`) can
# stop it, whatever way the script ends.

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$BENCH_DIR/.." && pwd)"
STOA_BIN="$REPO_ROOT/target/release/stoa"

SERVER_PIDS=()
BENCH_TMP=""

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# --- cleanup -----------------------------------------------------------------

# Stops one process: SIGTERM, up to 10 s to exit, then SIGKILL.
stop_pid() {
    local pid="$1" i
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "pid $pid ignored SIGTERM for 10 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

# Stops a server started by this script and forgets it.
stop_server() {
    local pid="$1" p keep=()
    stop_pid "$pid"
    for p in "${SERVER_PIDS[@]}"; do
        [[ "$p" == "$pid" ]] || keep+=("$p")
    done
    SERVER_PIDS=("${keep[@]}")
}

bench_cleanup() {
    local p
    for p in "${SERVER_PIDS[@]}"; do
        stop_pid "$p"
    done
    SERVER_PIDS=()
    if [[ -n "$BENCH_TMP" && -d "$BENCH_TMP" && -z "${BENCH_KEEP_TMP:-}" ]]; then
        rm -rf "$BENCH_TMP"
    fi
}

bench_install_traps() {
    set -E
    trap 'log "FAILED (exit $?) at line $LINENO: $BASH_COMMAND"' ERR
    trap bench_cleanup EXIT
    trap 'log "interrupted"; exit 130' INT
    trap 'log "terminated"; exit 143' TERM
}

# --- prerequisites -------------------------------------------------------------

# Installs the Debian packages that provide the given commands, if any is missing.
# Arguments are command:package pairs.
ensure_commands() {
    local pair cmd pkg missing=()
    for pair in "$@"; do
        cmd="${pair%%:*}"
        pkg="${pair#*:}"
        if ! command -v "$cmd" >/dev/null 2>&1 && [[ ! -x "/usr/sbin/$cmd" ]]; then
            missing+=("$pkg")
        fi
    done
    ((${#missing[@]} == 0)) && return 0
    log "installing: ${missing[*]}"
    if [[ "$(id -u)" != 0 ]]; then
        die "missing packages (${missing[*]}) and not root: install them first"
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

nginx_bin() {
    if command -v nginx >/dev/null 2>&1; then command -v nginx; else echo /usr/sbin/nginx; fi
}

build_stoa() {
    command -v cargo >/dev/null 2>&1 || die "cargo not found: install a Rust toolchain (see rust-toolchain.toml)"
    log "building stoa (release)"
    local out
    if ! out="$(cd "$REPO_ROOT" && cargo build --release 2>&1)"; then
        printf '%s\n' "$out" >&2
        die "cargo build failed"
    fi
    [[ -x "$STOA_BIN" ]] || die "no binary at $STOA_BIN"
    # Record what was built, and run a private copy: other work in the tree may
    # rebuild target/release/stoa while the benchmark runs.
    STOA_REV="$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    STOA_DIRTY="$(git_dirty)"
    STOA_SRC_DIRTY="$(git_dirty crates Cargo.toml Cargo.lock)"
    if [[ -n "$BENCH_TMP" ]]; then
        cp "$STOA_BIN" "$BENCH_TMP/stoa"
        STOA_BIN="$BENCH_TMP/stoa"
    fi
    STOA_SHA="$(sha256sum "$STOA_BIN" | cut -c1-16)"
}

# yes/no: uncommitted changes in the working tree (or under the given paths).
git_dirty() {
    if [[ -n "$(git -C "$REPO_ROOT" status --porcelain -- "$@" 2>/dev/null)" ]]; then echo yes; else echo no; fi
}

# Raises the soft open-file limit as far as the hard limit allows (and the hard
# limit too when root).
raise_nofile() {
    local want="${1:-65536}" hard
    hard="$(ulimit -Hn)"
    if [[ "$hard" != unlimited ]] && ((hard < want)); then
        ulimit -Hn "$want" 2>/dev/null || true
        hard="$(ulimit -Hn)"
    fi
    if [[ "$hard" == unlimited ]] || ((hard >= want)); then
        ulimit -Sn "$want"
    else
        ulimit -Sn "$hard"
    fi
}

# --- temp files, ports, docroot ------------------------------------------------

make_tmp() {
    BENCH_TMP="$(mktemp -d /tmp/stoa-bench.XXXXXX)"
    chmod 755 "$BENCH_TMP"
}

# A TCP port that was free a moment ago on 127.0.0.1.
free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# Creates DIR with 1k.bin, 10k.bin and 100k.bin of random bytes.
make_docroot() {
    local dir="$1"
    mkdir -p "$dir"
    head -c 1024 /dev/urandom >"$dir/1k.bin"
    head -c 10240 /dev/urandom >"$dir/10k.bin"
    head -c 102400 /dev/urandom >"$dir/100k.bin"
    chmod 755 "$dir"
    chmod 644 "$dir"/*.bin
}

# Waits until something accepts TCP connections on 127.0.0.1:PORT.
wait_port() {
    local port="$1" pid="$2" i
    for ((i = 0; i < 200; i++)); do
        kill -0 "$pid" 2>/dev/null || return 1
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# --- servers -----------------------------------------------------------------------

# write_nginx_conf DIR PORT DOCROOT KEEPALIVE_TIMEOUT WORKER_CONNECTIONS ACCESS_LOG(off|FILE) [EXTRA_MAIN_DIRECTIVES]
# Writes DIR/nginx.conf: one worker, foreground, every path inside DIR.
write_nginx_conf() {
    local dir="$1" port="$2" docroot="$3" ka="$4" wc="$5" alog="$6" extra="${7:-}"
    local user_line="" alog_line
    mkdir -p "$dir"/{client_body,proxy,fastcgi,uwsgi,scgi}
    [[ "$(id -u)" == 0 ]] && user_line="user root;"
    if [[ "$alog" == off ]]; then alog_line="access_log off;"; else alog_line="access_log $alog;"; fi
    cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process on;
$user_line
pid $dir/nginx.pid;
error_log $dir/error.log warn;
$extra

events {
    worker_connections $wc;
}

http {
    types {
        application/octet-stream bin;
        text/html html;
    }
    default_type application/octet-stream;

    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;

    sendfile on;
    tcp_nopush on;
    open_file_cache max=10000 inactive=60s;
    open_file_cache_valid 1s;
    $alog_line
    keepalive_timeout $ka;
    keepalive_requests 1000;

    server {
        listen 127.0.0.1:$port reuseport;
        root $docroot;
        location / { }
    }
}
EOF
}

# start_nginx CONF_DIR PORT -> sets NGINX_PID (the master)
start_nginx() {
    local dir="$1" port="$2" nginx
    nginx="$(nginx_bin)"
    "$nginx" -t -q -p "$dir" -c "$dir/nginx.conf" 2>"$dir/nginx-t.log" ||
        die "nginx -t failed: $(cat "$dir/nginx-t.log")"
    "$nginx" -p "$dir" -c "$dir/nginx.conf" 2>>"$dir/stderr.log" &
    NGINX_PID=$!
    SERVER_PIDS+=("$NGINX_PID")
    wait_port "$port" "$NGINX_PID" ||
        die "nginx did not start listening on $port: $(tail -n 5 "$dir/error.log" "$dir/stderr.log" 2>/dev/null)"
}

# The worker PIDs of an nginx master, waiting up to 10 s for them to appear (the
# master listens before it forks them).
nginx_workers() {
    local master="$1" i pids
    for ((i = 0; i < 200; i++)); do
        pids="$(nginx_children "$master")"
        if [[ -n "$pids" ]]; then
            echo "$pids"
            return 0
        fi
        sleep 0.05
    done
}

# The children of a process.
nginx_children() {
    local master="$1" f pid ppid rest
    if [[ -r "/proc/$master/task/$master/children" ]]; then
        tr ' ' '\n' <"/proc/$master/task/$master/children" | grep -E '^[0-9]+$' || true
        return 0
    fi
    for f in /proc/[0-9]*/stat; do
        read -r pid _ rest <"$f" 2>/dev/null || continue
        # Field 4 (ppid) is the second field after the ")" that closes comm.
        rest="${rest##*) }"
        ppid="$(cut -d' ' -f2 <<<"$rest")"
        [[ "$ppid" == "$master" ]] && echo "$pid"
    done
}

# start_stoa LOGFILE ARGS... -> sets STOA_PID and STOA_PORT. Listens on 127.0.0.1:0
# and reads the real port from the "listening" line on standard error.
start_stoa() {
    local errlog="$1" i line
    shift
    : >"$errlog"
    "$STOA_BIN" serve --listen 127.0.0.1:0 "$@" 2>>"$errlog" &
    STOA_PID=$!
    SERVER_PIDS+=("$STOA_PID")
    STOA_PORT=""
    for ((i = 0; i < 300; i++)); do
        line="$(grep -m1 -o 'stoa: listening on http://127\.0\.0\.1:[0-9]*' "$errlog" || true)"
        if [[ -n "$line" ]]; then
            STOA_PORT="${line##*:}"
            return 0
        fi
        kill -0 "$STOA_PID" 2>/dev/null || die "stoa exited at startup: $(tail -n 5 "$errlog")"
        sleep 0.05
    done
    die "stoa did not report listening within 15 s: $(tail -n 5 "$errlog")"
}

# check_fetch PORT DOCROOT LABEL: every test file comes back 200 with the right bytes.
check_fetch() {
    local port="$1" docroot="$2" label="$3"
    python3 - "$port" "$docroot" "$label" <<'EOF' || die "sanity fetch from $label failed"
import sys, urllib.request
port, docroot, label = sys.argv[1], sys.argv[2], sys.argv[3]
for name in ("1k.bin", "10k.bin", "100k.bin"):
    with open(f"{docroot}/{name}", "rb") as f:
        want = f.read()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{name}", timeout=10) as r:
        got = r.read()
        if r.status != 200 or got != want:
            sys.exit(f"{label}: /{name}: status {r.status}, {len(got)} bytes, want 200 and {len(want)} bytes")
EOF
}

# --- wrk ---------------------------------------------------------------------------

# cpu_snapshot PIDS... -> "TOTAL BUSY OURS" in clock ticks: all CPU time and busy
# CPU time (from /proc/stat, steal excluded), and the CPU time of the given processes
# (all threads) plus this shell's finished children (wrk runs as one).
cpu_snapshot() {
    local p rest ours=0 u n s idle iow irq sirq steal a
    read -r _ u n s idle iow irq sirq steal _ </proc/stat
    for p in "$@"; do
        rest="$(cat "/proc/$p/stat" 2>/dev/null)" || continue
        rest="${rest##*) }"
        read -r -a a <<<"$rest"
        ours=$((ours + a[11] + a[12]))
    done
    rest="$(cat "/proc/$$/stat")"
    rest="${rest##*) }"
    read -r -a a <<<"$rest"
    ours=$((ours + a[11] + a[12] + a[13] + a[14]))
    echo "$((u + n + s + idle + iow + irq + sirq)) $((u + n + s + irq + sirq)) $ours"
}

# other_cpu_pct "SNAP_BEFORE" "SNAP_AFTER": % of all CPU used by other processes.
other_cpu_pct() {
    local t0 b0 o0 t1 b1 o1
    read -r t0 b0 o0 <<<"$1"
    read -r t1 b1 o1 <<<"$2"
    awk -v t="$((t1 - t0))" -v b="$((b1 - b0))" -v o="$((o1 - o0))" \
        'BEGIN { x = (t > 0 ? 100 * (b - o) / t : 0); if (x < 0) x = 0; printf "%.0f", x }'
}

# run_wrk OUTFILE DURATION THREADS CONNS URL [close] -> sets WRK_RPS, WRK_TRANSFER
# (bytes/s), WRK_ERRORS (socket errors + non-2xx/3xx), WRK_ERR_DETAIL. A wrk that
# fails to run at all counts as one error with req/s 0. With the server PIDs in
# MEASURE_PIDS, also sets WRK_OTHER_CPU: % of all CPU used by other processes
# during the run (anything above a few % disturbs the figures).
MEASURE_PIDS=()
run_wrk() {
    local out="$1" dur="$2" threads="$3" conns="$4" url="$5" mode="${6:-}" rc=0 snap0 snap1
    local args=(-t"$threads" -c"$conns" -d"${dur}s" --latency)
    [[ "$mode" == close ]] && args+=(-H 'Connection: close')
    # Extra wrk arguments (headers, a Lua script) from the calling script, if any.
    if [[ -n "${WRK_EXTRA+set}" ]]; then args+=("${WRK_EXTRA[@]}"); fi
    snap0="$(cpu_snapshot "${MEASURE_PIDS[@]}")"
    timeout --foreground --kill-after=5 "$((dur + 30))" wrk "${args[@]}" "$url" >"$out" 2>&1 || rc=$?
    snap1="$(cpu_snapshot "${MEASURE_PIDS[@]}")"
    WRK_OTHER_CPU="$(other_cpu_pct "$snap0" "$snap1")"
    if ((rc != 0)); then
        WRK_RPS=0 WRK_TRANSFER=0 WRK_ERRORS=1 WRK_ERR_DETAIL="wrk exit $rc: $(tr '\n' ' ' <"$out" | cut -c1-200)"
        return 0
    fi
    local parsed
    parsed="$(awk '
        function bytes(s,   n, u) {
            n = s + 0; u = s; sub(/^[0-9.]+/, "", u)
            if (u == "KB") n *= 1024; else if (u == "MB") n *= 1048576
            else if (u == "GB") n *= 1073741824; else if (u == "TB") n *= 1099511627776
            return n
        }
        /^Requests\/sec:/ { rps = $2 }
        /^Transfer\/sec:/ { tr = bytes($2) }
        /Socket errors:/ {
            gsub(",", "")
            se = $4 + $6 + $8 + $10
            detail = detail "connect " $4 " read " $6 " write " $8 " timeout " $10 "; "
        }
        /Non-2xx or 3xx responses:/ { nx = $5; detail = detail "non-2xx/3xx " $5 "; " }
        END { printf "%s|%.0f|%d|%s\n", (rps == "" ? 0 : rps), tr, se + nx, detail }
    ' "$out")"
    IFS='|' read -r WRK_RPS WRK_TRANSFER WRK_ERRORS WRK_ERR_DETAIL <<<"$parsed"
    if [[ "$WRK_RPS" == 0 ]]; then
        WRK_ERRORS=$((WRK_ERRORS + 1))
        WRK_ERR_DETAIL+="no Requests/sec line; "
    fi
}

# measure_row ROUND ROW PATH MODE CONNS SERVER... : runs wrk against each SERVER in
# turn (URL ${SCHEME:-http}://127.0.0.1:${PORT[SERVER]}PATH) and appends the results to $RAW and
# the wrk outputs to $WRKLOG. Calls `after_run SERVER` (defined by the script) after
# each run. With BENCH_WAIT_IDLE set, a pair in which other processes used more than
# BUSY_LIMIT % of the CPU is thrown away (kept in wrk.log, marked) and measured
# again after waiting for the machine to go quiet, up to 3 attempts.
BUSY_LIMIT=15
# PORT (associative: server -> port), DURATION, THREADS, RAW and WRKLOG are the
# calling script's globals.
# shellcheck disable=SC2153
measure_row() {
    local r="$1" row="$2" path="$3" mode="$4" conns="$5" attempt s busy msg pair lines
    shift 5
    pair="$BENCH_TMP/pair.log"
    for ((attempt = 1; ; attempt++)); do
        lines=()
        busy=0
        : >"$pair"
        for s in "$@"; do
            run_wrk "$BENCH_TMP/wrk-out.txt" "$DURATION" "$THREADS" "$conns" "${SCHEME:-http}://127.0.0.1:${PORT[$s]}$path" "$mode"
            {
                echo "=== round $r row $row server $s (attempt $attempt; other processes used ${WRK_OTHER_CPU}% of the CPU)"
                cat "$BENCH_TMP/wrk-out.txt"
            } >>"$pair"
            lines+=("$r,$row,$s,$WRK_RPS,$WRK_TRANSFER,$WRK_ERRORS,$WRK_OTHER_CPU")
            msg="round $r $row $s: $WRK_RPS req/s (other CPU ${WRK_OTHER_CPU}%)"
            if ((WRK_ERRORS != 0)); then
                msg+="  !!! ERRORS: $WRK_ERRORS ($WRK_ERR_DETAIL)"
            fi
            log "$msg"
            if ((WRK_OTHER_CPU > busy)); then busy="$WRK_OTHER_CPU"; fi
            after_run "$s"
        done
        if ((busy > BUSY_LIMIT && ${BENCH_WAIT_IDLE:-0} > 0 && attempt < 3)); then
            log "round $r $row: disturbed (other processes up to ${busy}% of the CPU); measuring the pair again"
            {
                echo "### DISCARDED (disturbed by other processes, measured again):"
                cat "$pair"
            } >>"$WRKLOG"
            wait_idle
            continue
        fi
        cat "$pair" >>"$WRKLOG"
        printf '%s\n' "${lines[@]}" >>"$RAW"
        return 0
    done
}

# --- background load ------------------------------------------------------------------

# Percentage of all CPU time spent busy over SECS (default 2) seconds, from /proc/stat.
# Called while nothing of ours is running, it measures other activity on the machine.
cpu_busy_pct() {
    local secs="${1:-2}" a b
    a="$(head -1 /proc/stat)"
    sleep "$secs"
    b="$(head -1 /proc/stat)"
    awk -v a="$a" -v b="$b" 'BEGIN {
        n = split(a, x, " "); split(b, y, " ")
        for (i = 2; i <= n; i++) { d = y[i] - x[i]; tot += d; if (i == 5 || i == 6) idle += d }
        printf "%.0f", (tot > 0 ? 100 * (tot - idle) / tot : 0)
    }'
}

# check_background LABEL: measures other CPU activity, warns loudly above 10 %, and
# appends a line to BACKGROUND_NOTES for the README.
BACKGROUND_NOTES=()
check_background() {
    local label="$1" pct
    pct="$(cpu_busy_pct 2)"
    BACKGROUND_NOTES+=("$label: ${pct}% of all CPU busy with other work (2 s sample; load average $(cut -d' ' -f1-3 /proc/loadavg))")
    if ((pct > 10)); then
        log "!!! WARNING: the machine is ${pct}% busy with other work ($label); figures will be disturbed"
        BACKGROUND_NOTES[-1]+=" -- WARNING: figures disturbed"
    else
        log "background CPU load ($label): ${pct}%"
    fi
}

# With BENCH_WAIT_IDLE=SECS in the environment, waits up to SECS seconds for other
# activity on the machine to fall to 10 % of the CPU or less before measuring.
wait_idle() {
    local max="${BENCH_WAIT_IDLE:-0}" start pct
    [[ "$max" =~ ^[0-9]+$ ]] || die "BENCH_WAIT_IDLE must be a number of seconds"
    ((max > 0)) || return 0
    start=$SECONDS
    while :; do
        pct="$(cpu_busy_pct 2)"
        ((pct <= 10)) && return 0
        if ((SECONDS - start >= max)); then
            log "machine still ${pct}% busy after ${max}s; going ahead"
            return 0
        fi
        log "machine ${pct}% busy with other work; waiting (BENCH_WAIT_IDLE=$max)"
        sleep 8
    done
}

# Markdown list of the background-load checks.
describe_background() {
    local n
    for n in "${BACKGROUND_NOTES[@]}"; do echo "- $n"; done
}

# --- provenance ----------------------------------------------------------------------

# Machine and software description as Markdown list items.
describe_machine() {
    local cpu cores mem nginxv wrkv rev dirty src_dirty
    cpu="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    cpu+=" ($(grep -m1 '^cpu MHz' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') MHz"
    grep -qm1 '^flags.* hypervisor' /proc/cpuinfo && cpu+=", virtual machine"
    cpu+=")"
    cores="$(nproc)"
    mem="$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    nginxv="not installed"
    if [[ -x "$(nginx_bin)" ]]; then
        nginxv="$({ "$(nginx_bin)" -v 2>&1 || true; } | head -1)"
    fi
    wrkv="not installed"
    if command -v wrk >/dev/null 2>&1; then
        # `wrk -v` prints its version and exits 1.
        wrkv="$({ wrk -v 2>&1 || true; } | head -1 | sed 's/ Copyright.*//')"
    fi
    rev="${STOA_REV:-$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    dirty="${STOA_DIRTY:-$(git_dirty)}"
    src_dirty="${STOA_SRC_DIRTY:-$(git_dirty crates Cargo.toml Cargo.lock)}"
    cat <<EOF
- CPU: $cpu
- Cores (nproc): $cores
- Memory: $mem
- Kernel: $(uname -r)
- nginx: $nginxv
- wrk: $wrkv
- stoa revision: $rev at build time (working tree dirty: $dirty; server sources crates/, Cargo.toml, Cargo.lock dirty: $src_dirty); binary sha256 ${STOA_SHA:-?}...
- rustc: $(rustc --version 2>/dev/null || echo unknown)
EOF
}

result_dir() {
    local kind="$1" dir
    dir="$REPO_ROOT/bench-results/$(date +%F)-$(hostname)-$kind"
    mkdir -p "$dir"
    echo "$dir"
}
