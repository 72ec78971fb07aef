#!/usr/bin/env bash
# The cost of the LMTP hop: an MTA delivering locally vs an MTA routing to a store host.
#
#   bench/lmtp-hop.sh [--rounds 3] [--messages 2000] [--sessions 8] [--size 4096]
#                     [--delivery-timeout 300] [--run-timeout 600]
#
# One private slapd (a few users, all with mailHost store-a.stoa.test) and two
# setups of `stoa serve` on loopback, given the same smtp-source load (1 recipient
# a message):
#   local: one process that is both MTA and store-a (this_host = store-a), so
#          every message goes into its own store;
#   lmtp:  an MTA (this_host = mx, a [[mail_host]] entry for store-a) and a
#          store host store-a (LMTP); every message crosses the hop from the
#          MTA's queue.
# Per run: messages/s accepted (smtp-source's wall time) and accepted-and-delivered
# (start to the last message in store-a's mailboxes, counted as files), and the
# CPU time of the stoa processes per message. Rounds alternate the order (local
# lmtp, lmtp local, ...). Results go to bench-results/<date>-<host>-lmtp-hop/.
# See bench/README.md.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3
MESSAGES=2000
SESSIONS=8
SIZE=4096
DELIVERY_TIMEOUT=300
RUN_TIMEOUT=600
BASE="dc=stoa,dc=test"
ADMIN_DN="cn=admin,$BASE"
RCPT="u1@stoa.test"
SENDER="bench@client.test"
bench_cmdline "$@"
parse_args "--rounds=ROUNDS --messages=MESSAGES --sessions=SESSIONS --size=SIZE
    --delivery-timeout=DELIVERY_TIMEOUT --run-timeout=RUN_TIMEOUT" "$@"
require_positive "every option takes a positive integer" \
    "$ROUNDS" "$MESSAGES" "$SESSIONS" "$SIZE" "$DELIVERY_TIMEOUT" "$RUN_TIMEOUT"
((SESSIONS <= 200)) || die "--sessions: at most 200"
((MESSAGES <= 100000)) || die "--messages: at most 100000"

ensure_commands python3:python3 timeout:coreutils slapd:slapd slapadd:slapd smtp-source:postfix
bench_setup 0

# Disk: each setup keeps one round's messages (queue files are removed on delivery).
need_kib=$((MESSAGES * (SIZE + 2048) * 3 / 1024 + 256 * 1024))
free_kib="$(df -Pk "$BENCH_TMP" | awk 'NR == 2 { print $4 }')"
((free_kib >= need_kib)) ||
    die "$((free_kib / 1024)) MiB free under $BENCH_TMP, need about $((need_kib / 1024)) MiB"

bench_begin lmtp-hop

# --- slapd ---------------------------------------------------------------------------

SLAPD_DIR="$BENCH_TMP/slapd"
slapd_conf "$SLAPD_DIR" 4
{
    printf 'dn: %s\nobjectClass: top\nobjectClass: dcObject\nobjectClass: organization\no: Stoa bench\ndc: stoa\n\n' "$BASE"
    printf 'dn: ou=people,%s\nobjectClass: organizationalUnit\nou: people\n\n' "$BASE"
    for n in 1 2 3 4; do
        printf 'dn: uid=u%s,ou=people,%s\nobjectClass: inetOrgPerson\nobjectClass: inetLocalMailRecipient\n' "$n" "$BASE"
        printf 'uid: u%s\ncn: u%s\nsn: u%s\nmail: u%s@stoa.test\nmailHost: store-a.stoa.test\nemployeeNumber: %s\n\n' \
            "$n" "$n" "$n" "$n" "$n"
    done
} >"$SLAPD_DIR/users.ldif"
slapd_load "$SLAPD_DIR" "$SLAPD_DIR/users.ldif" 60
slapd_start "$SLAPD_DIR"
log "slapd (pid $SLAPD_PID) on 127.0.0.1:$LDAP_PORT"
printf 'admin-secret\n' >"$BENCH_TMP/ldap.secret"

# directory_table THIS_HOST: the [directory] every process uses.
directory_table() {
    cat <<EOF
[directory]
backend = "ldap"
urls = ["ldap://127.0.0.1:$LDAP_PORT"]
base = "$BASE"
bind_dn = "$ADMIN_DN"
bind_password_file = "ldap.secret"
this_host = "$1"
EOF
}

# The load is all from 127.0.0.1: no per-client connection limit.
SMTP_TABLE='[smtp]
hostname = "mx.stoa.test"
max_connections_per_client = 0
'

# --- local: one process, MTA and store -------------------------------------------------

{ printf '%s\n' "$SMTP_TABLE"; directory_table store-a.stoa.test; } >"$BENCH_TMP/local.toml"
mkdir -p "$BENCH_TMP/local"
start_stoa_with "$BENCH_TMP/local.err" smtp serve --config "$BENCH_TMP/local.toml" \
    --mail-dir "$BENCH_TMP/local" --smtp-listen 127.0.0.1:0
LOCAL_PID="$STOA_PID"
LOCAL_PORT="${STOA_PORTS[smtp]}"
log "local: stoa (pid $LOCAL_PID) on 127.0.0.1:$LOCAL_PORT"

# --- lmtp: a store host and an MTA ------------------------------------------------------

{ printf '[lmtp]\nhostname = "store-a.stoa.test"\n\n'; directory_table store-a.stoa.test; } >"$BENCH_TMP/store.toml"
mkdir -p "$BENCH_TMP/store"
start_stoa_with "$BENCH_TMP/store.err" lmtp serve --config "$BENCH_TMP/store.toml" \
    --mail-dir "$BENCH_TMP/store" --lmtp-listen 127.0.0.1:0
STORE_PID="$STOA_PID"
STORE_LMTP="${STOA_PORTS[lmtp]}"
log "lmtp: store host (pid $STORE_PID), LMTP on 127.0.0.1:$STORE_LMTP"
{
    printf '%s\n' "$SMTP_TABLE"
    directory_table mx.stoa.test
    printf '\n[[mail_host]]\nname = "store-a.stoa.test"\nlmtp = "127.0.0.1:%s"\n' "$STORE_LMTP"
} >"$BENCH_TMP/mta.toml"
mkdir -p "$BENCH_TMP/mta"
start_stoa_with "$BENCH_TMP/mta.err" smtp serve --config "$BENCH_TMP/mta.toml" \
    --mail-dir "$BENCH_TMP/mta" --smtp-listen 127.0.0.1:0
MTA_PID="$STOA_PID"
MTA_PORT="${STOA_PORTS[smtp]}"
log "lmtp: MTA (pid $MTA_PID) on 127.0.0.1:$MTA_PORT"
for f in local store mta; do save_config "$BENCH_TMP/$f.toml" "$OUT/$f.toml"; done
save_config "$SLAPD_DIR/slapd.conf" "$OUT/slapd.conf"

declare -A PORT=([local]="$LOCAL_PORT" [lmtp]="$MTA_PORT")
declare -A MAILBOXES=([local]="$BENCH_TMP/local/store/mailboxes" [lmtp]="$BENCH_TMP/store/store/mailboxes")
# The stoa processes of each setup (word-split where used).
declare -A PIDS=([local]="$LOCAL_PID" [lmtp]="$MTA_PID $STORE_PID")

check_alive() {
    local p
    for p in "$LOCAL_PID" "$STORE_PID" "$MTA_PID" "$SLAPD_PID"; do
        kill -0 "$p" 2>/dev/null || die "pid $p died (see $BENCH_TMP/*.err, slapd.log)"
    done
}
count_delivered() {
    [[ -d "${MAILBOXES[$1]}" ]] || { echo 0; return; }
    find "${MAILBOXES[$1]}" -type f | wc -l
}
clear_delivered() {
    if [[ -d "${MAILBOXES[$1]}" ]]; then find "${MAILBOXES[$1]}" -type f -delete; fi
}
stoa_ticks() {
    local p t=0
    for p in ${PIDS[$1]}; do t=$((t + $(proc_ticks "$p"))); done
    echo "$t"
}

# run_once SETUP: one round's run; prints "ACCEPTED_PER_S DELIVERED_PER_S CPU_MS_PER_MSG OTHER_CPU%".
run_once() {
    local s="$1" rc=0 t0 t1 t2="" n start c0 c1 snap0 snap1
    clear_delivered "$s"
    # shellcheck disable=SC2086 # a list of pids
    snap0="$(cpu_snapshot ${PIDS[$s]})"
    c0="$(stoa_ticks "$s")"
    t0="$(date +%s.%N)"
    timeout --kill-after=5 "$RUN_TIMEOUT" /usr/sbin/smtp-source -s "$SESSIONS" -m "$MESSAGES" \
        -l "$SIZE" -f "$SENDER" -t "$RCPT" -M client.test "127.0.0.1:${PORT[$s]}" \
        >"$BENCH_TMP/smtp-source.out" 2>&1 || rc=$?
    t1="$(date +%s.%N)"
    ((rc == 0)) || die "$s: smtp-source exit $rc: $(head -c 300 "$BENCH_TMP/smtp-source.out")"
    start=$SECONDS
    while ((SECONDS - start < DELIVERY_TIMEOUT)); do
        n="$(count_delivered "$s")"
        if ((n >= MESSAGES)); then t2="$(date +%s.%N)"; break; fi
        sleep 0.05
    done
    c1="$(stoa_ticks "$s")"
    # shellcheck disable=SC2086 # a list of pids
    snap1="$(cpu_snapshot ${PIDS[$s]})"
    [[ -n "$t2" ]] || die "$s: only $(count_delivered "$s") of $MESSAGES delivered after ${DELIVERY_TIMEOUT}s"
    n="$(count_delivered "$s")"
    ((n == MESSAGES)) || die "$s: $n messages delivered, expected $MESSAGES (duplicates?)"
    awk -v m="$MESSAGES" -v a="$t0" -v b="$t1" -v c="$t2" -v cpu="$((c1 - c0))" \
        -v hz="$(getconf CLK_TCK)" -v other="$(other_cpu_pct "$snap0" "$snap1")" \
        'BEGIN { printf "%.1f %.1f %.3f %s\n", m / (b - a), m / (c - a), 1000 * cpu / hz / m, other }'
}

RUNLOG="$OUT/runs.tsv"
printf 'round\tsetup\taccepted_per_s\tdelivered_per_s\tstoa_cpu_ms_per_msg\tother_cpu_pct\n' >"$RUNLOG"
# Warm-up: the directory caches and the store's first mailbox, outside the figures.
for s in local lmtp; do
    MESSAGES_SAVED="$MESSAGES"
    MESSAGES=50
    run_once "$s" >/dev/null
    MESSAGES="$MESSAGES_SAVED"
done
for ((r = 1; r <= ROUNDS; r++)); do
    round_order "$r" local lmtp
    for s in "${ORDER[@]}"; do
        check_alive
        line="$(run_once "$s")"
        log "round $r $s: $line (accepted/s delivered/s cpu-ms/msg other-cpu%)"
        printf '%s\t%s\t%s\n' "$r" "$s" "${line// /$'\t'}" >>"$RUNLOG"
    done
done
check_background "after the runs"

python3 - "$RUNLOG" >"$OUT/summary.txt" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
def col(setup, key):
    return [float(r[key]) for r in rows if r["setup"] == setup]
def spread(v, d):
    return f"{statistics.median(v):8.{d}f} (min {min(v):.{d}f}, max {max(v):.{d}f})"
print(f"{'':24} {'local':>34} {'lmtp':>34}")
for key, name, d in [("accepted_per_s", "accepted msgs/s", 1), ("delivered_per_s", "delivered msgs/s", 1),
                     ("stoa_cpu_ms_per_msg", "stoa CPU ms/msg", 2)]:
    print(f"{name:24} {spread(col('local', key), d):>34} {spread(col('lmtp', key), d):>34}")
print()
for key, name in [("accepted_per_s", "accepted"), ("delivered_per_s", "delivered"),
                  ("stoa_cpu_ms_per_msg", "CPU per message")]:
    rounds = sorted({r["round"] for r in rows})
    ratios = [col("lmtp", key)[i] / col("local", key)[i] for i in range(len(rounds))]
    print(f"lmtp/local {name:16} median {statistics.median(ratios):.2f} "
          f"(per round: {', '.join(f'{x:.2f}' for x in ratios)})")
print(f"other processes' CPU during the runs: {', '.join(r['other_cpu_pct'] + '%' for r in rows)}")
EOF
cat "$OUT/summary.txt" >&2

{
    readme_header "LMTP hop: local delivery vs MTA -> store host over LMTP"
    readme_section "Setup"
    echo "- slapd on loopback with 4 users, all mailHost store-a.stoa.test; configurations saved here (local.toml, mta.toml, store.toml, slapd.conf)"
    echo "- smtp-source -s $SESSIONS -m $MESSAGES -l $SIZE -t $RCPT (one recipient a message), $ROUNDS rounds, order alternating"
    echo "- delivered = message files in store-a's mailboxes, polled every 50 ms; CPU = utime+stime of the stoa processes (MTA + store host for lmtp)"
    readme_background
    readme_summary
} >"$OUT/README.md"
results_done
