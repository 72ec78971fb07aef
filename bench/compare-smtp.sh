#!/usr/bin/env bash
# Stoa vs Postfix, SMTP over loopback, interleaved rounds of Postfix's smtp-source.
#
#   bench/compare-smtp.sh [--rounds 3] [--messages 2000] [--sessions 10] [--workers 1]
#                         [--delivery-timeout 300] [--run-timeout 600]
#
# A private Postfix instance (virtual(8) delivery to Maildir, fsync on) and `stoa
# serve` (mail store) receive the same smtp-source load: 1 and 10 recipients per
# message, 4 KiB and 100 KiB messages. Per run: messages/s accepted (smtp-source's
# wall time) and delivered (start to the last delivery); the delivered count is
# checked against what was sent. Results go to bench-results/<date>-<host>-smtp/.
# See bench/README.md.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=3
MESSAGES=2000
SESSIONS=10
STOA_WORKERS=1
DELIVERY_TIMEOUT=300
RUN_TIMEOUT=600
bench_cmdline "$@"
parse_args "--rounds=ROUNDS --messages=MESSAGES --sessions=SESSIONS --workers=STOA_WORKERS
    --delivery-timeout=DELIVERY_TIMEOUT --run-timeout=RUN_TIMEOUT" "$@"
require_positive "every option takes a positive integer" \
    "$ROUNDS" "$MESSAGES" "$SESSIONS" "$STOA_WORKERS" "$DELIVERY_TIMEOUT" "$RUN_TIMEOUT"
((SESSIONS <= 1000)) || die "--sessions: at most 1000"

# smtp-source -r N -t u@example.test sends to u@, 2u@, ..., Nu@example.test.
MAX_RCPTS=10
RCPT_BASE="u@example.test"
USERS=("$RCPT_BASE")
for ((i = 2; i <= MAX_RCPTS; i++)); do USERS+=("${i}$RCPT_BASE"); done
SENDER="bench@client.test"

[[ "$(id -u)" == 0 ]] || die "run as root: Postfix's master must start as root"
ensure_commands python3:python3 timeout:coreutils git:git find:findutils
ensure_postfix
bench_setup 0

# Disk: the 100k-10rcpt row puts MESSAGES x 10 copies of ~101 KiB into Postfix's
# Maildirs (one per recipient) before they are removed; stoa stores one per message.
need_kib=$((MESSAGES * 10 * 101 * 12 / 10 + 512 * 1024))
free_kib="$(df -Pk "$BENCH_TMP" | awk 'NR == 2 { print $4 }')"
((free_kib >= need_kib)) ||
    die "$((free_kib / 1024)) MiB free under $BENCH_TMP, need about $((need_kib / 1024)) MiB for --messages $MESSAGES"

bench_begin smtp

# --- Postfix -------------------------------------------------------------------------

postfix_layout "$BENCH_TMP"
PF_PORT="$(free_port)"
bench_on_exit postfix_stop

write_postfix_main_cf "Private Postfix instance for bench/compare-smtp.sh (\$TMP = its temp directory)." \
    mx.bench.invalid example.test "
# Processes per service (smtpd's own limit is in master.cf: one per session).
# 20 is also Postfix's default delivery concurrency per destination, and stoa's
# default max_deliveries.
default_process_limit = 20
# Same as stoa's defaults.
message_size_limit = 10240000"
write_postfix_master_cf "$PF_PORT" "$SESSIONS"
: >"$PF_CONF/vmailbox"
for u in "${USERS[@]}"; do printf '%s %s/Maildir/\n' "$u" "${u%@*}" >>"$PF_CONF/vmailbox"; done
/usr/sbin/postmap -c "$PF_CONF" "hash:$PF_CONF/vmailbox"
postfix_check
postfix_start "$PF_PORT"
log "postfix $(postfix_version) (master $PF_MASTER) on 127.0.0.1:$PF_PORT"

# --- Stoa ------------------------------------------------------------------------------

STOA_MAIL="$BENCH_TMP/stoa-mail"
STOA_ERR="$BENCH_TMP/stoa-stderr.log"
mkdir -p "$STOA_MAIL"
for u in "${USERS[@]}"; do
    "$STOA_BIN" user add "$u" --mail-dir "$STOA_MAIL" 2>>"$BENCH_TMP/stoa-user.log" ||
        die "stoa user add $u failed: $(tail -n 3 "$BENCH_TMP/stoa-user.log")"
done
# All the load comes from 127.0.0.1: lift the per-client connection limit (50), as
# for Postfix.
cat >"$BENCH_TMP/stoa.toml" <<EOF
[smtp]
max_connections_per_client = 0
EOF
STOA_ARGS=(--config "$BENCH_TMP/stoa.toml" --mail-dir "$STOA_MAIL" --smtp-listen 127.0.0.1:0
    --domain example.test --workers "$STOA_WORKERS")
start_stoa_with "$STOA_ERR" smtp serve "${STOA_ARGS[@]}"
STOA_PORT="${STOA_PORTS[smtp]}"
log "stoa (pid $STOA_PID) on 127.0.0.1:$STOA_PORT"

declare -A PORT=([postfix]="$PF_PORT" [stoa]="$STOA_PORT")

check_alive() {
    kill -0 "$STOA_PID" 2>/dev/null || die "stoa (pid $STOA_PID) died: $(tail -n 5 "$STOA_ERR")"
    kill -0 "$PF_MASTER" 2>/dev/null || die "the postfix master (pid $PF_MASTER) died: $(tail -n 5 "$PF_LOG")"
}

# --- delivered mail ----------------------------------------------------------------------

# The directory holding a server's delivered messages, and a find(1) filter for them.
mail_root() {
    case "$1" in
        postfix) echo "$VMAIL" ;;
        stoa) echo "$STOA_MAIL/store/mailboxes" ;;
    esac
}
# Delivered message files (one per recipient: Postfix writes one copy per recipient,
# stoa one file hard-linked into each mailbox; both count once per mailbox).
list_delivered() {
    local root
    root="$(mail_root "$1")"
    [[ -d "$root" ]] || return 0
    case "$1" in
        postfix) find "$root" -type f -path '*/Maildir/new/*' "${@:2}" ;;
        stoa) find "$root" -type f "${@:2}" ;;
    esac
}
count_delivered() { list_delivered "$@" | wc -l; }
# Removes every delivered message (the servers keep running; neither caches listings).
clear_delivered() {
    local root
    root="$(mail_root "$1")"
    [[ -d "$root" ]] || return 0
    find "$root" -type f -delete
}

# run_smtp SERVER SIZE RCPTS MESSAGES LABEL -> sets ACC_RATE, ACC_XFER, ACC_ERR,
# DEL_RATE, DEL_XFER, DEL_ERR, OTHER_CPU, RUN_NOTE. Appends the details to $RUNLOG.
run_smtp() {
    local s="$1" size="$2" rcpts="$3" msgs="$4" label="$5"
    local expected=$((msgs * rcpts)) out="$BENCH_TMP/smtp-source.out" rc=0
    local t0 t1 tseen="" tlast n accepted small snap0 snap1 start
    clear_delivered "$s"
    n="$(count_delivered "$s")"
    ((n == 0)) || die "$s: $n messages left in the mailboxes before a run"
    snap0="$(cpu_snapshot "$STOA_PID" "tree:$PF_MASTER")"
    t0="$(date +%s.%N)"
    timeout --kill-after=5 "$RUN_TIMEOUT" /usr/sbin/smtp-source -c -s "$SESSIONS" -m "$msgs" \
        -l "$size" -r "$rcpts" -f "$SENDER" -t "$RCPT_BASE" -M client.test \
        "127.0.0.1:${PORT[$s]}" >"$out" 2>&1 || rc=$?
    t1="$(date +%s.%N)"
    # Delivery: poll the mailboxes until the expected count is there (bounded).
    start=$SECONDS
    while :; do
        n="$(count_delivered "$s")"
        if ((n >= expected)); then
            tseen="$(date +%s.%N)"
            break
        fi
        ((SECONDS - start < DELIVERY_TIMEOUT)) || break
        sleep 0.1
    done
    snap1="$(cpu_snapshot "$STOA_PID" "tree:$PF_MASTER")"
    OTHER_CPU="$(other_cpu_pct "$snap0" "$snap1")"
    # Anything beyond the expected count (duplicates, leftovers) shows up here.
    sleep 1
    n="$(count_delivered "$s")"
    # Postfix stores messages with LF line endings, stoa as received (CRLF); smtp-source's
    # payload lines are 80 bytes or more, so a whole message is at least 97 % of it.
    small="$(count_delivered "$s" -size "-$((size * 97 / 100))c")"
    # The last delivery: the newest inode change time among the delivered files (the
    # final link/unlink of each delivery), or when the poll saw the count if that is
    # earlier or the times look wrong.
    tlast="$(list_delivered "$s" -printf '%C@\n' | sort -n | tail -1)"
    accepted="$msgs"
    if ((rc != 0)); then
        # -c prints a running count of completed DATA commands; take the last one.
        accepted="$(tr '\r' '\n' <"$out" | grep -Eo '^[0-9]+' | tail -n 1 || true)"
        accepted="${accepted:-0}"
        ((accepted <= msgs)) || accepted="$msgs"
    fi
    RUN_NOTE=""
    ACC_ERR=0
    if ((rc != 0)); then
        ACC_ERR=$((msgs - accepted))
        ((ACC_ERR > 0)) || ACC_ERR=1
        RUN_NOTE+="smtp-source exit $rc after $accepted of $msgs messages: $(tr '\r\n' '  ' <"$out" | cut -c1-200); "
    fi
    read -r ACC_RATE ACC_XFER <<<"$(awk -v m="$accepted" -v sz="$size" -v a="$t0" -v b="$t1" \
        'BEGIN { d = b - a; if (d <= 0 || m == 0) { print 0, 0 } else printf "%.1f %.0f\n", m / d, m * sz / d }')"
    DEL_ERR=0
    if [[ -z "$tseen" ]]; then
        RUN_NOTE+="only $n of $expected deliveries after ${DELIVERY_TIMEOUT}s; "
        DEL_ERR=$((expected - n))
        ((DEL_ERR > 0)) || DEL_ERR=1
        DEL_RATE=0 DEL_XFER=0
    else
        if ((n != expected)); then
            RUN_NOTE+="$n deliveries, expected $expected; "
            DEL_ERR=$((n > expected ? n - expected : expected - n))
        fi
        if ((small > 0)); then
            RUN_NOTE+="$small delivered files smaller than 97% of the $size-byte payload; "
            DEL_ERR=$((DEL_ERR + small))
        fi
        read -r DEL_RATE DEL_XFER tlast <<<"$(awk -v m="$msgs" -v r="$rcpts" -v sz="$size" -v a="$t0" \
            -v last="${tlast:-0}" -v seen="$tseen" -v acc="$t1" 'BEGIN {
                # Guard against clock oddities: the last change lies between the
                # start and the moment the poll saw the full count.
                if (last < a || last > seen) last = seen
                # Delivered counts from the start until every message is both accepted
                # (smtp-source has exited) and delivered: never faster than accepted.
                if (last < acc) last = acc
                d = last - a
                if (d <= 0) { print 0, 0, 0 } else printf "%.1f %.0f %.3f\n", m / d, m * r * sz / d, d
            }')"
    fi
    ((ACC_ERR == 0)) || DEL_ERR=$((DEL_ERR > 0 ? DEL_ERR : 1))
    {
        printf '=== %s %s: %d messages x %d recipients x %d bytes, %d sessions\n' \
            "$label" "$s" "$msgs" "$rcpts" "$size" "$SESSIONS"
        printf 'smtp-source exit %d, %.3f s; accepted %d (%s msg/s); last delivery at +%s s (%s msg/s); %d deliveries (expected %d); other CPU %s%%\n' \
            "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$accepted" "$ACC_RATE" \
            "${tlast:-?}" "${DEL_RATE:-0}" "$n" "$expected" "$OTHER_CPU"
        [[ -z "$RUN_NOTE" ]] || echo "!!! $RUN_NOTE"
        if [[ -s "$out" ]]; then
            tr '\r' '\n' <"$out" | grep -v '^[0-9]*$' | head -20 || true
        fi
    } >>"$RUNLOG"
    if [[ -n "$RUN_NOTE" ]]; then
        {
            echo "--- last lines of the $s log:"
            if [[ "$s" == postfix ]]; then tail -n 20 "$PF_LOG"; else tail -n 20 "$STOA_ERR"; fi
        } >>"$RUNLOG" 2>/dev/null || true
    fi
    clear_delivered "$s"
    # Keep the disk bounded: both servers keep logging into truncated files.
    : >"$PF_LOG"
    : >"$STOA_ERR"
    check_alive
}

RUNLOG="$OUT/smtp.log"
: >"$RUNLOG"

# Warm-up and sanity check: a short 1-recipient run per server must deliver all.
WARM=$((MESSAGES < 100 ? MESSAGES : 100))
for s in postfix stoa; do
    run_smtp "$s" 4096 1 "$WARM" warm-up
    if [[ -n "$RUN_NOTE" ]]; then
        die "$s failed the warm-up: $RUN_NOTE (see ${RUNLOG#"$REPO_ROOT"/})"
    fi
    log "warm-up $s: $ACC_RATE msg/s accepted, $DEL_RATE msg/s delivered"
done

ROWS=(4k-1rcpt 4k-10rcpt 100k-1rcpt 100k-10rcpt)
declare -A SIZE=([4k]=4096 [100k]=102400)
new_raw_csv
log "running $ROUNDS rounds x ${#ROWS[@]} rows x 2 servers, $MESSAGES messages each, $SESSIONS sessions"
for ((r = 1; r <= ROUNDS; r++)); do
    ((r == 1)) || wait_idle
    round_order "$r" postfix stoa
    for row in "${ROWS[@]}"; do
        sz="${SIZE[${row%%-*}]}"
        rc_n="${row#*-}"
        rc_n="${rc_n%rcpt}"
        # With BENCH_WAIT_IDLE set, a pair disturbed by other work (more than
        # BUSY_LIMIT % of the CPU) is thrown away and measured again, up to 3 attempts.
        for ((attempt = 1; ; attempt++)); do
            lines=()
            busy=0
            for s in "${ORDER[@]}"; do
                run_smtp "$s" "$sz" "$rc_n" "$MESSAGES" "round $r $row (attempt $attempt)"
                lines+=("$r,$row-accepted,$s,$ACC_RATE,$ACC_XFER,$ACC_ERR,$OTHER_CPU,,"
                    "$r,$row-delivered,$s,$DEL_RATE,$DEL_XFER,$DEL_ERR,$OTHER_CPU,,")
                msg="round $r $row $s: $ACC_RATE msg/s accepted, $DEL_RATE msg/s delivered (other CPU ${OTHER_CPU}%)"
                [[ -z "$RUN_NOTE" ]] || msg+="  !!! $RUN_NOTE"
                log "$msg"
                if ((OTHER_CPU > busy)); then busy="$OTHER_CPU"; fi
            done
            if ((busy > BUSY_LIMIT && ${BENCH_WAIT_IDLE:-0} > 0 && attempt < 3)); then
                log "round $r $row: disturbed (other processes up to ${busy}% of the CPU); measuring the pair again"
                echo "### DISCARDED: the pair above (round $r $row, attempt $attempt), disturbed by other processes (up to ${busy}% of the CPU)" >>"$RUNLOG"
                wait_idle
                continue
            fi
            printf '%s\n' "${lines[@]}" >>"$RAW"
            break
        done
    done
done

check_background "after the run (servers idle)"

python3 "$BENCH_DIR/summarize.py" --unit msg/s --log smtp.log \
    --errors "deliveries missing, extra or truncated, or smtp-source failures" \
    "$RAW" postfix stoa | tee "$OUT/summary.txt"
for f in main.cf master.cf; do save_config "$PF_CONF/$f" "$OUT/postfix-$f"; done
save_config "$BENCH_TMP/stoa.toml" "$OUT/stoa.toml"

{
    readme_header "SMTP: stoa vs Postfix"
    echo "- Postfix: $(postfix_version) ($(dpkg-query -W -f '${Version}' postfix 2>/dev/null || echo '?'), Debian package; smtp-source from the same package)"
    readme_section Setup
    echo "- Loopback only (127.0.0.1). smtp-source and the servers share the machine's $(nproc) cores;"
    echo "  nothing is pinned."
    echo "- Load: \`smtp-source -c -s $SESSIONS -m $MESSAGES -l SIZE -r RCPTS -f $SENDER -t $RCPT_BASE -M client.test 127.0.0.1:PORT\`:"
    echo "  $SESSIONS parallel sessions, one message per connection (HELO, MAIL, RCPT..., DATA, QUIT; smtp-source"
    echo "  does not pipeline), SIZE = 4096 or 102400 bytes of payload plus smtp-source's few headers."
    echo "  \`-r 10 -t $RCPT_BASE\` sends to u@, 2u@, ..., 10u@example.test; these ten users exist on both servers."
    echo "- Rows: {4k, 100k} x {1, 10 recipients}, each measured as"
    echo "  - accepted: messages / smtp-source's wall time (every message answered 250 after DATA);"
    echo "  - delivered: messages / time from the start to the last delivery into a mailbox (the newest"
    echo "    inode change time among the delivered files, i.e. their final link/unlink; the poll of"
    echo "    the mailboxes every 0.1 s bounds it), or to smtp-source's exit if that is later, so"
    echo "    delivered is never above accepted. transfer = payload bytes per second received"
    echo "    (accepted) or put into mailboxes (delivered, counted once per recipient)."
    echo "- After every run: the delivered count (files in the mailboxes, one per recipient) must equal"
    echo "  messages x recipients, 1 s after the last one, and no delivered file may be smaller than 97 %"
    echo "  of the payload (Postfix stores LF line endings, stoa CRLF as received); otherwise the row is"
    echo "  flagged with the difference as errors. The mailboxes are then"
    echo "  emptied (both servers keep running) and the logs truncated."
    echo "- Postfix $(postfix_version): a private instance (\`postfix -c \$TMP/postfix start\`,"
    echo "  its own queue and data directories, no system instance running), configuration in"
    echo "  postfix-main.cf and postfix-master.cf. smtpd on 127.0.0.1 with at most $SESSIONS processes"
    echo "  (one per session, Postfix's model), every other service at most 20 (\`default_process_limit\`;"
    echo "  also the default delivery concurrency per destination); virtual(8) delivery to"
    echo "  \$TMP/vmail/USER/Maildir/ (no system users); fsync on (Postfix's default: queue files and"
    echo "  Maildir files are fsynced before the 250 and before the delivery counts as done); no"
    echo "  per-client rate or count limits; no reverse DNS; log to a file through postlogd;"
    echo "  in_flow_delay at its default (1 s)."
    echo "- stoa: \`stoa serve ${STOA_ARGS[*]//$BENCH_TMP/\$TMP}\`, users made with \`stoa user add\`."
    echo "  --workers $STOA_WORKERS: SMTP event loop(s) as in the web comparisons (one event loop, the load"
    echo "  generator takes the other core), plus stoa's queue thread and its blocking-I/O threads for"
    echo "  file writes and fsyncs; message and envelope fsynced before the 250, delivery into the mail"
    echo "  store fsynced (one file, hard-linked into each recipient's mailbox). stoa.toml lifts the"
    echo "  per-client connection limit (all load comes from 127.0.0.1). Error log (info) to a file."
    echo "- Process budget: neither server is confined; Postfix runs its usual process per smtpd"
    echo "  session and per delivery, stoa its threads. Deliveries at once: Postfix at most 20 virtual(8)"
    echo "  processes (destination concurrency starts at 5 and grows to 20), each taking one message"
    echo "  with all its recipients and writing (and fsyncing) one file per recipient; stoa at most 20"
    echo "  messages (max_deliveries), one file per message hard-linked into each mailbox."
    echo "- $ROUNDS rounds; in each round every row runs against both servers back to back; Postfix goes"
    echo "  first in odd rounds, stoa in even ones. A ${WARM}-message warm-up per server first, which"
    echo "  must deliver completely. BENCH_WAIT_IDLE=${BENCH_WAIT_IDLE:-unset} (when set: wait for a quiet"
    echo "  machine before each round, and measure a pair again when other processes took more than"
    echo "  $BUSY_LIMIT % of the CPU, up to 3 attempts)."
    readme_background
    readme_section Files
    echo "- raw.csv: round,row,server,req_per_sec (messages/s),transfer (bytes/s),errors (missing, extra"
    echo "  or truncated deliveries, or messages smtp-source could not send),other_cpu_pct (% of all CPU"
    echo "  used by processes other than the servers and the load during the run, accept and delivery)"
    echo "- summary.txt: medians over rounds and the per-round ratio stoa/postfix (median, min, max)"
    echo "- smtp.log: every run (times, counts, smtp-source messages)"
    echo "- postfix-main.cf, postfix-master.cf, stoa.toml: the configurations (\$TMP = temp dir)"
    readme_summary
} >"$OUT/README.md"
results_done
