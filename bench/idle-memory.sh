#!/usr/bin/env bash
# Memory per idle connection: stoa vs nginx (HTTP keep-alive), or stoa vs Dovecot
# (IMAP sessions in IDLE); user space only.
#
#   bench/idle-memory.sh [--protocol http|imap] [--rounds 3] [--connections N] [--settle SECS]
#                        [--users 100] [--messages 5]
#
# http (the default; N 10000): four variants, each in a fresh server process,
# interleaved over the rounds: nginx (1 worker; its worker process is measured) and
# stoa (--workers 1), each with the access log off and on. bench/idle-memory.py
# opens the connections, makes one request on each and measures. Results go to
# bench-results/<date>-<host>-idle-memory/.
#
# imap (N 10000, or less when the open-file limit is below N + 800, see below): stoa (`stoa serve --imap-listen`, one process) against Dovecot's
# imapd (a private instance: one imap process per session), each fresh for every
# run, interleaved over the rounds, over --users K users (userK@idle.test, plain
# passwords) whose INBOX holds --messages M messages (the same on both, appended
# over IMAP before the rounds). Each connection logs in, selects INBOX and stays in
# IDLE; the N sessions are spread over the K users. Measured: stoa's process;
# Dovecot's master and every process below it (Pss summed over them is the fair
# figure). Results go to bench-results/<date>-<host>-idle-memory-imap/. stoa holds
# one descriptor per session in IDLE (the socket: the folder's directory and index
# are released while it waits), so N sessions need about N + 800 open files (the
# sessions being opened hold three); without --connections N is
# 10000 if the hard limit (`ulimit -Hn`) allows it, else the most (a multiple of
# 500) it does; with --connections above it the run goes ahead and says when the
# limit stopped it.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PROTOCOL=http
ROUNDS=3
CONNS=""
SETTLE=3
IMAP_USERS=100
IMAP_MESSAGES=5
bench_cmdline "$@"
parse_args "--protocol=PROTOCOL --rounds=ROUNDS --connections=CONNS --settle=SETTLE --users=IMAP_USERS
    --messages=IMAP_MESSAGES" "$@"
case "$PROTOCOL" in
http | imap) ;;
*) die "--protocol is http or imap" ;;
esac
# Given, or the protocol's default (imap's: imap_default_conns, after the limits).
CONNS_GIVEN="$CONNS"
if [[ "$PROTOCOL" == http ]]; then CONNS="${CONNS:-10000}"; fi
require_positive "rounds, connections, settle, users and messages must be positive integers" \
    "$ROUNDS" "${CONNS:-1}" "$SETTLE" "$IMAP_USERS" "$IMAP_MESSAGES"
# --- imap: stoa vs Dovecot, sessions in IDLE --------------------------------------

IMAP_DOMAIN=idle.test
IMAP_PASSWORD="idle-bench"
# Dovecot's mail belongs to nobody:nogroup (as bench peers's Dovecot run as root).
IMAP_MAIL_ID=65534

# Open files per session in IDLE: the client holds one, stoa three (the socket,
# the mailbox's directory and its index, measured at 300 sessions: 923
# descriptors against 23 before), each Dovecot imap process its own few (its log,
# anvil and stats services one per process).
STOA_FDS_PER_SESSION=1
# Beyond those: listeners, logs, and the folder's two descriptors of each session
# being opened (idle-memory.py opens 256 at a time; the folder is released once the
# session is in IDLE).
STOA_FDS_EXTRA=800

# imap_default_conns: CONNS when not given (10000 if the open-file limit holds
# stoa's N + 800, else the most in steps of 500 it does), and FD_NOTE, what the
# limit allows, for the log and the README. Dies when not even the client fits.
imap_default_conns() {
    local nofile most
    nofile="$(ulimit -n)"
    [[ "$nofile" == unlimited ]] && nofile=1048576
    most=$(((nofile - STOA_FDS_EXTRA) / STOA_FDS_PER_SESSION / 500 * 500))
    if [[ -z "$CONNS_GIVEN" ]]; then
        CONNS=10000
        if ((most < CONNS)); then
            ((most >= 500)) || die "open-file limit $nofile is too low for even 500 IMAP sessions (raise ulimit -Hn)"
            CONNS="$most"
            log "!!! open-file limit $nofile (hard $(ulimit -Hn)): stoa needs $STOA_FDS_PER_SESSION per session, so" \
                "$CONNS sessions instead of 10000 (10000 need $((10000 * STOA_FDS_PER_SESSION + STOA_FDS_EXTRA)); raise ulimit -Hn)"
        fi
    fi
    ((nofile >= CONNS + 200)) ||
        die "open-file limit $nofile (hard $(ulimit -Hn)) is too low for $CONNS sessions: the client alone needs $((CONNS + 200))"
    FD_NOTE="open-file limit $nofile (hard $(ulimit -Hn)); stoa needs ~$STOA_FDS_PER_SESSION per session in IDLE,"
    FD_NOTE+=" $((CONNS * STOA_FDS_PER_SESSION + STOA_FDS_EXTRA)) for $CONNS"
    if ((CONNS * STOA_FDS_PER_SESSION + STOA_FDS_EXTRA > nofile)); then
        FD_NOTE+=": **above the limit**, stoa's runs may fail for want of descriptors (see the status below)"
        log "!!! $FD_NOTE"
    elif [[ -z "$CONNS_GIVEN" && "$CONNS" != 10000 ]]; then
        FD_NOTE+=" (the default 10000 would need $((10000 * STOA_FDS_PER_SESSION + STOA_FDS_EXTRA)): lowered to $CONNS)"
    fi
}

# imap_setup: the two servers' users and configuration under BENCH_TMP, and
# their INBOXes filled (each server started once for that, then stopped).
imap_setup() {
    local i
    STOA_IMAP_DIR="$BENCH_TMP/stoa-imap"
    DV_IMAP_DIR="$BENCH_TMP/dovecot-imap"
    mkdir -p "$STOA_IMAP_DIR" "$DV_IMAP_DIR"/{base,state,mail}
    # stoa: plain passwords, no cap on one user's sessions or one address's
    # connections (every session comes from 127.0.0.1, N of them over K users),
    # room for N connections on one worker.
    cat >"$STOA_IMAP_DIR/stoa.toml" <<EOF
[directory]
allow_plain_passwords = true

[imap]
allow_plaintext_auth = true
max_sessions_per_user = 0
max_connections_per_client = 0
max_connections = $((CONNS + 100))
EOF
    log "adding $IMAP_USERS users to stoa's mail directory (stoa user add --scheme plain)"
    for ((i = 1; i <= IMAP_USERS; i++)); do
        printf '%s\n' "$IMAP_PASSWORD" | "$STOA_BIN" user add --config "$STOA_IMAP_DIR/stoa.toml" \
            --mail-dir "$STOA_IMAP_DIR/mail" --scheme plain --password-stdin "user$i@$IMAP_DOMAIN" \
            >>"$STOA_IMAP_DIR/user-add.log" 2>&1 || die "stoa user add failed: $(tail -n 3 "$STOA_IMAP_DIR/user-add.log")"
    done
    # Dovecot: bench peers's way (a passwd-file for passdb and userdb, {PLAIN}
    # passwords, Maildir under each home).
    awk -v n="$IMAP_USERS" -v d="$IMAP_DOMAIN" -v pw="$IMAP_PASSWORD" -v id="$IMAP_MAIL_ID" -v home="$DV_IMAP_DIR/mail" \
        'BEGIN { for (i = 1; i <= n; i++) printf "user%d@%s:{PLAIN}%s:%d:%d::%s/user%d@%s::\n", i, d, pw, id, id, home, i, d }' \
        >"$DV_IMAP_DIR/passwd"
    chown root:dovecot "$DV_IMAP_DIR/passwd"
    chmod 640 "$DV_IMAP_DIR/passwd"
    chown "$IMAP_MAIL_ID:$IMAP_MAIL_ID" "$DV_IMAP_DIR/mail"
    chmod 755 "$DV_IMAP_DIR"
    imap_write_dovecot_conf
    dovecot_check "$DV_IMAP_DIR/dovecot.conf" "$DV_IMAP_DIR/dovecot-n.txt"
    save_config "$STOA_IMAP_DIR/stoa.toml" "$OUT/stoa.toml"
    save_config "$DV_IMAP_DIR/dovecot.conf" "$OUT/dovecot.conf"
    save_config "$DV_IMAP_DIR/dovecot-n.txt" "$OUT/dovecot-n.txt"

    local s
    for s in stoa dovecot; do
        imap_server_up "$s" "$BENCH_TMP/fill-$s"
        log "$s: appending $IMAP_MESSAGES message(s) to each of $IMAP_USERS INBOXes"
        timeout --kill-after=5 $((120 + IMAP_USERS * IMAP_MESSAGES / 10)) python3 "$BENCH_DIR/idle-memory.py" \
            --imap "user%d@$IMAP_DOMAIN:$IMAP_PASSWORD" --imap-users "$IMAP_USERS" --imap-fill "$IMAP_MESSAGES" \
            "127.0.0.1:$IMAP_PORT" >"$BENCH_TMP/fill-$s.out" 2>&1 ||
            die "filling $s's INBOXes failed: $(tail -n 3 "$BENCH_TMP/fill-$s.out")"
        imap_server_down
    done
}

# DV_IMAP_DIR/dovecot.conf for CONNS sessions: Dovecot's own process model (an
# imap process per session, no hibernation) with every limit above CONNS.
imap_write_dovecot_conf() {
    local limit=$((CONNS + 100)) clients=$((CONNS + 1000))
    {
        dovecot_conf_head "Private Dovecot for bench/idle-memory.sh --protocol imap (\$TMP = the temp dir)." \
            "$DV_IMAP_DIR" "stoa-idle-memory-$$" "$DV_IMAP_DIR/dovecot.log" imap
        cat <<EOF
default_internal_user = dovecot
default_login_user = dovenull
passdb {
  driver = passwd-file
  args = $DV_IMAP_DIR/passwd
}
userdb {
  driver = passwd-file
  args = $DV_IMAP_DIR/passwd
}
mail_location = maildir:~/Maildir
# Every session comes from 127.0.0.1, N of them over $IMAP_USERS users.
mail_max_userip_connections = $limit
# One imap process per session ($CONNS sessions); every service that each of them
# talks to (log, anvil, stats, auth, config) takes that many clients.
default_process_limit = $limit
default_client_limit = $clients
EOF
        dovecot_conf_imap_login 0 "$(nproc)" "client_limit = 1000"
        dovecot_conf_imap "$limit" 0
    } >"$DV_IMAP_DIR/dovecot.conf"
}

# imap_server_up stoa|dovecot DIR: a fresh server on a free port; sets IMAP_PORT,
# IMAP_PID (what to stop) and IMAP_MEASURE (idle-memory.py's --pid or --pid-tree).
imap_server_up() {
    local which="$1" dir="$2"
    mkdir -p "$dir"
    case "$which" in
    stoa)
        start_stoa_with "$dir/stderr.log" imap serve --config "$STOA_IMAP_DIR/stoa.toml" \
            --mail-dir "$STOA_IMAP_DIR/mail" --imap-listen 127.0.0.1:0
        IMAP_PORT="${STOA_PORTS[imap]}"
        IMAP_PID="$STOA_PID"
        IMAP_MEASURE=(--pid "$STOA_PID")
        IMAP_LOG="$dir/stderr.log"
        ;;
    dovecot)
        IMAP_PORT="$(free_port)"
        imap_set_dovecot_port "$IMAP_PORT"
        : >"$DV_IMAP_DIR/dovecot.log"
        "$DOVECOT_BIN" -c "$DV_IMAP_DIR/dovecot.conf" >"$dir/start.log" 2>&1 ||
            die "dovecot failed to start: $(tail -n 5 "$dir/start.log" "$DV_IMAP_DIR/dovecot.log")"
        IMAP_PID="$(read_pidfile "$DV_IMAP_DIR/base/master.pid")"
        [[ "$IMAP_PID" =~ ^[0-9]+$ ]] || die "no Dovecot master pid: $(tail -n 5 "$DV_IMAP_DIR/dovecot.log")"
        DV_IMAP_UP=1
        wait_port "$IMAP_PORT" "$IMAP_PID" || die "dovecot did not listen: $(tail -n 5 "$DV_IMAP_DIR/dovecot.log")"
        IMAP_MEASURE=(--pid-tree "$IMAP_PID")
        IMAP_LOG="$DV_IMAP_DIR/dovecot.log"
        ;;
    esac
    IMAP_WHICH="$which"
}

# The imap-login listener's port in DV_IMAP_DIR/dovecot.conf (a fresh free port
# for every run).
imap_set_dovecot_port() {
    awk -v p="$1" '/inet_listener imap \{/ { l = 1 } l && /^ *port = / { sub(/[0-9]+$/, p); l = 0 } { print }' \
        "$DV_IMAP_DIR/dovecot.conf" >"$DV_IMAP_DIR/dovecot.conf.new"
    mv "$DV_IMAP_DIR/dovecot.conf.new" "$DV_IMAP_DIR/dovecot.conf"
}

# Stops the server imap_server_up started, and everything it started.
imap_server_down() {
    case "${IMAP_WHICH:-}" in
    stoa) stop_server "$IMAP_PID" ;;
    dovecot) imap_dovecot_stop ;;
    esac
    IMAP_WHICH=""
}

# Stops the private Dovecot (for bench_on_exit too): its master, then anything
# left of its session (lib/mail.sh's stop_tree).
DV_IMAP_UP=""
imap_dovecot_stop() {
    [[ -n "$DV_IMAP_UP" ]] || return 0
    DV_IMAP_UP=""
    stop_tree Dovecot "$IMAP_PID" "$(proc_sid "$IMAP_PID")" "$DOVECOT_BIN" -c "$DV_IMAP_DIR/dovecot.conf" stop ||
        log "!!! some Dovecot processes outlived the stop"
}

# imap_run ROUND stoa|dovecot: one fresh server, one idle-memory.py run.
imap_run() {
    local round="$1" which="$2" dir rc=0 target
    dir="$BENCH_TMP/$which-r$round"
    imap_server_up "$which" "$dir"
    target="127.0.0.1:$IMAP_PORT"
    log "round $round $which: $target, measuring ${IMAP_MEASURE[*]}"
    timeout --foreground --kill-after=5 $((IMAP_TIMEOUT + 60 + SETTLE)) python3 "$BENCH_DIR/idle-memory.py" \
        "${IMAP_MEASURE[@]}" --imap "user%d@$IMAP_DOMAIN:$IMAP_PASSWORD" --imap-users "$IMAP_USERS" \
        -n "$CONNS" --settle "$SETTLE" --timeout "$IMAP_TIMEOUT" \
        --json "$JSONDIR/$round-$which.json" "$target" >"$dir/idle.out" 2>&1 || rc=$?
    {
        echo "=== round $round $which (${IMAP_MEASURE[*]}), exit $rc"
        cat "$dir/idle.out"
    } >>"$RUNLOG"
    cat "$dir/idle.out" >&2
    # The open-file limit: say so when it is what stopped the run.
    if grep -qiE 'too many open files|EMFILE|out of file descriptors|fd limit' "$IMAP_LOG" "$dir/idle.out" 2>/dev/null; then
        local msg
        msg="$(grep -hiE 'too many open files|EMFILE|out of file descriptors|fd limit' "$IMAP_LOG" "$dir/idle.out" | head -1)"
        log "!!! round $round $which hit the open-file limit ($(ulimit -n)): $msg"
        STATUS_NOTES+=("round $round $which: the open-file limit ($(ulimit -n), hard $(ulimit -Hn)) stopped it: $msg")
    fi
    if grep -qiE 'warning|error|fatal' "$IMAP_LOG" 2>/dev/null; then
        INFO_NOTES+=("$which round $round logged: $(grep -iE 'warning|error|fatal' "$IMAP_LOG" | tail -1 | cut -c1-200)")
    fi
    kill -0 "$IMAP_PID" 2>/dev/null || STATUS_NOTES+=("round $round $which: the server process died")
    imap_server_down
    case "$rc" in
    0) ;;
    3) STATUS_NOTES+=("round $round $which: some sessions were closed by the server") ;;
    *) STATUS_NOTES+=("round $round $which: idle-memory.py failed (exit $rc), no figures: $(tail -n 1 "$dir/idle.out")") ;;
    esac
}

idle_imap_main() {
    ensure_commands python3:python3 timeout:coreutils git:git
    [[ "$(id -u)" == 0 ]] || die "run as root: Dovecot's master starts as root"
    ensure_dovecot
    ensure_dovecot_imapd
    require_users dovecot dovenull
    # As high as the hard limit lets it go (root may raise that too).
    bench_setup 1048576
    imap_default_conns
    bench_on_exit imap_dovecot_stop
    bench_begin idle-memory-imap
    JSONDIR="$BENCH_TMP/json"
    mkdir -p "$JSONDIR"
    RUNLOG="$OUT/runs.log"
    : >"$RUNLOG"
    # Time to open every session: Dovecot forks a process for each.
    IMAP_TIMEOUT=$((120 + CONNS / 20))
    STATUS_NOTES=()
    INFO_NOTES=()
    imap_setup

    local r v
    log "$ROUNDS rounds x 2 servers, $CONNS IMAP sessions in IDLE over $IMAP_USERS users each"
    for ((r = 1; r <= ROUNDS; r++)); do
        ((r == 1)) || wait_idle
        round_order "$r" stoa dovecot
        for v in "${ORDER[@]}"; do
            imap_run "$r" "$v"
        done
    done
    check_background "after the run (servers stopped)"

    local notes="$BENCH_TMP/notes.txt"
    printf '%s\n' "${STATUS_NOTES[@]}" >"$notes"
    python3 - "$JSONDIR" "$OUT/raw.csv" "$notes" <<'EOF' | tee "$OUT/summary.txt"
import csv, glob, json, os, statistics, sys

jsondir, raw_path, notes_path = sys.argv[1:]
runs = []
for path in sorted(glob.glob(os.path.join(jsondir, "*.json"))):
    rnd, server = os.path.basename(path)[:-5].split("-", 1)
    with open(path) as f:
        runs.append((int(rnd), server, json.load(f)))
runs.sort()
metrics = ["Pss", "Rss", "Private_Dirty", "VmRSS"]
with open(raw_path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["round", "server", "connections", "still_open", "processes_after", "fds_after", "metric",
                "before_bytes", "after_bytes", "settled_bytes", "bytes_per_conn_after", "bytes_per_conn_settled"])
    for rnd, server, j in runs:
        for m in metrics:
            w.writerow([rnd, server, j["connections"], j["still_open"], j["processes"]["after"]["processes"],
                        j["processes"]["after"]["fds"], m, j["before"][m], j["after"][m], j["after_settled"][m],
                        round(j["per_conn_after"][m], 1), round(j["per_conn_settled"][m], 1)])

def med(server, key, m):
    vals = [j[key][m] for _, s, j in runs if s == server]
    return statistics.median(vals) if vals else float("nan")

n = runs[0][2]["connections"] if runs else 0
print(f"bytes per idle IMAP session (LOGIN, SELECT INBOX, IDLE) = (server memory after - before) / {n};")
print("medians over rounds. stoa: its one process. dovecot: its master and every process below it")
print("(an imap process per session, imap-login, auth, anvil, log, stats, config), summed.")
print("Pss is the fair figure for dovecot (a shared page counted once); its summed Rss counts every")
print("shared page once per process. 'after' = right after the last IDLE began; 'settled' = after the")
print("settle time.")
print()
head = (f"{'server':<8} {'metric':<14} {'B/conn after':>13} {'B/conn settled':>15} {'before':>10} {'settled':>10} "
        f"{'rounds':>6} {'still open':>11} {'procs':>6} {'fds':>7} {'max fds':>8}")
print(head)
print("-" * len(head))
for server in ("stoa", "dovecot"):
    sr = [j for _, s, j in runs if s == server]
    if not sr:
        print(f"{server:<8} (no successful run)")
        continue
    open_txt = f"{min(j['still_open'] for j in sr)}/{n}"
    p = sr[-1]["processes"]["after_settled"]
    for m in metrics:
        print(f"{server:<8} {m:<14} {med(server, 'per_conn_after', m):>13.0f} {med(server, 'per_conn_settled', m):>15.0f} "
              f"{med(server, 'before', m) / 1048576:>8.1f}Mi {med(server, 'after_settled', m) / 1048576:>8.1f}Mi "
              f"{len(sr):>6} {open_txt:>11} {p['processes']:>6} {p['fds']:>7} {p['max_fds_one_process']:>8}")
print()
print("ratio stoa/dovecot of the median bytes per session (per-round ratios min..max in brackets)")
for m in ("Pss", "Private_Dirty"):
    for key, label in (("per_conn_after", "after"), ("per_conn_settled", "settled")):
        d, s = med("dovecot", key, m), med("stoa", key, m)
        per = []
        for rnd in sorted({r for r, _, _ in runs}):
            a = [j[key][m] for r, v, j in runs if r == rnd and v == "stoa"]
            b = [j[key][m] for r, v, j in runs if r == rnd and v == "dovecot"]
            if a and b and b[0] > 0:
                per.append(a[0] / b[0])
        rng = f"[{min(per):.3f}..{max(per):.3f}]" if per else ""
        ratio = s / d if d > 0 else float("nan")
        print(f"  {m:<14} {label:<8} stoa {s:>9.0f} B / dovecot {d:>9.0f} B = {ratio:7.3f} {rng}")
print()
notes = [l for l in open(notes_path).read().splitlines() if l.strip()]
if notes:
    print("!" * 78)
    for l in notes:
        print("!!! " + l)
    print("!" * 78)
else:
    print("all runs completed; every session was still open at the end")
EOF

    {
        readme_header "Idle IMAP session memory: stoa vs Dovecot"
        echo "- Dovecot: $("$DOVECOT_BIN" --version) (Debian $(dpkg-query -W -f '${Version}' dovecot-imapd 2>/dev/null || echo '?'), dovecot-imapd)"
        echo "- Open files: the script's, the client's and both servers' $FD_NOTE"
        readme_section Setup
        echo "- Loopback only. $CONNS sessions, each: greeting, \`LOGIN\`, \`SELECT INBOX\`, \`IDLE\` up to its \`+\`"
        echo "  continuation, then left idle in IDLE. Session i logs in as user(i mod $IMAP_USERS + 1)@$IMAP_DOMAIN;"
        echo "  every INBOX holds $IMAP_MESSAGES small messages (~2 KiB, the same bytes on both, appended over IMAP"
        echo "  and selected once before the rounds, so both servers' own files exist before any measurement)."
        echo "  Plain passwords on both (no password hash's memory in the figures)."
        echo "- Memory: Rss, Pss, Private_Dirty (/proc/PID/smaps_rollup) and VmRSS, summed over the measured"
        echo "  processes. stoa: its one process (all threads). Dovecot: its master and every process below it at"
        echo "  each reading (an imap process per session, imap-login, auth, anvil, log, stats, config): Dovecot holds"
        echo "  a session in a process of its own and in per-client state of its services, so the growth of the"
        echo "  whole tree is the session's cost; **Pss** (each shared page divided among the processes that map it)"
        echo "  summed is the memory the tree holds, the fair figure; summed Rss counts each shared page (libdovecot,"
        echo "  libc) once per process and overstates Dovecot. 'before' is read after one warm-up session (opened,"
        echo "  in IDLE, closed); 'after' right after the last IDLE began; 'settled' after ${SETTLE} s."
        echo "  bytes/session = (after - before) / $CONNS. The process and descriptor counts are the tree's."
        echo "- stoa: \`stoa serve --config stoa.toml --mail-dir MAIL --imap-listen 127.0.0.1:0\` (workers: one per"
        echo "  core, the default; \`max_sessions_per_user = 0\`, \`max_connections_per_client = 0\`,"
        echo "  \`max_connections = $((CONNS + 100))\`): stoa.toml here."
        echo "- Dovecot: a private instance (\`dovecot -c dovecot.conf\`, as root with the dovecot and dovenull users),"
        echo "  passwd-file passdb and userdb and \`mail_location = maildir:~/Maildir\` as \`stoa bench peers\`'s;"
        echo "  an imap process per session (\`client_limit = 1\`, \`service_count = 1\`, none kept in advance),"
        echo "  \`process_limit\` and \`mail_max_userip_connections\` $((CONNS + 100)), \`default_client_limit\`"
        echo "  $((CONNS + 1000)), imap-login in high-performance mode, \`imap_hibernate_timeout = 0\` (no"
        echo "  hibernation, Dovecot's default): dovecot.conf and dovecot-n.txt here."
        echo "- Every run is a fresh server process over the same mail; $ROUNDS rounds, the order reverses every round."
        readme_section Caveats
        if ((${#INFO_NOTES[@]})); then
            echo "- Server log lines during the runs:"
            printf '  - %s\n' "${INFO_NOTES[@]}" | sort -u
        fi
        echo "- User-space memory only: kernel socket structures and buffers, and the kernel's own per-process"
        echo "  structures (page tables, task structs: Dovecot has a process per session), are not in these figures."
        echo "- Dovecot's IDLE sessions send \`* OK Still here\` every 2 minutes; the end check counts such lines"
        echo "  (untagged data while idle), not as a closed session."
        readme_background
        readme_section Files
        echo "- raw.csv: one line per round, server and metric (bytes), with the tree's processes and descriptors"
        echo "- summary.txt: medians and ratios"
        echo "- runs.log: the output of every idle-memory.py run"
        echo "- stoa.toml, dovecot.conf, dovecot-n.txt (\`dovecot -n\`): the servers' configurations"
        readme_summary
    } >"$OUT/README.md"
    results_done
}

if [[ "$PROTOCOL" == imap ]]; then
    idle_imap_main
    exit 0
fi

# --- http: stoa vs nginx, keep-alive connections ------------------------------------

ensure_commands nginx:nginx python3:python3 timeout:coreutils git:git
# The client and each server hold CONNS descriptors; nginx's worker raises its own
# limit (worker_rlimit_nofile) and stoa raises its soft limit to the hard one.
bench_setup 65536
NOFILE="$(ulimit -n)"
if [[ "$NOFILE" != unlimited ]] && ((NOFILE < CONNS + 100)); then
    die "open-file limit $NOFILE is too low for $CONNS connections (run as root or raise ulimit -Hn)"
fi

bench_begin idle-memory
DOCROOT="$BENCH_TMP/www"
make_docroot "$DOCROOT"
JSONDIR="$BENCH_TMP/json"
mkdir -p "$JSONDIR"
RUNLOG="$OUT/runs.log"
: >"$RUNLOG"

WC=$((CONNS * 2 > 20000 ? CONNS * 2 : 20000))
VARIANTS=(nginx-log-off stoa-log-off nginx-log-on stoa-log-on)
STATUS_NOTES=()
INFO_NOTES=()

# run_variant ROUND VARIANT: one fresh server, one idle-memory.py run.
run_variant() {
    local round="$1" variant="$2" port pid pids target rc=0 dir
    dir="$BENCH_TMP/$variant-r$round"
    mkdir -p "$dir"
    case "$variant" in
        nginx-*)
            local alog=off
            [[ "$variant" == *-on ]] && alog="$dir/access.log"
            nginx_up "$dir" "$DOCROOT" 120s "$WC" "$alog" "worker_rlimit_nofile $((WC * 2));"
            port="$NGINX_PORT"
            pid="$NGINX_PID"
            pids="$(nginx_workers "$NGINX_PID" | paste -sd, -)"
            [[ -n "$pids" ]] || die "no nginx worker under master $NGINX_PID"
            [[ "$pids" != *,* ]] || die "expected one nginx worker, found $pids"
            ;;
        stoa-*)
            local alog=off
            [[ "$variant" == *-on ]] && alog="$dir/access.log"
            start_stoa "$dir/stderr.log" --docroot "$DOCROOT" --workers 1 --keepalive-timeout 120s \
                --access-log "$alog" --log-format combined
            port="$STOA_PORT"
            pid="$STOA_PID"
            pids="$STOA_PID"
            ;;
    esac
    target="127.0.0.1:$port"
    log "round $round $variant: $target, measuring pid(s) $pids"
    timeout --foreground --kill-after=5 $((180 + SETTLE)) python3 "$BENCH_DIR/idle-memory.py" \
        --pid "$pids" -n "$CONNS" --settle "$SETTLE" --timeout 150 \
        --json "$JSONDIR/$round-$variant.json" "$target" >"$dir/idle.out" 2>&1 || rc=$?
    {
        echo "=== round $round $variant (pids $pids), exit $rc"
        cat "$dir/idle.out"
    } >>"$RUNLOG"
    cat "$dir/idle.out" >&2
    if [[ "$variant" == nginx-* ]] && grep -q 'setrlimit\|worker_connections are not enough' "$dir/error.log"; then
        local msg
        msg="$(grep 'setrlimit\|worker_connections' "$dir/error.log" | head -1 | sed 's/^.*\[alert\] [0-9#]*: //')"
        log "nginx error log: $msg"
        INFO_NOTES+=("nginx error log ($variant): $msg")
    fi
    kill -0 "$pid" 2>/dev/null || STATUS_NOTES+=("round $round $variant: the server process died")
    stop_server "$pid"
    case "$rc" in
        0) ;;
        3) STATUS_NOTES+=("round $round $variant: some connections were closed by the server") ;;
        *) STATUS_NOTES+=("round $round $variant: idle-memory.py failed (exit $rc), no figures") ;;
    esac
}

log "$ROUNDS rounds x ${#VARIANTS[@]} variants, $CONNS connections each"
for ((r = 1; r <= ROUNDS; r++)); do
    ((r == 1)) || wait_idle
    round_order "$r" "${VARIANTS[@]}"
    for v in "${ORDER[@]}"; do
        run_variant "$r" "$v"
    done
done

check_background "after the run (servers idle)"

NOTES_FILE="$BENCH_TMP/notes.txt"
printf '%s\n' "${STATUS_NOTES[@]}" >"$NOTES_FILE"

python3 - "$JSONDIR" "$OUT/raw.csv" "$NOTES_FILE" <<'EOF' | tee "$OUT/summary.txt"
import csv, glob, json, os, statistics, sys

jsondir, raw_path, notes_path = sys.argv[1:]
runs = []
for path in sorted(glob.glob(os.path.join(jsondir, "*.json"))):
    rnd, variant = os.path.basename(path)[:-5].split("-", 1)
    with open(path) as f:
        runs.append((int(rnd), variant, json.load(f)))
runs.sort()
metrics = ["VmRSS", "Rss", "Pss", "Private_Dirty"]
with open(raw_path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["round", "server", "connections", "still_open", "metric", "before_bytes", "after_bytes",
                "settled_bytes", "bytes_per_conn_after", "bytes_per_conn_settled"])
    for rnd, variant, j in runs:
        for m in metrics:
            w.writerow([rnd, variant, j["connections"], j["still_open"], m, j["before"][m], j["after"][m],
                        j["after_settled"][m], round(j["per_conn_after"][m], 1), round(j["per_conn_settled"][m], 1)])

def med(variant, key, m):
    vals = [j[key][m] for _, v, j in runs if v == variant]
    return statistics.median(vals) if vals else float("nan")

variants = ["nginx-log-off", "stoa-log-off", "nginx-log-on", "stoa-log-on"]
n = runs[0][2]["connections"] if runs else 0
print(f"bytes per idle keep-alive connection = (server memory after - before) / {n}; medians over rounds")
print("'after' = right after the last response; 'settled' = after the settle time of idleness")
print()
head = f"{'server':<15} {'metric':<14} {'B/conn after':>13} {'B/conn settled':>15} {'before':>10} {'settled':>10} {'rounds':>6} {'still open':>11}"
print(head)
print("-" * len(head))
for v in variants:
    vr = [j for _, vv, j in runs if vv == v]
    if not vr:
        print(f"{v:<15} (no successful run)")
        continue
    open_txt = f"{min(j['still_open'] for j in vr)}/{n}"
    for m in metrics:
        print(f"{v:<15} {m:<14} {med(v, 'per_conn_after', m):>13.0f} {med(v, 'per_conn_settled', m):>15.0f} "
              f"{med(v, 'before', m) / 1048576:>8.1f}Mi {med(v, 'after_settled', m) / 1048576:>8.1f}Mi {len(vr):>6} {open_txt:>11}")
print()
print("ratio stoa/nginx of the median bytes per connection (per-round ratios min..max in brackets)")
for log in ("off", "on"):
    s, g = f"stoa-log-{log}", f"nginx-log-{log}"
    for m in ("VmRSS", "Private_Dirty"):
        for key, label in (("per_conn_after", "after"), ("per_conn_settled", "settled")):
            gm, sm = med(g, key, m), med(s, key, m)
            per = []
            for rnd in sorted({r for r, _, _ in runs}):
                a = [j[key][m] for r, v, j in runs if r == rnd and v == s]
                b = [j[key][m] for r, v, j in runs if r == rnd and v == g]
                if a and b and b[0] > 0:
                    per.append(a[0] / b[0])
            rng = f"[{min(per):.2f}..{max(per):.2f}]" if per else ""
            ratio = sm / gm if gm > 0 else float("nan")
            print(f"  access log {log:<3} {m:<14} {label:<8} stoa {sm:>8.0f} B / nginx {gm:>8.0f} B = {ratio:6.2f} {rng}")
print()
notes = [l for l in open(notes_path).read().splitlines() if l.strip()]
if notes:
    print("!" * 78)
    for l in notes:
        print("!!! " + l)
    print("!" * 78)
else:
    print(f"all runs completed; every connection was still open at the end")
EOF

{
    readme_header "Idle keep-alive connection memory: stoa vs nginx"
    readme_section Setup
    echo "- Loopback only. $CONNS connections, each: one \`GET /1k.bin HTTP/1.1\`, full response read, then left idle."
    echo "- Memory: VmRSS (/proc/PID/status) and Rss, Pss, Private_Dirty (/proc/PID/smaps_rollup) of the process"
    echo "  holding the connections: the nginx worker (child of the master), the stoa process (all its threads)."
    echo "  'before' is read after one warm-up connection (opened, used, closed); 'after' right after the last"
    echo "  response; 'settled' after ${SETTLE} s of idleness. bytes/conn = (after - before) / $CONNS."
    echo "- nginx: 1 worker, worker_connections $WC, worker_rlimit_nofile $((WC * 2)), keepalive_timeout 120s,"
    echo "  sendfile, tcp_nopush, open_file_cache; access_log off or to a file."
    echo "- stoa: \`stoa serve --workers 1 --keepalive-timeout 120s --access-log off|FILE --log-format combined\`."
    echo "- Every run is a fresh server process; $ROUNDS rounds, the variant order reverses every round."
    readme_section Caveats
    if ((${#INFO_NOTES[@]})); then
        echo "- Server warnings during the runs (the open-file limit $(ulimit -n) still covers $CONNS connections):"
        printf '  - %s\n' "${INFO_NOTES[@]}" | sort -u
    fi
    echo "- User-space memory only: kernel socket structures and buffers are not in RSS."
    echo "- nginx allocates and touches its connection and event arrays (worker_connections entries) at"
    echo "  startup, so that part of its per-connection cost is in 'before', not in the difference. The"
    echo "  'before' and 'settled' columns give the absolute figures."
    readme_background
    readme_section Files
    echo "- raw.csv: one line per round, server variant and metric (bytes)"
    echo "- summary.txt: medians and ratios"
    echo "- runs.log: the output of every idle-memory.py run"
    readme_summary
} >"$OUT/README.md"
results_done
