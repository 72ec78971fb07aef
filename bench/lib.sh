# shellcheck shell=bash
# Globals set here (STOA_PORT, WRK_*, ...) are read by the scripts that source it.
# shellcheck disable=SC2034
# Shared helpers for the bench/*.sh scripts. Source it; do not run it.
#
# This file holds what every script needs (cleanup, prerequisites, building stoa,
# ports, CPU accounting, background load, arguments, the results directory and its
# README); it sources bench/lib/web.sh (nginx, wrk, stoa serve over HTTP) and
# bench/lib/mail.sh (private Postfix and Dovecot instances). They are split so that
# no file grows past ~800 lines and a reader of a mail script need not read the
# wrk parser; every script gets all three by sourcing this one.
#
# Conventions: every helper that starts a server records its PID in SERVER_PIDS so
# `bench_cleanup` (installed as an EXIT/INT/TERM trap by `bench_install_traps`) can
# stop it, whatever way the script ends; servers that are stopped another way (a
# Postfix master) register a stop function with `bench_on_exit`.

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$BENCH_DIR/.." && pwd)"
STOA_BIN="$REPO_ROOT/target/release/stoa"

SERVER_PIDS=()
EXIT_HOOKS=()
BENCH_TMP=""

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# --- cleanup -----------------------------------------------------------------

# wait_exit PID SECS: waits up to SECS seconds for PID to exit; 1 if it still runs.
wait_exit() {
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    ! kill -0 "$1" 2>/dev/null
}

# wait_file FILE [SECS]: waits up to SECS (10) seconds for FILE to be non-empty; 1
# if it never is.
wait_file() {
    local i
    for ((i = 0; i < ${2:-10} * 20; i++)); do
        [[ -s "$1" ]] && return 0
        sleep 0.05
    done
    return 1
}

# read_pidfile FILE: the pid a daemon writes into FILE, once it is there (up to
# 10 s); nothing if it never is.
read_pidfile() {
    wait_file "$1" || true
    tr -d ' \n' 2>/dev/null <"$1" || true
}

# Stops one process: SIGTERM, up to 10 s to exit, then SIGKILL.
stop_pid() {
    local pid="$1"
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_exit "$pid" 10; then
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

# bench_on_exit FUNCTION: bench_cleanup calls FUNCTION first (for servers that
# are not a PID in SERVER_PIDS, such as a daemonized Postfix).
bench_on_exit() { EXIT_HOOKS+=("$1"); }

# wide_port_range: a paced harness opens some 20,000 connections a second from
# one address, and with the default ephemeral ports (32768-60999) the kernel's
# search for a free one among the TIME_WAIT connections became the harness's
# ceiling: at 8,800 connections `connect` was 56 % of its CPU, 43 against 25 µs
# per operation with 1024-65000 (bench-results/2026-12-05-vm-harness-cost-8800*).
# Sets the range to $BENCH_PORT_RANGE (default "1024 65000") for the run and
# restores it on exit; BENCH_PORT_RANGE=keep leaves it alone. Needs root; the
# README's machine list records the range in force.
ORIG_PORT_RANGE=""
wide_port_range() {
    local want="${BENCH_PORT_RANGE:-1024 65000}" now
    [[ "$want" == keep ]] && return 0
    now="$(sysctl -n net.ipv4.ip_local_port_range | tr -s '[:space:]' ' ')"
    now="${now% }"
    [[ "$now" == "$want" ]] && return 0
    if ! sysctl -q -w net.ipv4.ip_local_port_range="$want" 2>/dev/null; then
        log "cannot widen the ephemeral port range (not root?): it stays $now"
        return 0
    fi
    ORIG_PORT_RANGE="$now"
    bench_on_exit restore_port_range
    log "ephemeral ports: $want for this run (was $now)"
}
restore_port_range() {
    [[ -n "$ORIG_PORT_RANGE" ]] && sysctl -q -w net.ipv4.ip_local_port_range="$ORIG_PORT_RANGE"
}

bench_cleanup() {
    local p h
    for h in "${EXIT_HOOKS[@]}"; do
        "$h" || true
    done
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

# Installs Debian packages with apt-get (root only), waiting up to 5 min for a
# dpkg lock another apt run holds.
apt_install() {
    log "installing: $*"
    if [[ "$(id -u)" != 0 ]]; then
        die "missing packages ($*) and not root: install them first"
    fi
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "$@" >/dev/null
}

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
    ((${#missing[@]} == 0)) || apt_install "${missing[@]}"
}

# ensure_inferno: the flame-graph tools (inferno-collapse-perf, inferno-flamegraph),
# installed with cargo when missing.
ensure_inferno() {
    command -v inferno-flamegraph >/dev/null && return
    log "installing inferno (flame graphs) with cargo"
    cargo install --locked --quiet inferno >/dev/null 2>&1 || die "cargo install inferno failed"
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

# --- the start of every script ------------------------------------------------

# bench_cmdline ARGS...: sets CMDLINE, the command as run from the repository root.
bench_cmdline() {
    local a
    CMDLINE="bench/$(basename "$0")"
    for a in "$@"; do CMDLINE+=" $(printf '%q' "$a")"; done
}

# The comment block at the top of FILE (after the #! line) without its "# ":
# the script's usage text.
script_header() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$1"; }
usage() { script_header "$0"; exit "${1:-0}"; }

# parse_args "OPT=VAR ..." ARGS...: `OPT VALUE` sets VAR to VALUE; for an entry
# OPT=VAR=VALUE, the switch OPT (no value) sets VAR to VALUE. -h and --help print
# the usage; anything else is an error.
parse_args() {
    local -A opts=()
    local spec
    for spec in $1; do opts[${spec%%=*}]="${spec#*=}"; done
    shift
    while (($#)); do
        case "$1" in -h | --help) usage 0 ;; esac
        spec=""
        [[ -z "$1" ]] || spec="${opts[$1]:-}"
        if [[ -z "$spec" ]]; then
            echo "unknown argument: $1" >&2
            usage 2
        elif [[ "$spec" == *=* ]]; then
            printf -v "${spec%%=*}" '%s' "${spec#*=}"
            shift
        else
            [[ -n "${2:-}" ]] || die "$1 needs a value"
            printf -v "$spec" '%s' "$2"
            shift 2
        fi
    done
}

# require_positive MESSAGE VALUE...: dies with MESSAGE unless every VALUE is a
# positive integer.
require_positive() {
    local msg="$1" v
    shift
    for v in "$@"; do
        [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "$msg"
    done
}

make_tmp() {
    BENCH_TMP="$(mktemp -d /tmp/stoa-bench.XXXXXX)"
    chmod 755 "$BENCH_TMP"
}

# bench_setup [NOFILE]: cleanup traps, the temp directory, the stoa build, and the
# open-file limit raised to NOFILE (65536; 0 leaves it alone).
# shellcheck disable=SC2120 # the argument is optional
bench_setup() {
    bench_install_traps
    make_tmp
    build_stoa
    if [[ "${1:-65536}" != 0 ]]; then raise_nofile "${1:-65536}"; fi
}

# bench_begin KIND: the results directory OUT (bench-results/DATE-HOST-KIND) and
# RUN_DIR, the temp directory for each harness run's --out (its report.json, tick
# files: the archive keeps the runs, the results directory only README.md,
# summary.txt, raw.csv and small files), then a quiet machine (BENCH_WAIT_IDLE)
# and a first background-load sample.
bench_begin() {
    OUT="$(result_dir "$1")"
    RUN_DIR="$BENCH_TMP/runs"
    mkdir -p "$RUN_DIR"
    wait_idle
    check_background "before the run"
}

# result_dir KIND: bench-results/<date>-<host>-KIND, or $BENCH_OUT when set (a
# second run of a kind on the same day, kept beside the first).
result_dir() {
    local kind="$1" dir
    dir="${BENCH_OUT:-$REPO_ROOT/bench-results/$(date +%F)-$(hostname)-$kind}"
    mkdir -p "$dir"
    echo "$dir"
}

# round_order ROUND ITEM...: sets ORDER to the items in odd rounds and to them
# reversed in even ones (whoever went first goes last).
round_order() {
    local r="$1" i
    shift
    ORDER=("$@")
    if ((r % 2 == 0)); then
        ORDER=()
        for ((i = $#; i >= 1; i--)); do ORDER+=("${!i}"); done
    fi
}

# run_peers WORKLOAD CMD:PKG... -- ARGS...: `stoa bench peers --workload WORKLOAD
# ARGS...` from the repository root (results in bench-results/<date>-<host>-WORKLOAD,
# or $BENCH_OUT), once the commands it needs are installed and stoa is built;
# BENCH_WAIT_IDLE=SECS becomes `--wait-idle SECS`, the shims' `--duration SECS`
# becomes `--run-time SECS`, and -h or --help prints the script's usage. The
# comparison itself (servers, rounds, pinning, CPU, the result directory) is Rust.
run_peers() {
    local workload="$1" needs=() wait=() args=()
    shift
    while [[ "$1" != -- ]]; do needs+=("$1"); shift; done
    shift
    while (($#)); do
        case "$1" in
        -h | --help) usage 0 ;;
        --duration) args+=(--run-time "${2:?--duration needs a value}"); shift 2 ;;
        *) args+=("$1"); shift ;;
        esac
    done
    set -- "${args[@]}"
    bench_install_traps
    ensure_commands "${needs[@]}" git:git
    build_stoa
    cd "$REPO_ROOT" || die "cannot enter $REPO_ROOT"
    [[ "${BENCH_WAIT_IDLE:-0}" =~ ^[0-9]+$ ]] || die "BENCH_WAIT_IDLE must be a number of seconds"
    ((${BENCH_WAIT_IDLE:-0} == 0)) || wait=(--wait-idle "$BENCH_WAIT_IDLE")
    "$STOA_BIN" bench peers --workload "$workload" ${BENCH_OUT:+--out "$BENCH_OUT"} "${wait[@]}" "$@"
}

# --- ports -----------------------------------------------------------------------

# free_port [IP]: a TCP port that was free a moment ago on IP (127.0.0.1 by default).
free_port() {
    python3 -c 'import socket, sys
s = socket.socket()
s.bind((sys.argv[1], 0))
print(s.getsockname()[1])' "${1:-127.0.0.1}"
}

# wait_port PORT PID [IP]: until something accepts TCP connections on IP:PORT
# (127.0.0.1 by default; 10 s), or PID dies.
wait_port() {
    local port="$1" pid="$2" ip="${3:-127.0.0.1}" i
    for ((i = 0; i < 200; i++)); do
        kill -0 "$pid" 2>/dev/null || return 1
        if (exec 3<>"/dev/tcp/$ip/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# show_cmd ARGS...: the command line, quoted, as recorded in a results directory:
# the stoa binary as `stoa`, the temp dir as $TMP, the results as $OUT.
show_cmd() {
    local s="" a
    for a in "$@"; do s+=" $(printf '%q' "$a")"; done
    s="${s# }"
    s="${s//"$STOA_BIN"/stoa}"
    s="${s//"$BENCH_TMP"/\$TMP}"
    printf '%s\n' "${s//"$OUT"/\$OUT}"
}

# --- slapd (the LDAP tier of the mail benchmarks) ----------------------------------

# slapd_conf DIR USERS: writes DIR/slapd.conf, an mdb database under DIR/db for
# the caller's $BASE with $ADMIN_DN as root (password admin-secret), the schemas
# Stoa's users need (inetOrgPerson, misc.schema's inetLocalMailRecipient), the
# indexes of its lookups, and userPassword readable by binds only; sized for
# USERS entries.
slapd_conf() {
    local dir="$1" users="$2" maxsize
    mkdir -p "$dir/db"
    # maxsize: the map's upper bound, not an allocation; 4 KiB a user is twice
    # what 1.5 M users take, with 1 GiB at least.
    maxsize=$((users * 4096 > 1073741824 ? users * 4096 : 1073741824))
    cat >"$dir/slapd.conf" <<EOF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/misc.schema
pidfile $dir/slapd.pid
argsfile $dir/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
tool-threads 2
database mdb
maxsize $maxsize
suffix "$BASE"
rootdn "$ADMIN_DN"
rootpw admin-secret
directory $dir/db
index objectClass eq
index mail eq
index mailLocalAddress eq
access to attrs=userPassword
  by anonymous auth
  by * none
access to * by * read
EOF
}

# slapd_load DIR LDIF SECONDS: `slapadd -q` of LDIF into DIR's database within
# SECONDS; dies on failure.
slapd_load() {
    timeout --kill-after=10 "$3" /usr/sbin/slapadd -q -f "$1/slapd.conf" -l "$2" \
        >"$BENCH_TMP/slapadd.log" 2>&1 ||
        die "slapadd failed or timed out: $(tail -n 5 "$BENCH_TMP/slapadd.log")"
}

# slapd_start DIR [IP]: slapd on DIR's configuration, on a free port of IP
# (127.0.0.1 by default), stopped with the other servers at exit. Sets LDAP_PORT
# and SLAPD_PID.
slapd_start() {
    local dir="$1" ip="${2:-127.0.0.1}"
    LDAP_PORT="$(free_port "$ip")"
    /usr/sbin/slapd -f "$dir/slapd.conf" -h "ldap://$ip:$LDAP_PORT/" -d 0 \
        2>"$BENCH_TMP/slapd.log" </dev/null &
    SLAPD_PID=$!
    SERVER_PIDS+=("$SLAPD_PID")
    wait_port "$LDAP_PORT" "$SLAPD_PID" "$ip" ||
        die "slapd did not listen: $(tail -n 5 "$BENCH_TMP/slapd.log")"
}

# start_stoa_with ERRLOG "SCHEME..." ARGS...: runs `stoa ARGS...` in the background
# (standard error to ERRLOG) and waits up to 15 s for its "listening on
# SCHEME://127.0.0.1:PORT" line for every SCHEME (http, https, smtp, pop3). Sets
# STOA_PID and STOA_PORTS[SCHEME].
declare -A STOA_PORTS=()
start_stoa_with() {
    local errlog="$1" schemes="$2" i s missing
    shift 2
    : >"$errlog"
    "$STOA_BIN" "$@" 2>>"$errlog" &
    STOA_PID=$!
    SERVER_PIDS+=("$STOA_PID")
    STOA_PORTS=()
    for ((i = 0; i < 300; i++)); do
        missing=""
        for s in $schemes; do
            [[ -n "${STOA_PORTS[$s]:-}" ]] && continue
            STOA_PORTS[$s]="$(grep -m1 -o "listening on $s://127\.0\.0\.1:[0-9]*" "$errlog" | sed 's/.*://' || true)"
            [[ -n "${STOA_PORTS[$s]}" ]] || missing+=" $s"
        done
        [[ -z "$missing" ]] && return 0
        kill -0 "$STOA_PID" 2>/dev/null || die "stoa exited at startup: $(tail -n 5 "$errlog")"
        sleep 0.05
    done
    die "stoa did not report listening ($schemes) within 15 s: $(tail -n 5 "$errlog")"
}

# --- CPU accounting ------------------------------------------------------------------

# The children of a process.
child_pids() {
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

# proc_stat_fields PID: the fields of /proc/PID/stat after the command name (the
# state first: utime is the 12th, stime the 13th); nothing when PID is gone.
proc_stat_fields() {
    local rest
    rest="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
    echo "${rest##*) }"
}

# proc_ticks PID [1]: CPU clock ticks of PID (all threads), with 1 also those of its
# reaped children (cutime, cstime); 0 when it is gone.
proc_ticks() {
    local a
    read -r -a a <<<"$(proc_stat_fields "$1")"
    ((${#a[@]})) || { echo 0; return 0; }
    echo $((a[11] + a[12] + ${2:-0} * (a[13] + a[14])))
}

# proc_sys_ticks PID: the system-time (kernel) clock ticks of PID; 0 when it is gone.
proc_sys_ticks() {
    local a
    read -r -a a <<<"$(proc_stat_fields "$1")"
    ((${#a[@]})) || { echo 0; return 0; }
    echo "${a[12]}"
}

# tree_ticks PID: the ticks of a master that forks (Postfix, Dovecot): its own, its
# reaped children's and its live children's.
tree_ticks() {
    local t c
    t="$(proc_ticks "$1" 1)"
    for c in $(child_pids "$1"); do
        t=$((t + $(proc_ticks "$c")))
    done
    echo "$t"
}

# cpu_snapshot PIDS... -> "TOTAL BUSY OURS" in clock ticks: all CPU time and busy
# CPU time (from /proc/stat, steal excluded), and the CPU time of the given processes
# (all threads; tree:PID for PID's whole tree_ticks) plus this shell's own and its
# finished children's (wrk, smtp-source and find run as those).
cpu_snapshot() {
    local p ours=0 u n s idle iow irq sirq
    read -r _ u n s idle iow irq sirq _ </proc/stat
    for p in "$@"; do
        if [[ "$p" == tree:* ]]; then
            ours=$((ours + $(tree_ticks "${p#tree:}")))
        else
            ours=$((ours + $(proc_ticks "$p")))
        fi
    done
    ours=$((ours + $(proc_ticks $$ 1)))
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

# Runs with other processes above this % of the CPU count as disturbed (see
# measure_row and BENCH_WAIT_IDLE).
BUSY_LIMIT=15

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

# whole_disks_sum FIELD: /proc/diskstats field FIELD summed over the whole disks
# (vda, sda, nvme0n1; not their partitions): 6 sectors read, 12 I/Os in progress.
whole_disks_sum() {
    awk -v f="$1" '$3 ~ /^(([shv]|xv)d[a-z]+|nvme[0-9]+n[0-9]+)$/ { s += $f } END { print s + 0 }' /proc/diskstats
}

# settle_disk LABEL: writes the dirty pages to disk (sync, at most 10 min) and waits
# (at most 60 s) until no whole disk has I/O in flight, so that the writeback of an
# earlier run (a store filled or deleted) does not fall into the next one; logs how
# long it took with the load average, and appends that to BACKGROUND_NOTES.
settle_disk() {
    local label="$1" start=$SECONDS inflight i
    timeout 600 sync || log "!!! sync did not finish within 600 s ($label)"
    for ((i = 0; i < 60; i++)); do
        inflight="$(whole_disks_sum 12)"
        ((inflight == 0)) && break
        sleep 1
    done
    BACKGROUND_NOTES+=("$label: disk settled in $((SECONDS - start)) s ($(awk '/^Dirty:/ { print $2 }' /proc/meminfo) kB dirty after; load average $(cut -d' ' -f1-3 /proc/loadavg))")
    log "${BACKGROUND_NOTES[-1]}"
}

# Markdown list of the background-load checks.
describe_background() {
    local n
    for n in "${BACKGROUND_NOTES[@]}"; do echo "- $n"; done
}

# --- provenance and the README ---------------------------------------------------------

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
- Ephemeral ports (net.ipv4.ip_local_port_range): $(sysctl -n net.ipv4.ip_local_port_range 2>/dev/null | tr -s '[:space:]' ' ' || echo unknown)
- nginx: $nginxv
- wrk: $wrkv
- stoa revision: $rev at build time (working tree dirty: $dirty; server sources crates/, Cargo.toml, Cargo.lock dirty: $src_dirty); binary sha256 ${STOA_SHA:-?}...
- rustc: $(rustc --version 2>/dev/null || echo unknown)
EOF
}

# readme_header TITLE [LABEL]: the top of a results README: title, the command
# (LABEL: "Command (from the repository root)"), date and the machine list.
readme_header() {
    echo "# $1"
    echo
    echo "${2:-Command (from the repository root)}: \`$CMDLINE\`"
    echo
    echo "Date: $(date -Is)"
    echo
    echo "## Machine"
    echo
    describe_machine
}

# readme_section NAME: a blank line, "## NAME" and a blank line.
readme_section() {
    echo
    echo "## $1"
    echo
}

readme_background() {
    readme_section "Background load"
    describe_background
}

# readme_summary [HEADING]: the last section, $OUT/summary.txt as a code block.
# shellcheck disable=SC2120 # the argument is optional
readme_summary() {
    readme_section "${1:-Summary}"
    echo '```'
    cat "$OUT/summary.txt"
    echo '```'
}

# save_config SRC DEST: a copy of a generated configuration with the temp
# directory written as $TMP.
save_config() { sed "s#$BENCH_TMP#\$TMP#g" "$1" >"$2"; }

results_done() { log "results in ${OUT#"$REPO_ROOT"/}"; }

# shellcheck source=bench/lib/web.sh
source "$BENCH_DIR/lib/web.sh"
# shellcheck source=bench/lib/mail.sh
source "$BENCH_DIR/lib/mail.sh"
