#!/usr/bin/env bash
# Stoa vs Dovecot, POP3 sessions per second over loopback, interleaved rounds.
#
#   bench/compare-pop3.sh [--rounds 3] [--users 200] [--messages 3] [--size 4096]
#                         [--clients 4] [--workers 1] [--dovecot-hash stoa|doveadm]
#                         [--scheme argon2id|sha512-crypt|blf-crypt|ssha|plain]
#
# A session is USER/PASS, STAT, RETR and DELE of every message, QUIT (row
# pop3-session); row pop3-login-only is USER/PASS, STAT, QUIT on the emptied
# mailboxes. Users u1..uN on both servers; before every round each mailbox gets
# the same M messages (Stoa through its SMTP, Dovecot as Maildir files). Both
# servers are restarted before every measurement, so every login runs the
# password scheme's check (--scheme, default argon2id; both servers hold the
# same {SCHEME} strings unless --dovecot-hash doveadm).
# Results go to bench-results/<date>-<host>-pop3/. See bench/README.md.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3
USERS=200
MESSAGES=3
SIZE=4096
CLIENTS=4
WORKERS=1
DOVECOT_HASH=stoa
SCHEME=argon2id
bench_cmdline "$@"
parse_args "--rounds=ROUNDS --users=USERS --messages=MESSAGES --size=SIZE --clients=CLIENTS --workers=WORKERS
    --dovecot-hash=DOVECOT_HASH --scheme=SCHEME" "$@"
require_positive "rounds, users, messages, size, clients and workers must be positive integers" \
    "$ROUNDS" "$USERS" "$MESSAGES" "$SIZE" "$CLIENTS" "$WORKERS"
((SIZE >= 256)) || die "--size must be at least 256 bytes"
((USERS <= 100000 && MESSAGES <= 1000 && SIZE <= 10000000 && CLIENTS <= 256 && WORKERS <= 64)) ||
    die "settings out of range (users <= 100000, messages <= 1000, size <= 10 MB, clients <= 256, workers <= 64)"
[[ "$DOVECOT_HASH" == stoa || "$DOVECOT_HASH" == doveadm ]] || die "--dovecot-hash is stoa or doveadm"
SCHEME="${SCHEME,,}"
DV_SCHEME="$(dovecot_scheme "$SCHEME")" || die "--scheme is argon2id, sha512-crypt, blf-crypt, ssha or plain"

[[ "$(id -u)" == 0 ]] || die "run as root (Dovecot's master process needs it)"
ensure_commands python3:python3 timeout:coreutils git:git
ensure_dovecot
require_users mail dovecot dovenull
MAIL_UID="$(id -u mail)"
MAIL_GID="$(id -g mail)"

bench_setup
bench_begin pop3

# --- messages --------------------------------------------------------------------

# M templates of SIZE bytes each (header + body, LF line endings, text of 72-column
# lines, some starting with a dot so that byte-stuffing is exercised).
TEMPLATES="$BENCH_TMP/templates"
mkdir -p "$TEMPLATES"
python3 - "$TEMPLATES" "$MESSAGES" "$SIZE" <<'EOF'
import random, sys
d, m, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(20010101)
alpha = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789,;:-"
for k in range(1, m + 1):
    head = (f"From: bench@example.test\nTo: bench-users@example.test\nSubject: bench message {k}\n"
            f"Message-ID: <bench-{k}@example.test>\nDate: Mon, 1 Jan 2001 00:00:00 +0000\n\n")
    body, n = [], len(head)
    while n < size:
        line = "".join(rng.choice(alpha) for _ in range(71))
        if rng.random() < 0.05:
            line = "." + line[1:]
        line = line[: max(0, size - n - 1)]
        body.append(line)
        n += len(line) + 1
    with open(f"{d}/{k:04d}.eml", "w") as f:
        f.write(head + "\n".join(body) + "\n")
EOF

# --- stoa --------------------------------------------------------------------------

STOA_MAIL="$BENCH_TMP/stoa-mail"
STOA_CONF="$BENCH_TMP/stoa.toml"
cat >"$STOA_CONF" <<EOF
[pop3]
allow_plaintext_auth = true
max_connections_per_client = 0
hostname = "pop.example.test"

[directory]
password_scheme = "$SCHEME"
allow_plain_passwords = $([[ "$SCHEME" == plain ]] && echo true || echo false)
EOF
STOA_ARGS=(serve --config "$STOA_CONF" --mail-dir "$STOA_MAIL" --smtp-listen 127.0.0.1:0
    --pop3-listen 127.0.0.1:0 --domain example.test --workers "$WORKERS")

log "creating $USERS users in stoa (stoa user add --scheme $SCHEME, its configured cost)"
for ((i = 1; i <= USERS; i++)); do
    printf 'pw-u%d\n' "$i" | "$STOA_BIN" user add "u$i@example.test" --scheme "$SCHEME" --config "$STOA_CONF" \
        --password-stdin --mail-dir "$STOA_MAIL" \
        >/dev/null 2>"$BENCH_TMP/user-add.log" || die "stoa user add u$i@example.test failed: $(cat "$BENCH_TMP/user-add.log")"
done

# start_stoa_mail -> STOA_PID, STOA_SMTP, STOA_POP3 (ports from the "listening" lines).
start_stoa_mail() {
    start_stoa_with "$BENCH_TMP/stoa-stderr.log" "smtp pop3" "${STOA_ARGS[@]}"
    STOA_SMTP="${STOA_PORTS[smtp]}" STOA_POP3="${STOA_PORTS[pop3]}"
}

# Messages in every user's stoa mailbox, one "count" per line (u1..uN).
stoa_counts() {
    local i
    for ((i = 1; i <= USERS; i++)); do
        "$STOA_BIN" mailbox stat "u$i@example.test" --mail-dir "$STOA_MAIL" 2>/dev/null |
            grep -o -m1 '[0-9][0-9]* message' | cut -d' ' -f1 || echo "?"
    done
}

# Sends the templates to every user through stoa's SMTP (4 parallel senders), then
# waits up to 300 s for every mailbox to hold exactly M messages.
fill_stoa() {
    timeout 600 python3 - "$STOA_SMTP" "$USERS" "$TEMPLATES" <<'EOF' || die "sending through stoa's SMTP failed"
import concurrent.futures, os, smtplib, sys
port, users, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
msgs = [open(os.path.join(d, n), "rb").read().replace(b"\n", b"\r\n")
        for n in sorted(os.listdir(d)) if n.endswith(".eml")]
def send(share):
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as s:
        for i in share:
            for m in msgs:
                s.sendmail("bench@example.test", [f"u{i}@example.test"], m)
shares = [range(1 + w, users + 1, 4) for w in range(4)]
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    for f in [ex.submit(send, s) for s in shares]:
        f.result()
EOF
    local start=$SECONDS counts bad
    while :; do
        counts="$(stoa_counts)"
        bad="$(grep -cvx "$MESSAGES" <<<"$counts" || true)"
        ((bad == 0)) && return 0
        ((SECONDS - start < 300)) || die "stoa: $bad mailboxes do not hold $MESSAGES messages after 300 s"
        sleep 0.5
    done
}

# --- dovecot ----------------------------------------------------------------------

DV="$BENCH_TMP/dovecot"
DV_MAIL="$DV/mail"
mkdir -p "$DV"/{base,state} "$DV_MAIL"
chmod 755 "$DV" "$DV_MAIL"
DV_PORT="$(free_port)"

# Passwords: the same {SCHEME}value strings as stoa's directory holds (--dovecot-hash
# stoa: Dovecot's passwd-file takes them as they are, same scheme, cost and salt), or
# Dovecot's own `doveadm pw -s SCHEME` (--dovecot-hash doveadm; its default costs).
log "writing Dovecot's passwd-file ($DOVECOT_HASH $DV_SCHEME hashes)"
declare -A STOA_PHC=()
while read -r kind login _ _ value _; do
    # Directories written before schemes hold bare argon2 PHC strings.
    [[ "$value" == "\$argon2"* ]] && value="{ARGON2ID}$value"
    [[ "$kind" == user && "$value" == "{"* ]] && STOA_PHC["$login"]="$value"
done < <(cat "$STOA_MAIL"/directory/entries.txt 2>/dev/null || true)
: >"$DV/users"
for ((i = 1; i <= USERS; i++)); do
    login="u$i@example.test"
    if [[ "$DOVECOT_HASH" == stoa ]]; then
        [[ -n "${STOA_PHC[$login]:-}" ]] || die "no password for $login in $STOA_MAIL/directory (format changed?)"
        hash="${STOA_PHC[$login]}"
    else
        dv_name="$DV_SCHEME"
        [[ "$dv_name" == PLAIN ]] && dv_name=PLAIN.BASE64
        hash="$("$DOVEADM_BIN" pw -s "$dv_name" -p "pw-u$i")"
    fi
    printf '%s:%s::::::\n' "$login" "$hash" >>"$DV/users"
done
chmod 644 "$DV/users"
STOA_COST="$(scheme_cost <<<"${STOA_PHC[u1@example.test]:-}")"
DV_COST="$(scheme_cost <"$DV/users")"

{
    dovecot_conf_head "Private Dovecot for bench/compare-pop3.sh (\$TMP = the benchmark's temp dir)." \
        "$DV" stoa-bench-dovecot "$DV/dovecot.log"
    cat <<EOF
mail_location = maildir:$DV_MAIL/%u
first_valid_uid = $MAIL_UID
default_internal_user = dovecot
default_login_user = dovenull
passdb {
  driver = passwd-file
  args = scheme=$DV_SCHEME $DV/users
}
userdb {
  driver = static
  args = uid=$MAIL_UID gid=$MAIL_GID home=$DV_MAIL/%u
}
# Worker budget: $WORKERS login process(es) in high-performance mode (like stoa's
# $WORKERS event loop(s)); pop3 processes are one per session (Dovecot's model),
# reused for up to 100 sessions, $WORKERS kept ready.
EOF
    dovecot_conf_pop3_login "$DV_PORT" "$WORKERS" "process_limit = $WORKERS"
    cat <<EOF
service pop3 {
  service_count = 100
  process_min_avail = $WORKERS
  process_limit = 1024
}
mail_max_userip_connections = 10
EOF
    dovecot_conf_no_imap
} >"$DV/dovecot.conf"
dovecot_check "$DV/dovecot.conf" "$DV/dovecot-n.txt"

start_dovecot() {
    rm -f "$DV/base/master.pid"
    "$DOVECOT_BIN" -F -c "$DV/dovecot.conf" 2>>"$DV/stderr.log" &
    DV_PID=$!
    SERVER_PIDS+=("$DV_PID")
    wait_port "$DV_PORT" "$DV_PID" || die "dovecot did not start on $DV_PORT: $(tail -n 5 "$DV/dovecot.log" "$DV/stderr.log" 2>/dev/null)"
}

# Writes the stoa-exported messages into every Dovecot user's Maildir new/.
fill_dovecot() {
    python3 - "$DV_MAIL" "$USERS" "$BENCH_TMP/exported" <<'EOF' || die "filling Dovecot's Maildirs failed"
import os, sys, time
base, users, src = sys.argv[1], int(sys.argv[2]), sys.argv[3]
# Dovecot's own convention for Maildir files: LF line endings (it sends CRLF).
msgs = [open(os.path.join(src, n), "rb").read().replace(b"\r\n", b"\n") for n in sorted(os.listdir(src))]
t = int(time.time())
for i in range(1, users + 1):
    d = os.path.join(base, f"u{i}@example.test")
    for sub in ("new", "cur", "tmp"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    for k, m in enumerate(msgs):
        name = f"{t}.M{k}P{os.getpid()}.bench"
        tmp = os.path.join(d, "tmp", name)
        with open(tmp, "wb") as f:
            f.write(m)
        os.rename(tmp, os.path.join(d, "new", name))
EOF
    chown -R "$MAIL_UID:$MAIL_GID" "$DV_MAIL"
}

# Messages left in Dovecot's Maildirs (all users).
dovecot_left() {
    find "$DV_MAIL" -type f \( -path '*/new/*' -o -path '*/cur/*' \) 2>/dev/null | grep -c . || true
}

# --- setup: one delivery through stoa, exported as Dovecot's message files ------------

start_stoa_mail
log "stoa (pid $STOA_PID): SMTP 127.0.0.1:$STOA_SMTP, POP3 127.0.0.1:$STOA_POP3"
fill_stoa
mkdir -p "$BENCH_TMP/exported-md"
"$STOA_BIN" mailbox export u1@example.test --mail-dir "$STOA_MAIL" --to "$BENCH_TMP/exported-md" >/dev/null ||
    die "stoa mailbox export failed"
mkdir -p "$BENCH_TMP/exported"
find "$BENCH_TMP/exported-md" -type f \( -path '*/new/*' -o -path '*/cur/*' \) -exec cp {} "$BENCH_TMP/exported/" \;
(($(find "$BENCH_TMP/exported" -type f | wc -l) == MESSAGES)) || die "stoa mailbox export gave the wrong number of messages"
MSG_BYTES="$(cat "$BENCH_TMP/exported"/* | wc -c)"
# Sanity check: one client run empties stoa (and checks bytes) before anything is measured.
run_client() { # PORT [--login-only] -> CLIENT_JSON
    local port="$1"
    shift
    CLIENT_JSON="$(timeout --kill-after=10 900 python3 "$BENCH_DIR/pop3-sessions.py" --port "$port" \
        --users "$USERS" --clients "$CLIENTS" --messages "$MESSAGES" --templates "$TEMPLATES" \
        --timeout 840 "$@" 2>>"$BENCH_TMP/client-stderr.log")" || CLIENT_JSON='{"sessions":0,"ok":0,"errors":1,"wall_s":0,"sessions_per_sec":0,"bytes":0,"bytes_per_sec":0}'
}
jget() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
run_client "$STOA_POP3"
(($(jget "$CLIENT_JSON" errors) == 0)) || die "sanity run against stoa had errors: $(tail -n 5 "$BENCH_TMP/client-stderr.log")"
stop_server "$STOA_PID"
fill_dovecot
start_dovecot
run_client "$DV_PORT"
# What Dovecot runs (to check, e.g., that no auth-worker process verifies passwords).
DV_PROCS="$(for c in $(child_pids "$DV_PID"); do cat "/proc/$c/comm" 2>/dev/null; done | sort | uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')"
(($(jget "$CLIENT_JSON" errors) == 0)) || die "sanity run against dovecot had errors: $(tail -n 5 "$BENCH_TMP/client-stderr.log") $(tail -n 3 "$DV/dovecot.log")"
stop_server "$DV_PID"
log "sanity runs passed; $MESSAGES messages, $MSG_BYTES bytes per mailbox as stored by stoa"

# --- rounds --------------------------------------------------------------------------

new_raw_csv
LOG="$OUT/sessions.log"
CPU_CSV="$OUT/server-cpu.csv"
echo "round,row,server,cpu_ms_per_session" >"$CPU_CSV"
: >"$LOG"
TICK="$(getconf CLK_TCK)"

# measure ROUND ROW SERVER: starts the server fresh, runs the client, stops it.
measure() {
    local r="$1" row="$2" s="$3" pid port s0 s1 other srv_ticks extra=() errs left
    if [[ "$s" == stoa ]]; then
        start_stoa_mail
        pid="$STOA_PID" port="$STOA_POP3"
    else
        start_dovecot
        pid="$DV_PID" port="$DV_PORT"
    fi
    [[ "$row" == pop3-login-only ]] && extra=(--login-only)
    : >"$BENCH_TMP/client-stderr.log"
    # "TOTAL BUSY OURS SERVER": the server's process tree (Dovecot forks a pop3
    # process per session), the client, and the server alone.
    s0="$(cpu_snapshot "tree:$pid") $(tree_ticks "$pid")"
    run_client "$port" "${extra[@]}"
    s1="$(cpu_snapshot "tree:$pid") $(tree_ticks "$pid")"
    other="$(other_cpu_pct "${s0% *}" "${s1% *}")"
    srv_ticks=$((${s1##* } - ${s0##* }))
    kill -0 "$pid" 2>/dev/null || die "$s died during round $r $row"
    stop_server "$pid"
    errs="$(jget "$CLIENT_JSON" errors)"
    # Every mailbox must be empty afterwards.
    if [[ "$s" == stoa ]]; then
        left="$(stoa_counts | grep -vx 0 | grep -c . || true)"
    else
        left="$(dovecot_left)"
    fi
    if ((left != 0)); then
        log "!!! $s round $r $row: $left mailboxes/messages not empty after the run"
        errs=$((errs + 1))
    fi
    local sps bps
    sps="$(jget "$CLIENT_JSON" sessions_per_sec)"
    bps="$(jget "$CLIENT_JSON" bytes_per_sec)"
    echo "$r,$row,$s,$sps,$bps,$errs,$other,," >>"$RAW"
    awk -v t="$srv_ticks" -v k="$TICK" -v n="$USERS" -v pre="$r,$row,$s" 'BEGIN{printf "%s,%.2f\n", pre, 1000*t/k/n}' >>"$CPU_CSV"
    {
        echo "=== round $r row $row server $s: $CLIENT_JSON; server CPU $(awk -v t="$srv_ticks" -v k="$TICK" 'BEGIN{printf "%.2f", t/k}') s; other CPU ${other}%; left $left"
        cat "$BENCH_TMP/client-stderr.log"
    } >>"$LOG"
    local msg
    msg="round $r $row $s: $sps sessions/s (server CPU $(awk -v t="$srv_ticks" -v k="$TICK" -v n="$USERS" 'BEGIN{printf "%.1f", 1000*t/k/n}') ms/session, other CPU ${other}%)"
    ((errs == 0)) || msg+="  !!! ERRORS: $errs ($(head -2 "$BENCH_TMP/client-stderr.log" | tr '\n' ' '))"
    log "$msg"
}

log "running $ROUNDS rounds x 2 rows x 2 servers, $USERS users x $MESSAGES messages, $CLIENTS client processes"
for ((r = 1; r <= ROUNDS; r++)); do
    ((r == 1)) || wait_idle
    round_order "$r" dovecot stoa
    # Fill both: stoa through SMTP (then stopped, so its login cache starts empty), Dovecot as files.
    start_stoa_mail
    fill_stoa
    stop_server "$STOA_PID"
    fill_dovecot
    for s in "${ORDER[@]}"; do measure "$r" pop3-session "$s"; done
    for s in "${ORDER[@]}"; do measure "$r" pop3-login-only "$s"; done
done

check_background "after the run (servers stopped)"

# summarize.py speaks wrk's language; translate.
python3 "$BENCH_DIR/summarize.py" "$RAW" dovecot stoa |
    sed -e 's/req\/s/sess\/s/g' \
        -e 's/no socket errors and no non-2xx\/3xx responses in any run/no errors in any run (failed checks, POP3 errors, mailboxes left non-empty)/' \
        -e 's/(socket errors or non-2xx\/3xx)/(failed checks, POP3 errors or mailboxes left non-empty)/' \
        -e 's/req\/s may be meaningless; see wrk.log/sessions\/s may be meaningless; see sessions.log/' |
    tee "$OUT/summary.txt"
# Server CPU per session: less sensitive to other load than sessions/s.
python3 - "$CPU_CSV" <<'EOF' | tee -a "$OUT/summary.txt"
import csv, statistics, sys
d = {}
for r in csv.DictReader(open(sys.argv[1])):
    d.setdefault((r["row"], r["server"]), []).append(float(r["cpu_ms_per_session"]))
print()
print("server CPU per session (ms, all its processes and threads; median [min-max] over rounds)")
for row in dict.fromkeys(k[0] for k in d):
    cells = []
    for s in ("dovecot", "stoa"):
        v = d.get((row, s), [])
        cells.append(f"{s} {statistics.median(v):.1f} [{min(v):.1f}-{max(v):.1f}]" if v else f"{s} n/a")
    print(f"{row:<22} " + "   ".join(cells))
EOF
save_config "$DV/dovecot.conf" "$OUT/dovecot.conf"
save_config "$STOA_CONF" "$OUT/stoa.toml"

{
    readme_header "POP3 sessions: stoa vs Dovecot"
    echo "- Dovecot: $("$DOVECOT_BIN" --version) (Debian $(dpkg-query -W -f '${Version}' dovecot-pop3d 2>/dev/null || echo '?'))"
    echo "- Python: $(python3 --version 2>&1)"
    readme_section Setup
    echo "- Loopback only (127.0.0.1). Client and servers share the machine's $(nproc) cores."
    echo "- Users u1..u$USERS@example.test, password pw-u<i>, on both servers."
    echo "- Messages: $MESSAGES per user per round, each a fixed ${SIZE}-byte text message (header + 72-column"
    echo "  lines, some starting with a dot) plus the Received: header stoa's SMTP adds; $MSG_BYTES bytes per mailbox"
    echo "  as stoa stores them. Stoa's mailboxes are filled through its SMTP (Python smtplib, 4 senders),"
    echo "  waiting for \`stoa mailbox stat\` to show all of them; Dovecot's by writing the same bytes (u1's"
    echo "  mailbox as \`stoa mailbox export\` wrote it) as Maildir files into new/."
    echo "- Passwords: {$DV_SCHEME} (--scheme $SCHEME). stoa: \`stoa user add --scheme $SCHEME --password-stdin\`"
    echo "  at its configured cost ($STOA_COST)."
    if [[ "$DOVECOT_HASH" == stoa ]]; then
        echo "  Dovecot: the same {$DV_SCHEME} strings as stoa's directory holds, so the same cost ($DV_COST)."
        if [[ "$SCHEME" == argon2id ]]; then
            echo "  Dovecot's own \`doveadm pw -s ARGON2ID\` cannot make hashes this cheap (its minimum is"
            echo "  m=65536,t=3,p=1); \`--dovecot-hash doveadm\` uses those instead."
        fi
    else
        echo "  Dovecot: \`doveadm pw -s $DV_SCHEME\` ($DV_COST), Dovecot's default cost for the scheme, which"
        echo "  may differ from stoa's; \`--dovecot-hash stoa\` (the default) gives Dovecot stoa's strings."
    fi
    echo "- Both servers are started fresh before every measurement, so every login runs the scheme's check once: stoa's"
    echo "  cache of successful checks (15 min) starts empty, and Dovecot's auth cache is off (its default)."
    echo "- stoa: \`stoa ${STOA_ARGS[*]//$BENCH_TMP/\$TMP}\` with stoa.toml (plaintext login allowed,"
    echo "  no per-address connection limit). $WORKERS event loop(s); argon2 and file work run on its blocking pool."
    echo "- Dovecot: dovecot.conf here (\`dovecot -F -c FILE\`, private base_dir/state_dir, Maildir, passwd-file"
    echo "  + static userdb, mail processes as user mail). $WORKERS pop3-login process(es) in high-performance mode"
    echo "  (service_count 0); a pop3 process per session (reused up to 100 times, $WORKERS kept ready); one auth"
    echo "  process (passwd-file verification runs there, not in auth workers); logging to a file."
    echo "  Dovecot's processes after the sanity run (comm, truncated by the kernel): $DV_PROCS."
    echo "- Any system Dovecot is stopped first (not disabled)."
    echo "- Message templates: ${SIZE} bytes each with LF line endings, more on the wire (CRLF)." 
    echo "- Client: bench/pop3-sessions.py, $CLIENTS processes, each running sessions one after another for its"
    echo "  share of the users (poplib). Row pop3-session: USER, PASS, STAT, LIST, RETR all, DELE all, QUIT."
    echo "  Row pop3-login-only: USER, PASS, STAT (empty mailbox), QUIT. sessions/s = users / wall time."
    echo "  Checked: STAT count, RETR octets = LIST size, every body byte-identical to a template (once each);"
    echo "  after each run every mailbox must be empty. Any failure is an error."
    echo "- $ROUNDS rounds; Dovecot first in odd rounds, stoa in even ones; both rows per round."
    readme_background
    readme_section Files
    echo "- raw.csv: round,row,server,req_per_sec (= sessions/s),transfer (bytes retrieved/s),errors,"
    echo "  other_cpu_pct (% of all CPU used by processes other than the client and the server's process tree)"
    echo "- summary.txt: medians over rounds and the per-round ratio stoa/dovecot (median, min, max)"
    echo "- server-cpu.csv: round,row,server,cpu_ms_per_session (the server's CPU time / users)"
    echo "- sessions.log: every client result with the server's CPU seconds; dovecot.conf, stoa.toml"
    readme_summary
} >"$OUT/README.md"
results_done
