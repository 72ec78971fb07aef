# shellcheck shell=bash
# Globals set here (NGINX_PID, WRK_*, ...) are read by the scripts.
# shellcheck disable=SC2034
# The web half of the bench helpers: nginx, stoa serve over HTTP, wrk. Sourced by
# bench/lib.sh (which defines log, die, SERVER_PIDS, wait_port, cpu_snapshot ...);
# do not source it alone.

# --- docroot ---------------------------------------------------------------------

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

# --- TLS -------------------------------------------------------------------------

# make_tls_pair DIR -> sets CERT and KEY (in DIR): one ECDSA P-256 end-entity
# certificate for localhost and 127.0.0.1, which both servers of a comparison use.
make_tls_pair() {
    CERT="$1/cert.pem" KEY="$1/key.pem"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$KEY" -out "$CERT" \
        -days 2 -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
        -addext "basicConstraints=critical,CA:FALSE" 2>/dev/null
}

# --- nginx -----------------------------------------------------------------------

nginx_bin() {
    if command -v nginx >/dev/null 2>&1; then command -v nginx; else echo /usr/sbin/nginx; fi
}

# nginx's listener flags: `deferred` is TCP_DEFER_ACCEPT, which stoa sets by
# default ([web] defer_accept), so both servers are accepted the same way;
# NGINX_DEFERRED=0 leaves it out.
nginx_listen_flags() {
    if [[ "${NGINX_DEFERRED:-1}" == 0 ]]; then echo reuseport; else echo reuseport deferred; fi
}

# write_nginx_conf DIR PORT DOCROOT KEEPALIVE_TIMEOUT WORKER_CONNECTIONS ACCESS_LOG(off|FILE) [EXTRA_MAIN_DIRECTIVES]
# Writes DIR/nginx.conf: one worker, foreground, every path inside DIR.
write_nginx_conf() {
    local dir="$1" port="$2" docroot="$3" ka="$4" wc="$5" alog="$6" extra="${7:-}"
    local user_line="" alog_line flags
    flags="$(nginx_listen_flags)"
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
        listen 127.0.0.1:$port $flags;
        root $docroot;
        location / { }
    }
}
EOF
}

# write_nginx_tls_conf DIR PORT DOCROOT LISTEN_FLAGS SSL_DIRECTIVES: write_nginx_conf
# (access log off, keep-alive 75 s) with its listener on HTTPS: `listen ...
# $(nginx_listen_flags) LISTEN_FLAGS` ("ssl", "ssl http2"), CERT and KEY from make_tls_pair, TLS 1.2 and
# 1.3, then SSL_DIRECTIVES; as many connections as the open-file limit allows.
write_nginx_tls_conf() {
    local dir="$1" port="$2" docroot="$3" flags="$4" ssl="$5" limit
    limit="$(ulimit -n)"
    write_nginx_conf "$dir" "$port" "$docroot" 75s "$limit" off "worker_rlimit_nofile $limit;"
    sed -i "s|listen 127.0.0.1:$port $(nginx_listen_flags);|listen 127.0.0.1:$port $(nginx_listen_flags) $flags;\n        \
ssl_certificate $CERT;\n        ssl_certificate_key $KEY;\n        ssl_protocols TLSv1.2 TLSv1.3;\n        \
$ssl|" "$dir/nginx.conf"
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
        pids="$(child_pids "$master")"
        if [[ -n "$pids" ]]; then
            echo "$pids"
            return 0
        fi
        sleep 0.05
    done
}

# nginx_up DIR DOCROOT KEEPALIVE_TIMEOUT WORKER_CONNECTIONS ACCESS_LOG [EXTRA]: a free
# port (NGINX_PORT), DIR/nginx.conf (see write_nginx_conf) and nginx started on it.
nginx_up() {
    local dir="$1"
    shift
    NGINX_PORT="$(free_port)"
    mkdir -p "$dir"
    write_nginx_conf "$dir" "$NGINX_PORT" "$@"
    start_nginx "$dir" "$NGINX_PORT"
}

# --- pinning -----------------------------------------------------------------------

# default_pinning: unless --server-cpus / --harness-cpus set them (or --no-pin
# cleared PIN), SERVER_CPUS=0 and HARNESS_CPUS=the other CPUs, so that each
# server has one core and the harness the rest. On a one-CPU machine nothing is
# pinned (PIN=0).
default_pinning() {
    local n
    n="$(nproc --all 2>/dev/null || echo 1)"
    if ((n < 2)); then
        ((PIN == 0)) || log "one CPU: nothing pinned"
        PIN=0
    fi
    ((PIN)) || { SERVER_CPUS=""; HARNESS_CPUS=""; return 0; }
    [[ -n "$SERVER_CPUS" ]] || SERVER_CPUS=0
    if [[ -z "$HARNESS_CPUS" ]]; then
        if ((n == 2)); then HARNESS_CPUS=1; else HARNESS_CPUS="1-$((n - 1))"; fi
    fi
    log "pinning: servers on CPU(s) $SERVER_CPUS, harness on CPU(s) $HARNESS_CPUS"
}

# pin_tree CPUS PID: pins PID, every thread of it and each of its children (an
# nginx master's workers) to CPUS (taskset's list syntax).
pin_tree() {
    local cpus="$1" pid="$2" p
    for p in "$pid" $(child_pids "$pid"); do
        taskset -a -c -p "$cpus" "$p" >/dev/null 2>&1 || die "taskset -a -c -p $cpus $p failed"
    done
}

# harness_pin_args: the `stoa bench web` flags that pin the harness (none with PIN=0).
harness_pin_args() {
    ((PIN)) && [[ -n "$HARNESS_CPUS" ]] && printf '%s\n' --harness-cpus "$HARNESS_CPUS"
    return 0
}

# pinning_readme: the README lines saying where each ran and how a trial is judged.
pinning_readme() {
    if ((PIN)); then
        echo "- Pinned: each server (all its threads and processes, \`taskset -a -c -p\`) on CPU(s) $SERVER_CPUS,"
        echo "  the harness on CPU(s) $HARNESS_CPUS (\`--harness-cpus\`). A trial whose harness used more than 70 % of"
        echo "  its cores over the iteration is marked harness-bound: its result may be the harness's limit, and a"
        echo "  score it reached or ended is reported as a lower bound, not as the server's."
    else
        echo "- Not pinned (\`--no-pin\`, or one CPU): the harness and the server share the machine's CPUs."
    fi
}

# --- stoa serve ------------------------------------------------------------------

# start_stoa LOGFILE ARGS... -> sets STOA_PID and STOA_PORT. Listens on 127.0.0.1:0
# and reads the real port from the "listening" line on standard error.
start_stoa() {
    local errlog="$1"
    shift
    start_stoa_with "$errlog" http serve --listen 127.0.0.1:0 "$@"
    # shellcheck disable=SC2153 # set by start_stoa_with in bench/lib.sh
    STOA_PORT="${STOA_PORTS[http]}"
}

# --- wrk ---------------------------------------------------------------------------

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
    # shellcheck disable=SC2086 # WRK_CPUS: one word, or none
    timeout --foreground --kill-after=5 "$((dur + 30))" ${WRK_CPUS:+taskset -c $WRK_CPUS} wrk "${args[@]}" "$url" >"$out" 2>&1 || rc=$?
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

# The processes whose CPU time is a server's (SERVER -> "PID [PID...]": stoa's
# PID, nginx's worker). With an entry, measure_row records the server's CPU per
# request and wrk's CPU over the run.
declare -A SERVER_CPU_PIDS=()
# wrk's CPUs (a taskset list); empty: not pinned.
WRK_CPUS=""

# ticks_of PID...: the CPU clock ticks of the PIDs together.
ticks_of() {
    local p t=0
    for p in "$@"; do t=$((t + $(proc_ticks "$p"))); done
    echo "$t"
}

# sys_ticks_of PID...: the PIDs' system-time (kernel) clock ticks together.
sys_ticks_of() {
    local p t=0
    for p in "$@"; do t=$((t + $(proc_sys_ticks "$p"))); done
    echo "$t"
}

# children_ticks: the CPU ticks of this shell's finished children (wrk, run under
# timeout, is one once it has been waited for).
children_ticks() {
    echo $(($(proc_ticks $$ 1) - $(proc_ticks $$)))
}

# measure_row ROUND ROW PATH MODE CONNS SERVER... : runs wrk against each SERVER in
# turn (URL ${SCHEME:-http}://127.0.0.1:${PORT[SERVER]}PATH) and appends the results to $RAW and
# the wrk outputs to $WRKLOG. Calls `after_run SERVER` (defined by the script) after
# each run. For a SERVER in SERVER_CPU_PIDS the line also gets the server's CPU per
# request (µs, utime + stime over the run / requests), wrk's CPU (% of one core):
# near 100 % of wrk's cores the row measured wrk, not the server; and the share of
# the server's CPU that was kernel time (stime, %). With BENCH_WAIT_IDLE set, a pair in which other processes used more than
# BUSY_LIMIT % of the CPU is thrown away (kept in wrk.log, marked) and measured
# again after waiting for the machine to go quiet, up to 3 attempts.
# PORT (associative: server -> port), DURATION, THREADS, RAW and WRKLOG are the
# calling script's globals.
# shellcheck disable=SC2153
measure_row() {
    local r="$1" row="$2" path="$3" mode="$4" conns="$5" attempt s busy msg pair lines t0 t1 k0 k1 c0 c1 w0 w1 cpu
    shift 5
    pair="$BENCH_TMP/pair.log"
    for ((attempt = 1; ; attempt++)); do
        lines=()
        busy=0
        : >"$pair"
        for s in "$@"; do
            # shellcheck disable=SC2086 # a list of PIDs
            t0="$(ticks_of ${SERVER_CPU_PIDS[$s]:-})" k0="$(sys_ticks_of ${SERVER_CPU_PIDS[$s]:-})"
            c0="$(children_ticks)" w0="$(date +%s%N)"
            run_wrk "$BENCH_TMP/wrk-out.txt" "$DURATION" "$THREADS" "$conns" "${SCHEME:-http}://127.0.0.1:${PORT[$s]}$path" "$mode"
            # shellcheck disable=SC2086
            t1="$(ticks_of ${SERVER_CPU_PIDS[$s]:-})" k1="$(sys_ticks_of ${SERVER_CPU_PIDS[$s]:-})"
            c1="$(children_ticks)" w1="$(date +%s%N)"
            cpu=",,"
            if [[ -n "${SERVER_CPU_PIDS[$s]:-}" ]]; then
                cpu="$(awk -v t="$((t1 - t0))" -v k="$((k1 - k0))" -v c="$((c1 - c0))" -v w="$((w1 - w0))" \
                    -v hz="$CLK_TCK" -v rps="$WRK_RPS" -v d="$DURATION" 'BEGIN {
                        n = rps * d; printf "%s,%.0f,%s", (n > 0 ? sprintf("%.2f", t / hz * 1e6 / n) : ""),
                            100 * c / hz / (w / 1e9), (t > 0 ? sprintf("%.1f", 100 * k / t) : "") }')"
            fi
            {
                echo "=== round $r row $row server $s (attempt $attempt; other processes used ${WRK_OTHER_CPU}% of the CPU)"
                cat "$BENCH_TMP/wrk-out.txt"
            } >>"$pair"
            lines+=("$r,$row,$s,$WRK_RPS,$WRK_TRANSFER,$WRK_ERRORS,$WRK_OTHER_CPU,$cpu")
            msg="round $r $row $s: $WRK_RPS req/s (other CPU ${WRK_OTHER_CPU}%)"
            [[ "$cpu" == ,, ]] || msg+="; server µs/request, wrk % of a core, server kernel %: $cpu"
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

# warm_up CONNS FILE...: 2 s of wrk per server in SERVERS (the calling script's
# list, ports in PORT) and file (/FILE.bin), results thrown away.
warm_up() {
    local conns="$1" s f
    shift
    log "warm-up: 2 s of wrk per server and file"
    for s in "${SERVERS[@]}"; do
        for f in "$@"; do
            run_wrk "$BENCH_TMP/warmup.txt" 2 "$THREADS" "$conns" "${SCHEME:-http}://127.0.0.1:${PORT[$s]}/$f.bin"
        done
    done
}

# servers_alive [PREFIX]: dies unless every server in SERVERS (pids in PID) still
# runs; the message names it "PREFIX SERVER".
# shellcheck disable=SC2120 # the argument is optional
servers_alive() {
    local s
    for s in "${SERVERS[@]}"; do
        kill -0 "${PID[$s]}" 2>/dev/null || die "${1:+$1 }$s (pid ${PID[$s]}) died"
    done
}

# The columns of raw.csv for the scripts that compare two servers row by row (the
# format bench/summarize.py reads).
RAW_COLUMNS="round,row,server,req_per_sec,transfer,errors,other_cpu_pct,server_cpu_us_per_op,harness_cpu_pct,server_kernel_pct"
CLK_TCK="$(getconf CLK_TCK)"

# new_raw_csv [COLUMNS]: RAW=$OUT/raw.csv with its header line (RAW_COLUMNS).
# shellcheck disable=SC2120 # the argument is optional
new_raw_csv() {
    RAW="$OUT/raw.csv"
    echo "${1:-$RAW_COLUMNS}" >"$RAW"
}
