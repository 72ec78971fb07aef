#!/usr/bin/env bash
# Stoa vs Postfix + Dovecot under the SPECmail2001-style harness, `stoa bench mail
# --find-max`: the highest load (messages per minute) each mail system passes.
#
#   bench/compare-mail.sh [--users 1000 | --store-users N] [--rate-start MPM]
#                         [--profile quick] [--warmup D] [--run-time D] [--reruns 0] [--rounds 1]
#                         [--run-timeout 14400]
#                         [--scheme argon2id|sha512-crypt|blf-crypt|ssha|plain]
#                         [--only stoa|postfix-dovecot] [--knee MPM] [--access pop3|imap]
#
# --access imap reads the mailboxes over IMAP instead of POP3 on both systems
# (`stoa bench mail --access imap`: the harness's built-in server with its IMAP
# listener, Dovecot's IMAP from mail-sut.sh): the reading rows are IMAP ..., and
# every run is non-compliant by design (the kit reads mail over POP3); results go
# to bench-results/<date>-<host>-mail-imap/.
# --store-users N declares a store of N accounts whatever the rate (a non-compliant
# run, every report says how): find-max then searches each system's knee with the
# store fixed. --reruns K re-runs the 100 % level at each system's knee K times
# (each on a fresh server filled to the steady state: the search's failed levels
# can drain a store), so the knee is judged on more than one trial; the summary gives the
# passes and the CPU of each server program there (--server-pid: stoa, or
# Postfix's and Dovecot's masters and every process they start). --knee MPM skips
# the search and re-runs the 100 % level at MPM (a knee an earlier run found, or a
# level below it) --reruns times, 3 unless given; --only runs one of the two
# systems (with --knee: the re-runs of one system's knee). --run-time sets
# each level's measurement window (the quick profile's 180 s holds 59 delivery
# probes at 1 %, the least the Delivery Time row is judged on, only from ~1,050 msgs/min),
# --warmup the load before it (the quick profile's 10 s; the kit's is 300 s, and a
# server that caches password checks, as stoa does, starts each fresh re-run cold).
# Before every harness run the disk is settled (sync, no I/O in flight; the README's
# background section says how long it took and the load average then).
#
# Stoa: the harness's built-in server (it starts its own). Postfix + Dovecot: a
# private instance from bench/mail-sut.sh (virtual(8) Maildirs read by Dovecot's
# POP3, remote mail relayed to the harness's sink), initialised with `stoa bench
# mail --init-only`. Rounds alternate which system goes first. Results (each run's
# report, the SUT configuration, a table of find-max results) go to
# bench-results/<date>-<host>-mail/. See bench/README.md.
set -euo pipefail

# shellcheck source=bench/lib.sh disable=SC1091
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

USERS=1000
STORE_USERS=""
RERUNS=0
RATE_START=""
RUN_TIME=""
WARMUP=""
PROFILE=quick
ROUNDS=1
RUN_TIMEOUT=14400
# The same load (arrival times, sizes, recipients) for both systems.
SEED=2001
# The harness's defaults (bench/mail-sut.sh's too): the local and the remote domain.
DOMAIN=stoa.test
REMOTE_DOMAIN=remote.test
# The users' password scheme on both systems: the built-in server's directory and
# Dovecot's passwd-file hold the same {SCHEME} strings (stoa bench mail-users).
SCHEME=argon2id
# --only: one system; --knee: no find-max, re-runs of the 100 % level at this rate.
ONLY=""
KNEE=""
# --access: how the harness reads the mailboxes, pop3 (the kit's) or imap.
ACCESS=pop3
bench_cmdline "$@"
parse_args "--users=USERS --store-users=STORE_USERS --reruns=RERUNS --rate-start=RATE_START --profile=PROFILE
    --run-time=RUN_TIME --warmup=WARMUP --rounds=ROUNDS --run-timeout=RUN_TIMEOUT --scheme=SCHEME --only=ONLY --knee=KNEE
    --access=ACCESS" "$@"
case "$ACCESS" in
pop3) ACCESS_FLAG=() RESULT_KIND=mail READ_NAME=POP3 ;;
imap) ACCESS_FLAG=(--access imap) RESULT_KIND=mail-imap READ_NAME=IMAP ;;
*) die "--access is pop3 or imap" ;;
esac
case "$ONLY" in
"") SYSTEMS=(stoa postfix-dovecot) ;;
stoa | postfix-dovecot) SYSTEMS=("$ONLY") ;;
*) die "--only is stoa or postfix-dovecot" ;;
esac
if [[ -n "$KNEE" ]]; then
    require_positive "--knee takes a positive integer (msgs/min)" "$KNEE"
    [[ -z "$RATE_START" ]] || die "--knee and --rate-start exclude each other: --knee runs no search"
    ((RERUNS > 0)) || RERUNS=3
fi
SCHEME="${SCHEME,,}"
DV_SCHEME="$(dovecot_scheme "$SCHEME")" || die "--scheme is argon2id, sha512-crypt, blf-crypt, ssha or plain"
require_positive "--users, --store-users, --rate-start, --rounds and --run-timeout take positive integers" \
    "$USERS" "$ROUNDS" "$RUN_TIMEOUT" ${RATE_START:+"$RATE_START"} ${STORE_USERS:+"$STORE_USERS"}
[[ "$RERUNS" =~ ^[0-9]+$ ]] || die "--reruns takes a whole number"
[[ -z "$RUN_TIME" || "$RUN_TIME" =~ ^[1-9][0-9]*(s|m|min)?$ ]] || die "--run-time: a duration such as 300s"
[[ -z "$WARMUP" || "$WARMUP" =~ ^[0-9]+(s|m|min)?$ ]] || die "--warmup: a duration such as 300s"
((USERS <= 10000000 && ROUNDS <= 20 && RERUNS <= 10)) ||
    die "settings out of range (users <= 10000000, rounds <= 20, reruns <= 10)"
# The store: --users (at least 200 x rate, the kit's rule) or a declared one.
if [[ -n "$STORE_USERS" ]]; then
    ((STORE_USERS <= 10000000)) || die "--store-users: at most 10000000"
    USERS="$STORE_USERS"
    STORE_FLAG=(--store-users "$STORE_USERS")
else
    STORE_FLAG=(--users "$USERS")
fi
# The phases every run of both systems gets.
PHASE_FLAGS=(--profile "$PROFILE")
if [[ -n "$RUN_TIME" ]]; then PHASE_FLAGS+=(--run-time "$RUN_TIME"); fi
if [[ -n "$WARMUP" ]]; then PHASE_FLAGS+=(--warmup "$WARMUP"); fi
[[ "$PROFILE" =~ ^[a-z0-9_-]+$ ]] || die "--profile: a profile name such as quick"

[[ "$(id -u)" == 0 ]] || die "run as root: Postfix's and Dovecot's masters start as root"
ensure_commands python3:python3 timeout:coreutils git:git
[[ -x "$MAIL_SUT" ]] || die "$MAIL_SUT is missing or not executable"
# The SUT (lib/mail.sh's sut_start), under BENCH_TMP.
bench_on_exit sut_stop
bench_setup
"$STOA_BIN" bench mail --help >/dev/null 2>&1 ||
    die "this stoa build has no 'stoa bench mail' (the harness): build a revision that has it"

bench_begin "$RESULT_KIND"

COMMANDS="$OUT/commands.txt"
: >"$COMMANDS"
RUNS=()          # "server|round|dir|exit status|kind" (kind: find-max or rerun)

# run_harness SERVER ROUND NAME ARGS...: runs `stoa bench mail ARGS...`, output in
# RUN_DIR/NAME.txt (stdout) and RUN_DIR/NAME.log (stderr), bounded by --run-timeout. Sets
# HARNESS_RC.
run_harness() {
    local server="$1" round="$2" name="$3"
    shift 3
    # An earlier run's store (8 GB at 100,000 accounts), written or deleted, must
    # not be written back during this one.
    settle_disk "before $name"
    show_cmd stoa bench mail "$@" | sed "s/^/[$server, round $round] /" >>"$COMMANDS"
    HARNESS_RC=0
    timeout --kill-after=30 "$RUN_TIMEOUT" "$STOA_BIN" bench mail "$@" \
        >"$RUN_DIR/$name.txt" 2>"$RUN_DIR/$name.log" || HARNESS_RC=$?
    if ((HARNESS_RC == 124)); then
        log "!!! $server round $round ($name): the harness ran out of time (--run-timeout $RUN_TIMEOUT)"
    elif ((HARNESS_RC != 0)); then
        log "!!! $server round $round ($name): the harness exited $HARNESS_RC: $(tail -n 3 "$RUN_DIR/$name.log" | tr '\n' ' ')"
    fi
}

# Results of round 1 keep the plain names (RUN_DIR/stoa, RUN_DIR/postfix-dovecot).
run_name() { if (($2 == 1)); then echo "$1"; else echo "$1-r$2"; fi; }

# knee_of DIR: the best passing rate of the find-max run in RUN_DIR/DIR, or nothing.
knee_of() {
    python3 - "$RUN_DIR/$1/result.json" <<'EOF'
import json, sys
try:
    b = json.load(open(sys.argv[1]))["find_max"]["best_mpm"]
except (OSError, ValueError, KeyError, TypeError):
    b = None
if isinstance(b, (int, float)) and not isinstance(b, bool) and b > 0:
    print(f"{b:g}")
EOF
}

# rerun_knee SERVER ROUND NAME PREPARE ARGS...: the 100 % level at the knee of
# RUN_DIR/NAME, --reruns times, each with its own seed; ARGS reach the server (and name
# it). Each re-run needs a store at the steady state, which the search's failed
# levels may have drained: PREPARE (a function, or "" when the harness starts a
# fresh server itself) is called with the re-run's name before each one, makes a
# fresh filled server and sets RERUN_ARGS, which then replace ARGS; a failed
# PREPARE (HARNESS_RC) skips that re-run.
rerun_knee() {
    local server="$1" r="$2" name="$3" prepare="$4" knee k
    shift 4
    ((RERUNS > 0)) || return 0
    knee="${KNEE:-$(knee_of "$name")}"
    if [[ -z "$knee" ]]; then
        log "round $r: $server has no knee to re-run (no trial passed)"
        return 0
    fi
    for ((k = 1; k <= RERUNS; k++)); do
        RERUN_ARGS=("$@")
        if [[ -n "$prepare" ]]; then
            "$prepare" "$r" "$name-knee$k"
            if ((HARNESS_RC != 0)); then
                RUNS+=("$server|$r|$name-knee$k|$HARNESS_RC|rerun")
                continue
            fi
        fi
        log "round $r: $server, the 100 % level at its knee ($knee msgs/min), re-run $k of $RERUNS"
        run_harness "$server" "$r" "$name-knee$k" "${RERUN_ARGS[@]}" --levels 100 --rate "$knee" \
            "${PHASE_FLAGS[@]}" --seed "$((SEED + k))" --out "$RUN_DIR/$name-knee$k"
        RUNS+=("$server|$r|$name-knee$k|$HARNESS_RC|rerun")
    done
}

run_stoa() {
    local r="$1" name args
    name="$(run_name stoa "$r")"
    if [[ -z "$KNEE" ]]; then
        args=(--find-max "${STORE_FLAG[@]}" "${PHASE_FLAGS[@]}" --seed "$SEED" --password-scheme "$SCHEME"
            "${ACCESS_FLAG[@]}")
        if [[ -n "$RATE_START" ]]; then args+=(--rate "$RATE_START"); fi
        log "round $r: stoa (the harness's built-in server, $READ_NAME), find-max"
        run_harness stoa "$r" "$name" "${args[@]}" --out "$RUN_DIR/$name"
        RUNS+=("stoa|$r|$name|$HARNESS_RC|find-max")
    fi
    rerun_knee stoa "$r" "$name" "" "${STORE_FLAG[@]}" --password-scheme "$SCHEME" "${ACCESS_FLAG[@]}"
}

PD_ARGS=()
RERUN_ARGS=()
# pd_fresh ROUND NAME: a fresh Postfix + Dovecot (bench/mail-sut.sh start empties
# its directory) filled to the steady state by `stoa bench mail --init-only`
# (OUT/NAME-init); sets PD_ARGS, the harness's flags for it (addresses, the
# masters for the CPU by program), and HARNESS_RC, the fill's exit status.
pd_fresh() {
    local r="$1" name="$2" sink_port
    sink_port="$(free_port)"
    log "round $r: starting Postfix + Dovecot for $USERS users ($name)"
    show_cmd bench/mail-sut.sh start --dir "$BENCH_TMP/sut" --users "$USERS" --domain "$DOMAIN" \
        --remote-domain "$REMOTE_DOMAIN" --sink "127.0.0.1:$sink_port" --stoa "$STOA_BIN" --scheme "$SCHEME" |
        sed "s/^/[postfix-dovecot, round $r] /" >>"$COMMANDS"
    sut_start "$BENCH_TMP/sut" "$USERS" "$SCHEME" "127.0.0.1:$sink_port" "$OUT/$name-sut"
    # shellcheck disable=SC2153 # SMTP_ADDR, POP3_ADDR and IMAP_ADDR come from sut.env
    log "Postfix + Dovecot: SMTP $SMTP_ADDR, POP3 $POP3_ADDR, IMAP ${IMAP_ADDR:-none}, sink 127.0.0.1:$sink_port"
    # Where the harness reads the mailboxes: Dovecot's POP3, or its IMAP.
    local read=(--pop3 "$POP3_ADDR")
    if [[ "$ACCESS" == imap ]]; then
        [[ -n "${IMAP_ADDR:-}" ]] || die "mail-sut.sh wrote no IMAP_ADDR: an older mail-sut.sh?"
        read=(--access imap --imap "$IMAP_ADDR")
    fi
    # One fill journal per store: each starts empty, and an earlier store's journal
    # would make the harness skip its fill.
    PD_ARGS=(--smtp "$SMTP_ADDR" "${read[@]}" --sink-listen "127.0.0.1:$sink_port" "${STORE_FLAG[@]}"
        --domain "$DOMAIN" --init-journal "$BENCH_TMP/init-$name.journal")
    log "round $r: Postfix + Dovecot, init-only (the initial mailboxes)"
    run_harness postfix-dovecot "$r" "$name-init" --init-only "${PD_ARGS[@]}"
    # Both masters: the report's CPU by program covers every process they start.
    PD_ARGS+=(--server-software "$PD_SOFTWARE" --server-pid "$POSTFIX_PID" --server-pid "$DOVECOT_PID")
}

# The PREPARE of Postfix + Dovecot's re-runs: a fresh filled SUT each time.
pd_rerun_prepare() {
    pd_fresh "$1" "$2"
    RERUN_ARGS=("${PD_ARGS[@]}")
}

run_postfix_dovecot() {
    local r="$1" name
    name="$(run_name postfix-dovecot "$r")"
    # With --knee there is no search: each re-run below gets its own fresh filled SUT.
    HARNESS_RC=0
    if [[ -z "$KNEE" ]]; then
        pd_fresh "$r" "$name"
        if ((HARNESS_RC == 0)); then
            log "round $r: Postfix + Dovecot, find-max"
            local search=(--find-max "${PHASE_FLAGS[@]}" --seed "$SEED")
            if [[ -n "$RATE_START" ]]; then search+=(--rate "$RATE_START"); fi
            run_harness postfix-dovecot "$r" "$name" "${PD_ARGS[@]}" "${search[@]}" --out "$RUN_DIR/$name"
        fi
        RUNS+=("postfix-dovecot|$r|$name|$HARNESS_RC|find-max")
        # The configuration as the search ran it, before a re-run replaces the SUT.
        save_sut_files "$name"
    fi
    if ((HARNESS_RC == 0)); then rerun_knee postfix-dovecot "$r" "$name" pd_rerun_prepare; fi
    save_sut_files "$name-last"
    sut_stop
}

# Copies the SUT's configuration (once) and its logged problems (every round) into OUT.
save_sut_files() {
    local name="$1" cfg="$OUT/postfix-dovecot-config" f
    if [[ ! -d "$cfg" ]]; then
        mkdir -p "$cfg"
        for f in postfix/main.cf postfix/master.cf postfix/transport dovecot/dovecot.conf dovecot/dovecot-n.txt \
            dovecot/sql.conf.ext sut.env; do
            if [[ -f "$SUT_DIR/$f" ]]; then sed "s#$SUT_DIR#\$SUT#g" "$SUT_DIR/$f" >"$cfg/$(basename "$f")"; fi
        done
        {
            head -3 "$SUT_DIR/postfix/vmailbox"
            echo "... ($(wc -l <"$SUT_DIR/postfix/vmailbox") lines in all)"
        } >"$cfg/vmailbox.head"
        {
            head -1 "$SUT_DIR/dovecot/passwd"
            echo "... ($(wc -l <"$SUT_DIR/dovecot/passwd") lines in all, one shared hash)"
        } >"$cfg/passwd.head"
    fi
    grep -hiE 'warning|error|fatal|panic' "$SUT_DIR/postfix.log" "$SUT_DIR/dovecot.log" 2>/dev/null |
        tail -n 200 >"$OUT/$name-sut-problems.txt" || true
}

log "running $ROUNDS round(s): ${SYSTEMS[*]}, $USERS users, mail read over $READ_NAME, profile $PROFILE${KNEE:+, re-runs at $KNEE msgs/min}"
for ((r = 1; r <= ROUNDS; r++)); do
    ((r == 1)) || wait_idle
    round_order "$r" "${SYSTEMS[@]}"
    for s in "${ORDER[@]}"; do
        if [[ "$s" == stoa ]]; then run_stoa "$r"; else run_postfix_dovecot "$r"; fi
    done
done

check_background "after the run (servers stopped)"

# The table: best_mpm from each run's result.json (top-level "find_max": {"best_mpm":
# N or null}); anything missing or unreadable reads "see report".
printf '%s\n' "${RUNS[@]}" >"$BENCH_TMP/runs.txt"
READ_NAME="$READ_NAME" python3 - "$RUN_DIR" "$BENCH_TMP/runs.txt" <<'EOF' | tee "$OUT/summary.txt"
import json, os, sys
out, runs = sys.argv[1], sys.argv[2]
def load(d):
    try:
        with open(os.path.join(out, d, "result.json")) as f:
            v = json.load(f)
        return v if isinstance(v, dict) else None
    except (OSError, ValueError):
        return None
def best(v):
    fm = v.get("find_max") if v else None
    b = fm.get("best_mpm") if isinstance(fm, dict) else None
    if isinstance(fm, dict) and "best_mpm" in fm and b is None:
        return "none passed"
    if isinstance(b, bool) or not isinstance(b, (int, float)):
        return "see report"
    return f"{b:g}"
def rerun(v):
    if not v or not isinstance(v.get("mpm"), (int, float)):
        return "see report"
    return f"{v['mpm']:g}: {v.get('outcome', '?')}"
def programs(v):
    """The level's server CPU by program, largest first: "total: name secs, ..."."""
    try:
        p = v["levels"][0]["server_processes"]
        parts = [f"{g['program']} {g['cpu_secs']:.1f}" for g in p["programs"][:6]]
        return f"{p['total_cpu_secs']:.1f} s in all: " + ", ".join(parts)
    except (TypeError, KeyError, IndexError):
        return "-"
rows = []
for line in open(runs):
    server, rnd, d, rc, kind = line.rstrip("\n").split("|")
    v = load(d)
    result = best(v) if kind == "find-max" else rerun(v)
    rows.append((server, rnd, kind, result, "ok" if rc == "0" else f"harness exit {rc}", programs(v), d))
w = max([len(r[0]) for r in rows] + [6])
print(f"mail read over {os.environ['READ_NAME']}" + (" (--access imap: rows IMAP ..., every run non-compliant by design)" if os.environ['READ_NAME'] == "IMAP" else ""))
print()
print(f"{'server':<{w}}  round  {'run':<8}  {'msgs/min':>20}  {'status':<16} report")
for server, rnd, kind, res, st, _, d in rows:
    print(f"{server:<{w}}  {rnd:>5}  {kind:<8}  {res:>20}  {st:<16} {d}/")
print()
print("Server CPU over the measurement window (find-max: its best passing trial), by program (s):")
for _, _, _, _, _, prog, d in rows:
    print(f"  {d}: {prog}")
EOF

{
    if [[ -n "$KNEE" ]]; then
        readme_header "Mail: ${SYSTEMS[*]}, the 100 % level at $KNEE msgs/min re-run $RERUNS time(s)"
    else
        readme_header "Mail: stoa vs Postfix + Dovecot, \`stoa bench mail --find-max${ACCESS_FLAG[*]:+ ${ACCESS_FLAG[*]}}\`"
    fi
    if [[ "$ONLY" != stoa ]]; then
        echo "- Postfix: ${POSTFIX_VERSION:-?} (Debian ${POSTFIX_PACKAGE:-?})"
        echo "- Dovecot: ${DOVECOT_VERSION:-?} (Debian ${DOVECOT_PACKAGE:-?}, dovecot-pop3d and dovecot-imapd)"
    fi
    if [[ -n "$ONLY" ]]; then echo "- Only $ONLY ran (\`--only\`)."; fi
    readme_section Setup
    if [[ "$ACCESS" == imap ]]; then
        echo "- **Mailboxes read over IMAP** (\`--access imap\`), not POP3 as in SPECmail2001: each POP check is"
        # shellcheck disable=SC2016 # backquotes for Markdown
        echo '  LOGIN, SELECT INBOX, FETCH and `STORE +FLAGS.SILENT (\Deleted)` per message, EXPUNGE, LOGOUT (the rows'
        echo "  IMAP Connect, IMAP Login, IMAP Select, IMAP Fetch, IMAP Store, IMAP Logout), judged by POP's limits."
        echo "  Every run is non-compliant by design; each report lists it. stoa: the built-in server's IMAP listener; Dovecot:"
        echo "  its imapd from mail-sut.sh (an imap process per session, reused for 100, up to 3000; imap-login in"
        echo "  high-performance mode; no hibernation), the same Maildirs, users and passdb as its POP3."
    fi
    echo "- Loopback only (127.0.0.1). The harness and the mail system share the machine's $(nproc) cores;"
    echo "  nothing is pinned."
    if [[ -n "$STORE_USERS" ]]; then
        echo "- A declared store of $STORE_USERS accounts (\`--store-users\`, non-compliant: the kit's store is"
        echo "  200 x rate accounts; each report lists the deviations)."
    fi
    echo "- $USERS users user1..user$USERS@$DOMAIN with the harness's default password, {$DV_SCHEME}"
    echo "  (--scheme $SCHEME) on both systems; mail for"
    echo "  @$REMOTE_DOMAIN goes to the harness's mail sink. Profile \`$PROFILE\`${WARMUP:+, warm-up $WARMUP}${RUN_TIME:+, measurement $RUN_TIME per level}${RATE_START:+, find-max starting at $RATE_START MPM}."
    echo "- stoa: the harness's built-in server (\`stoa bench mail\` without --smtp/--pop3 starts its own and"
    echo "  creates the users and initial mailboxes itself)."
    echo "- Postfix + Dovecot (\`$PD_SOFTWARE\`): \`bench/mail-sut.sh start\` (see bench/README.md), then"
    echo "  \`stoa bench mail --init-only\` fills the initial mailboxes through it, then the find-max run; the"
    echo "  SUT is stopped after each round. Postfix: smtpd on 127.0.0.1 (up to 1000 sessions), virtual(8)"
    echo "  delivery into Maildirs as nobody with fsync on (default), at most 20 deliveries at once,"
    echo "  @$REMOTE_DOMAIN relayed to the sink by \`transport_maps\` (\`smtp:[127.0.0.1]:PORT\`, no DNS), no"
    echo "  per-client limits, log to a file. Dovecot: POP3 (and IMAP) on 127.0.0.1 over the same Maildirs, one {$DV_SCHEME}"
    echo "  hash for all users (${PASSWD_COST:-?}; from: ${PASSWD_SOURCE:-?}) checked through the"
    echo "  \`${PASSDB:-?}\` passdb (sqlite: the checks in up to 30 auth-worker processes, auth cache 10M / 15 min;"
    echo "  **Dovecot runs the {$DV_SCHEME} check on every login, cached or not**, where stoa's cache of successful checks"
    echo "  skips it), \`pop3_uidl_format = %g\`, up to 3000 pop3 processes (one per session, reused 100"
    echo "  times), login processes in high-performance mode, no per-IP auth penalty, \`mail_fsync\` at its"
    echo "  default (optimized). Files in postfix-dovecot-config/."
    if [[ -n "$KNEE" ]]; then
        echo "- No find-max (\`--knee $KNEE\`): the 100 % level at $KNEE msgs/min run $RERUNS time(s) (seeds"
        echo "  $((SEED + 1))..$((SEED + RERUNS)); each on a server started and filled afresh)."
    elif ((RERUNS > 0)); then
        echo "- After each find-max, the 100 % level at the system's knee re-run $RERUNS time(s) (seeds"
        echo "  $((SEED + 1))..$((SEED + RERUNS)); each system's server is started and filled afresh for each: the"
        echo "  search's failed levels can leave a store below the steady state)."
    fi
    echo "- $ROUNDS round(s); stoa first in odd rounds, Postfix + Dovecot first in even ones. Harness runs"
    echo "  bounded by --run-timeout $RUN_TIMEOUT s. BENCH_WAIT_IDLE=${BENCH_WAIT_IDLE:-unset}."
    readme_section Commands
    echo "\$TMP is the script's temp directory, \$OUT this directory, stoa the release binary built from"
    echo "the revision above."
    echo
    echo '```'
    cat "$COMMANDS"
    echo '```'
    readme_background
    readme_section Files
    echo "- Each run's report (result.json and the rest) is in the results archive (\`stoa bench results\`),"
    echo "  not here"
    echo "- postfix-dovecot-sut.txt/.log: mail-sut.sh's output; postfix-dovecot-sut-problems.txt: warnings and"
    echo "  errors from the Postfix and Dovecot logs (last 200)"
    echo "- postfix-dovecot-config/: main.cf, master.cf, transport, dovecot.conf, dovecot-n.txt (\`dovecot -n\`),"
    echo "  sql.conf.ext, sut.env, and the first lines of the user map and passwd-file (\$SUT = the SUT directory)"
    echo "- commands.txt: every command run, summary.txt: the table below"
    readme_summary
} >"$OUT/README.md"
results_done
