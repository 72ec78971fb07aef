#!/usr/bin/env bash
# The Sun SPECmail2001 system (five servers) on one machine, every tier measured.
#
#   bench/topology-sun.sh [--users N] [--rate R] [--levels 80,100,120]
#                         [--peer-proxy stoa|nginx|none] [--profile quick]
#                         [--warmup D] [--run-time D] [--cooldown D]
#                         [--drain-limit D] [--stoa PATH] [--out DIR] [--keep-runs DIR]
#                         [--run-timeout 7200]
#   bench/topology-sun.sh --compare-proxies [--rounds 3] [--perf] [--users N] [--rate R] ...
#
# Sun's published page (shared/specs/published-results/specmail2001-sun-jsms61-7500.txt)
# ran two POPSTORE hosts, an SMTPMTA, an LDAP directory and an MMP (POP proxy) on
# five machines, driven by load generators with a sink. This script starts that
# system on loopback addresses of this machine, one tier each:
#   127.0.0.10  LDAP     slapd, N users (`{SSHA}` passwords), mailHost split evenly
#                        between store-1 and store-2 (odd and even user numbers)
#   127.0.0.11  store 1  `stoa serve`: POP3 + LMTP (store-1.stoa.test)
#   127.0.0.12  store 2  `stoa serve`: POP3 + LMTP (store-2.stoa.test)
#   127.0.0.13  MTA      `stoa serve`: SMTP, routing by mailHost over LMTP, mail for
#                        remote.test relayed to the harness's sink
#   127.0.0.14  MMP      `stoa serve` with [pop3_proxy] (--peer-proxy stoa)
#   127.0.0.15  MMP      nginx's mail module (--peer-proxy nginx), asking the
#   127.0.0.16           auth_http service bench/lib/auth_http.py
#   127.0.0.1            the harness (`stoa bench mail`) and its sink
# It fills the stores through the MTA (`stoa bench mail --init-only`), then runs
# `stoa bench mail --smtp MTA --pop3 MMP` at the levels with every tier named by
# --tier, so the report's System Configuration lists each tier's role, processes,
# CPU seconds and peak memory, and the messages and sessions it handled.
# --peer-proxy none: no MMP; all users on store 1, the harness's POP3 straight at it.
#
# --compare-proxies: the proxy tier side by side. All users on store 1 (so the
# harness can also go to the store directly), both proxies running; rounds of
# direct / Stoa proxy / nginx proxy (the order alternating), each a `stoa bench
# mail` run against the same filled store, each with its own seed (a run with the
# seed of the one before would check the mailboxes it just emptied); summary: CPU
# per proxied POP3 session and the p99 of POP Connect/Status/Retrieve added over
# going direct. --perf records each proxy's processes with `perf record -e cpu-clock
# -g` over its runs and writes where their CPU went (perf report, by symbol) beside
# the reports.
#
# Results go to bench-results/<date>-<host>-topology-sun/ (or --out); each harness
# run's own files (result.json, reports, ticks) to a temporary directory, or to
# --keep-runs DIR, which scripts/test.sh checks the run's result.json in. See
# bench/README.md.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

USERS=""
RATE=""
LEVELS=80,100,120
PEER=stoa
PROFILE=quick
WARMUP=""
RUN_TIME=""
COOLDOWN=""
DRAIN_LIMIT=""
STOA=""
KEEP_RUNS=""
OUT_ARG=""
RUN_TIMEOUT=7200
FILL_TIMEOUT=3600
COMPARE=""
PERF=""
ROUNDS=3
SEED=2001
PASSWORD=stoa-bench
DOMAIN=stoa.test
BASE="dc=stoa,dc=test"
ADMIN_DN="cn=admin,$BASE"
# The tiers' addresses (the sink and the harness use 127.0.0.1).
LDAP_IP=127.0.0.10
STORE_IPS=(127.0.0.11 127.0.0.12)
MTA_IP=127.0.0.13
MMP_IP=127.0.0.14
NGINX_IP=127.0.0.15
AUTH_IP=127.0.0.16
# Disk per user: 3.43 messages of 24.5 KB in the store, a queue copy in flight,
# the run's new mail, slapd's entry; doubled for safety.
KIB_PER_USER=200
bench_cmdline "$@"
parse_args "--users=USERS --rate=RATE --levels=LEVELS --peer-proxy=PEER --profile=PROFILE
    --warmup=WARMUP --run-time=RUN_TIME --cooldown=COOLDOWN --drain-limit=DRAIN_LIMIT --stoa=STOA --out=OUT_ARG --keep-runs=KEEP_RUNS
    --run-timeout=RUN_TIMEOUT --fill-timeout=FILL_TIMEOUT --compare-proxies=COMPARE=1 --perf=PERF=1
    --rounds=ROUNDS --seed=SEED" "$@"
case "$PEER" in stoa | nginx | none) ;; *) die "--peer-proxy: stoa, nginx or none" ;; esac
[[ "$PROFILE" =~ ^(quick|standard)$ ]] || die "--profile: quick or standard"
[[ "$LEVELS" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--levels: percentages such as 80,100,120"
for d in "$WARMUP" "$RUN_TIME" "$COOLDOWN" "$DRAIN_LIMIT"; do
    [[ -z "$d" || "$d" =~ ^[0-9]+(ms|s|m|h)$ ]] || die "durations are like 30s, 5m: got '$d'"
done
require_positive "--run-timeout, --fill-timeout, --rounds and --seed take positive integers" \
    "$RUN_TIMEOUT" "$FILL_TIMEOUT" "$ROUNDS" "$SEED" ${USERS:+"$USERS"}
[[ -z "$RATE" || "$RATE" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--rate: messages per minute, such as 10 or 7.5"
((ROUNDS <= 20)) || die "--rounds: at most 20"
if [[ -n "$COMPARE" ]]; then PEER=compare; fi

ensure_commands python3:python3 timeout:coreutils slapd:slapd slapadd:slapd
if [[ -n "$PERF" ]]; then ensure_commands perf:linux-perf; fi
if [[ "$PEER" == nginx || "$PEER" == compare ]]; then
    ensure_commands nginx:nginx-light
    [[ -f /usr/lib/nginx/modules/ngx_mail_module.so ]] || apt_install libnginx-mod-mail
fi

# --- setup: traps, temp dir, the stoa binary ---------------------------------------

bench_install_traps
make_tmp
if [[ -n "$STOA" ]]; then
    [[ -x "$STOA" ]] || die "--stoa $STOA: not an executable"
    cp "$STOA" "$BENCH_TMP/stoa"
    STOA_BIN="$BENCH_TMP/stoa"
    STOA_REV="$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown) (--stoa $STOA)"
    STOA_DIRTY="$(git_dirty)"
    STOA_SRC_DIRTY="$(git_dirty crates Cargo.toml Cargo.lock)"
    STOA_SHA="$(sha256sum "$STOA_BIN" | cut -c1-16)"
else
    build_stoa
fi
raise_nofile 65536
"$STOA_BIN" bench mail --help 2>/dev/null | grep -q -- '--tier ' ||
    die "this stoa has no 'stoa bench mail --tier': build a newer revision"
HAS_PROXY=""
if "$STOA_BIN" serve --help 2>/dev/null | grep -q -- '--pop3-proxy-listen'; then HAS_PROXY=1; fi
if [[ -z "$HAS_PROXY" && ( "$PEER" == stoa || "$PEER" == compare ) ]]; then
    die "this stoa has no POP3 proxy (stoa serve --pop3-proxy-listen): use --peer-proxy none or nginx"
fi

free_kib="$(df -Pk "$BENCH_TMP" | awk 'NR == 2 { print $4 }')"
if [[ -z "$USERS" ]]; then
    # 20,000 users (100 msgs/min) when the disk has room, fewer when not.
    USERS=$(((free_kib / 2 - 512 * 1024) / KIB_PER_USER))
    ((USERS <= 20000)) || USERS=20000
    ((USERS >= 200)) || die "$((free_kib / 1024)) MiB free under $BENCH_TMP: not enough for 200 users"
fi
need_kib=$((USERS * KIB_PER_USER + 512 * 1024))
((free_kib >= need_kib)) ||
    die "$((free_kib / 1024)) MiB free under $BENCH_TMP, need about $((need_kib / 1024)) MiB for --users $USERS"
((USERS <= 2000000)) || die "--users: at most 2000000"
[[ -n "$RATE" ]] || RATE="$(awk -v u="$USERS" 'BEGIN { printf "%g", u / 200 }')"

if [[ -n "$OUT_ARG" ]]; then
    mkdir -p "$OUT_ARG"
    OUT="$(cd "$OUT_ARG" && pwd)"
    RUN_DIR="$BENCH_TMP/runs"
    mkdir -p "$RUN_DIR"
    wait_idle
    check_background "before the run"
else
    bench_begin topology-sun
fi
if [[ -n "$KEEP_RUNS" ]]; then
    mkdir -p "$KEEP_RUNS"
    RUN_DIR="$(cd "$KEEP_RUNS" && pwd)"
fi

# Whether every user lives on store 1 (direct POP3 needs one address).
ONE_STORE=""
if [[ "$PEER" == none || "$PEER" == compare ]]; then ONE_STORE=1; fi

# start_stoa_at LOG IP "SCHEME..." ARGS...: `stoa ARGS...` in the background, its
# standard error to LOG, until it reports "listening on SCHEME://IP:PORT" for
# every SCHEME (15 s). Sets STOA_PID and STOA_PORTS[SCHEME].
start_stoa_at() {
    local log="$1" ip="$2" schemes="$3" i s
    shift 3
    : >"$log"
    "$STOA_BIN" "$@" 2>>"$log" </dev/null &
    STOA_PID=$!
    SERVER_PIDS+=("$STOA_PID")
    STOA_PORTS=()
    for ((i = 0; i < 300; i++)); do
        local missing=""
        for s in $schemes; do
            [[ -n "${STOA_PORTS[$s]:-}" ]] && continue
            STOA_PORTS[$s]="$(grep -m1 -o "listening on $s://${ip//./\\.}:[0-9]*" "$log" | sed 's/.*://' || true)"
            [[ -n "${STOA_PORTS[$s]}" ]] || missing+=" $s"
        done
        [[ -z "$missing" ]] && return 0
        kill -0 "$STOA_PID" 2>/dev/null || die "stoa ($log) exited at startup: $(tail -n 5 "$log")"
        sleep 0.05
    done
    die "stoa ($log) did not report listening ($schemes) within 15 s: $(tail -n 5 "$log")"
}

# --- LDAP: slapd with N users ---------------------------------------------------------

SLAPD_DIR="$BENCH_TMP/slapd"
slapd_conf "$SLAPD_DIR" "$USERS"
save_config "$SLAPD_DIR/slapd.conf" "$OUT/slapd.conf"
log "generating $USERS users ($( [[ -n "$ONE_STORE" ]] && echo "all on store-1" || echo "split between store-1 and store-2"))"
# The LDIF for slapadd and, for the auth_http service, the same users as
# ADDRESS<TAB>MAILHOST<TAB>{SSHA}... (users.map).
python3 - "$USERS" "$PASSWORD" "$BASE" "$DOMAIN" "${ONE_STORE:-0}" "$BENCH_TMP/users.map" \
    >"$BENCH_TMP/users.ldif" <<'EOF'
import base64, hashlib, random, sys
users, password, base, domain = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3], sys.argv[4]
one_store, map_path = sys.argv[5] == "1", sys.argv[6]
rng = random.Random(1)
out = sys.stdout
out.write(f"dn: {base}\nobjectClass: top\nobjectClass: dcObject\nobjectClass: organization\n"
          f"o: Stoa bench\ndc: stoa\n\ndn: ou=people,{base}\nobjectClass: organizationalUnit\n"
          f"ou: people\n\n")
with open(map_path, "w") as m:
    for n in range(1, users + 1):
        salt = rng.randbytes(8)
        ssha = "{SSHA}" + base64.b64encode(hashlib.sha1(password + salt).digest() + salt).decode()
        host = "store-1" if one_store or n % 2 else "store-2"
        out.write(f"dn: uid=user{n},ou=people,{base}\nobjectClass: inetOrgPerson\n"
                  f"objectClass: inetLocalMailRecipient\nuid: user{n}\ncn: user{n}\nsn: user{n}\n"
                  f"mail: user{n}@{domain}\nmailHost: {host}.{domain}\nemployeeNumber: {n}\n"
                  f"userPassword: {ssha}\n\n")
        m.write(f"user{n}@{domain}\t{host}.{domain}\t{ssha}\n")
EOF
slapd_load "$SLAPD_DIR" "$BENCH_TMP/users.ldif" 1800
rm -f "$BENCH_TMP/users.ldif"
slapd_start "$SLAPD_DIR" "$LDAP_IP"
SLAPD_VERSION="$(/usr/sbin/slapd -VV 2>&1 | grep -o 'slapd [0-9.]*' | head -1 || true)"
log "LDAP: $SLAPD_VERSION (pid $SLAPD_PID) on $LDAP_IP:$LDAP_PORT"
printf 'admin-secret\n' >"$BENCH_TMP/ldap.secret"

# directory_table THIS_HOST: the [directory] of every stoa tier.
directory_table() {
    cat <<EOF
[directory]
backend = "ldap"
urls = ["ldap://$LDAP_IP:$LDAP_PORT"]
base = "$BASE"
bind_dn = "$ADMIN_DN"
bind_password_file = "ldap.secret"
this_host = "$1"
domains = ["$DOMAIN"]
EOF
}

# --- the store hosts --------------------------------------------------------------------

NSTORES=2
if [[ -n "$ONE_STORE" ]]; then NSTORES=1; fi
STORE_PIDS=()
STORE_POP3=()
STORE_LMTP=()
for ((k = 1; k <= NSTORES; k++)); do
    ip="${STORE_IPS[k - 1]}"
    name="store-$k.$DOMAIN"
    {
        printf '[lmtp]\nhostname = "%s"\n\n' "$name"
        printf '[pop3]\nhostname = "%s"\nallow_plaintext_auth = true\nmax_connections_per_client = 0\n' "$name"
        # The proxy forwards the client's address (XCLIENT) from loopback.
        if [[ -n "$HAS_PROXY" ]]; then printf 'trusted_proxies = ["127.0.0.0/8"]\n'; fi
        echo
        directory_table "$name"
    } >"$BENCH_TMP/store$k.toml"
    mkdir -p "$BENCH_TMP/store$k"
    start_stoa_at "$BENCH_TMP/store$k.log" "$ip" "lmtp pop3" serve --config "$BENCH_TMP/store$k.toml" \
        --mail-dir "$BENCH_TMP/store$k" --lmtp-listen "$ip:0" --pop3-listen "$ip:0"
    STORE_PIDS+=("$STOA_PID")
    STORE_LMTP+=("$ip:${STOA_PORTS[lmtp]}")
    STORE_POP3+=("$ip:${STOA_PORTS[pop3]}")
    save_config "$BENCH_TMP/store$k.toml" "$OUT/store$k.toml"
    log "store $k ($name, pid $STOA_PID): LMTP ${STORE_LMTP[k - 1]}, POP3 ${STORE_POP3[k - 1]}"
done

# mail_hosts: the [[mail_host]] entries of the MTA and the proxy.
mail_hosts() {
    local k
    for ((k = 1; k <= NSTORES; k++)); do
        printf '\n[[mail_host]]\nname = "store-%s.%s"\nlmtp = "%s"\npop3 = "%s"\n' \
            "$k" "$DOMAIN" "${STORE_LMTP[k - 1]}" "${STORE_POP3[k - 1]}"
    done
}

# --- the MTA -------------------------------------------------------------------------------

SINK="127.0.0.1:$(free_port)"
{
    printf '[smtp]\nhostname = "mx.%s"\ntrusted_networks = ["127.0.0.0/8"]\nrelay_host = "%s"\n' "$DOMAIN" "$SINK"
    # The load comes from one address; remote mail queued while the sink is down
    # (between harness runs) is retried within a minute.
    printf 'max_connections_per_client = 0\nmin_backoff = "10s"\nmax_backoff = "60s"\n\n'
    directory_table "mx.$DOMAIN"
    mail_hosts
} >"$BENCH_TMP/mta.toml"
mkdir -p "$BENCH_TMP/mta"
start_stoa_at "$BENCH_TMP/mta.log" "$MTA_IP" smtp serve --config "$BENCH_TMP/mta.toml" \
    --mail-dir "$BENCH_TMP/mta" --smtp-listen "$MTA_IP:0"
MTA_PID="$STOA_PID"
MTA_ADDR="$MTA_IP:${STOA_PORTS[smtp]}"
save_config "$BENCH_TMP/mta.toml" "$OUT/mta.toml"
log "MTA (pid $MTA_PID): SMTP $MTA_ADDR, remote mail to the sink at $SINK"

# --- the proxies ---------------------------------------------------------------------------

MMP_PID=""
MMP_ADDR=""
if [[ "$PEER" == stoa || "$PEER" == compare ]]; then
    {
        # Every client is the harness on 127.0.0.1: no per-client limit.
        printf '[pop3_proxy]\nhostname = "mmp.%s"\nallow_plaintext_auth = true\nmax_connections_per_client = 0\n\n' "$DOMAIN"
        directory_table "mmp.$DOMAIN"
        mail_hosts
    } >"$BENCH_TMP/mmp.toml"
    start_stoa_at "$BENCH_TMP/mmp.log" "$MMP_IP" pop3-proxy serve --config "$BENCH_TMP/mmp.toml" \
        --pop3-proxy-listen "$MMP_IP:0"
    MMP_PID="$STOA_PID"
    MMP_ADDR="$MMP_IP:${STOA_PORTS[pop3-proxy]}"
    save_config "$BENCH_TMP/mmp.toml" "$OUT/mmp.toml"
    log "MMP: Stoa's POP3 proxy (pid $MMP_PID) on $MMP_ADDR"
fi

NGINX_PIDS=""
NGINX_ADDR=""
AUTH_PID=""
NGINX_WORKERS="$(nproc)"
if [[ "$PEER" == nginx || "$PEER" == compare ]]; then
    ND="$BENCH_TMP/nginx"
    mkdir -p "$ND/logs"
    : >"$ND/hosts"
    for ((k = 1; k <= NSTORES; k++)); do
        printf 'store-%s.%s\t%s\n' "$k" "$DOMAIN" "${STORE_POP3[k - 1]}" >>"$ND/hosts"
    done
    AUTH_PORT="$(free_port "$AUTH_IP")"
    python3 "$BENCH_DIR/lib/auth_http.py" --listen "$AUTH_IP:$AUTH_PORT" --users "$BENCH_TMP/users.map" \
        --hosts "$ND/hosts" 2>"$ND/auth_http.log" </dev/null &
    AUTH_PID=$!
    SERVER_PIDS+=("$AUTH_PID")
    wait_port "$AUTH_PORT" "$AUTH_PID" "$AUTH_IP" || die "auth_http did not listen: $(tail -n 5 "$ND/auth_http.log")"
    NGINX_PORT="$(free_port "$NGINX_IP")"
    # As many workers as Stoa's proxy has event loops (one per core).
    cat >"$ND/nginx.conf" <<EOF
load_module /usr/lib/nginx/modules/ngx_mail_module.so;
worker_processes $NGINX_WORKERS;
worker_rlimit_nofile 65536;
daemon off;
master_process on;
pid $ND/nginx.pid;
error_log $ND/logs/error.log notice;
events { worker_connections 16384; }
mail {
    server_name mmp.$DOMAIN;
    auth_http $AUTH_IP:$AUTH_PORT/auth;
    proxy_pass_error_message on;
    pop3_auth plain;
    server {
        listen $NGINX_IP:$NGINX_PORT;
        protocol pop3;
    }
}
EOF
    "$(nginx_bin)" -t -q -p "$ND" -c "$ND/nginx.conf" 2>"$ND/nginx-t.log" ||
        die "nginx -t failed: $(cat "$ND/nginx-t.log")"
    "$(nginx_bin)" -p "$ND" -c "$ND/nginx.conf" 2>>"$ND/stderr.log" </dev/null &
    NGINX_PID=$!
    SERVER_PIDS+=("$NGINX_PID")
    wait_port "$NGINX_PORT" "$NGINX_PID" "$NGINX_IP" ||
        die "nginx did not listen: $(tail -n 5 "$ND/logs/error.log" "$ND/stderr.log" 2>/dev/null)"
    NGINX_PIDS="$NGINX_PID"
    for p in $(nginx_workers "$NGINX_PID"); do NGINX_PIDS+="+$p"; done
    NGINX_ADDR="$NGINX_IP:$NGINX_PORT"
    save_config "$ND/nginx.conf" "$OUT/nginx.conf"
    NGINX_VERSION="$({ "$(nginx_bin)" -v 2>&1 || true; } | head -1 | sed 's/^nginx version: //')"
    log "MMP: $NGINX_VERSION mail proxy (pids ${NGINX_PIDS//+/ }) on $NGINX_ADDR, auth_http (pid $AUTH_PID) on $AUTH_IP:$AUTH_PORT"
fi

check_alive() {
    local p
    for p in "${SERVER_PIDS[@]}"; do
        kill -0 "$p" 2>/dev/null || die "pid $p died (logs in $BENCH_TMP: store*.log, mta.log, mmp.log, slapd.log, nginx/)"
    done
}

# --- the harness ------------------------------------------------------------------------

COMMANDS="$OUT/commands.txt"
: >"$COMMANDS"

# tier_args POP3_TARGET: the --tier, --tier-note and --tier-count flags of a run
# whose harness POP3 goes to POP3_TARGET (mmp, nginx or store1), into TIER_ARGS.
tier_args() {
    local target="$1" k at
    TIER_ARGS=(--tier "LDAP directory=$SLAPD_PID" --tier-note "LDAP directory=$SLAPD_VERSION on $LDAP_IP, $USERS users")
    for ((k = 1; k <= NSTORES; k++)); do
        at=""
        if [[ "$target" == store1 && $k == 1 ]]; then at="@pop3"; fi
        TIER_ARGS+=(--tier "POPSTORE $k=${STORE_PIDS[k - 1]}$at"
            --tier-note "POPSTORE $k=stoa serve (POP3 + LMTP) on ${STORE_IPS[k - 1]}"
            --tier-count "POPSTORE $k=POP logins:logged in (:$BENCH_TMP/store$k.log"
            --tier-count "POPSTORE $k=LMTP recipients:LMTP delivered:$BENCH_TMP/store$k.log")
    done
    TIER_ARGS+=(--tier "SMTPMTA=$MTA_PID@smtp" --tier-note "SMTPMTA=stoa serve (SMTP, LMTP client, relay) on $MTA_IP"
        --tier-count "SMTPMTA=recipients delivered:delivered to <:$BENCH_TMP/mta.log")
    if [[ -n "$MMP_PID" ]]; then
        at=""
        if [[ "$target" == mmp ]]; then at="@pop3"; fi
        TIER_ARGS+=(--tier "MMP (Stoa POP3 proxy)=$MMP_PID$at"
            --tier-note "MMP (Stoa POP3 proxy)=stoa serve [pop3_proxy] on $MMP_IP"
            --tier-count "MMP (Stoa POP3 proxy)=proxied logins:proxied to:$BENCH_TMP/mmp.log")
    fi
    if [[ -n "$NGINX_PIDS" ]]; then
        at=""
        if [[ "$target" == nginx ]]; then at="@pop3"; fi
        TIER_ARGS+=(--tier "MMP (nginx mail proxy)=$NGINX_PIDS$at"
            --tier-note "MMP (nginx mail proxy)=$NGINX_VERSION, $NGINX_WORKERS workers, on $NGINX_IP"
            --tier "MMP auth_http service=$AUTH_PID"
            --tier-note "MMP auth_http service=bench/lib/auth_http.py (Python, {SSHA} check) on $AUTH_IP")
    fi
}

# phase_args: the profile and phase flags passed through.
phase_args() {
    PHASE_ARGS=(--profile "$PROFILE")
    if [[ -n "$WARMUP" ]]; then PHASE_ARGS+=(--warmup "$WARMUP"); fi
    if [[ -n "$RUN_TIME" ]]; then PHASE_ARGS+=(--run-time "$RUN_TIME"); fi
    if [[ -n "$COOLDOWN" ]]; then PHASE_ARGS+=(--cooldown "$COOLDOWN"); fi
    if [[ -n "$DRAIN_LIMIT" ]]; then PHASE_ARGS+=(--drain-limit "$DRAIN_LIMIT"); fi
}

# harness_rc NAME TIMEOUT ARGS...: `stoa bench mail ARGS...`, standard output to
# RUN_DIR/NAME.txt and error to RUN_DIR/NAME.log; sets HARNESS_RC.
harness_rc() {
    local name="$1" limit="$2"
    shift 2
    show_cmd stoa bench mail "$@" | sed "s/^/[$name] /" >>"$COMMANDS"
    HARNESS_RC=0
    timeout --kill-after=30 "$limit" "$STOA_BIN" bench mail "$@" >"$RUN_DIR/$name.txt" 2>"$RUN_DIR/$name.log" ||
        HARNESS_RC=$?
}

# harness NAME TIMEOUT ARGS...: harness_rc, dying unless it exits 0.
harness() {
    harness_rc "$@"
    ((HARNESS_RC == 0)) ||
        die "$1: stoa bench mail exited $HARNESS_RC: $(tail -n 5 "$RUN_DIR/$1.log" | tr '\n' ' ')"
}

COMMON=(--smtp "$MTA_ADDR" --users "$USERS" --domain "$DOMAIN" --password "$PASSWORD" --sink-listen "$SINK")
# The POP3 address of the fill's check: a proxy, or store 1 when all users live there.
case "$PEER" in
    stoa) FILL_POP3="$MMP_ADDR" ;;
    nginx) FILL_POP3="$NGINX_ADDR" ;;
    *) FILL_POP3="${STORE_POP3[0]}" ;;
esac
log "filling $USERS mailboxes through the MTA (timeout ${FILL_TIMEOUT}s)"
t0=$SECONDS
FILL_ARGS=(--init-only "${COMMON[@]}" --pop3 "$FILL_POP3" --init-journal "$BENCH_TMP/init.journal"
    --init-connections 16)
harness_rc fill "$FILL_TIMEOUT" "${FILL_ARGS[@]}"
# The harness waits for a sample of 100 mailboxes, then checks 200 others: the MTA
# may still be handing the rest over (its queue holds thousands), and that check
# then fails. The measurement starts with the MTA's queue empty; a fill whose
# check failed is checked once more then (the journal says every mailbox is done,
# so nothing is sent twice).
queue_left() { find "$BENCH_TMP/mta/queue" -type f ! -name '.*' 2>/dev/null | wc -l; }
while (($(queue_left) > 0)); do
    ((SECONDS - t0 < FILL_TIMEOUT)) || die "the MTA's queue still holds $(queue_left) files after ${FILL_TIMEOUT}s"
    sleep 0.5
done
if ((HARNESS_RC != 0)); then
    log "the fill's store check failed while the MTA was still delivering: checking again"
    harness fill-check "$FILL_TIMEOUT" "${FILL_ARGS[@]}"
fi
FILL_SECS=$((SECONDS - t0))
log "fill done in ${FILL_SECS}s (the MTA's queue empty)"
check_alive

SOFTWARE="Stoa $("$STOA_BIN" --version | awk '{ print $2 }') (five tiers on one machine)"
phase_args

# run_topology: the one run of the normal mode.
run_topology() {
    local target pop3
    case "$PEER" in
        stoa) target=mmp pop3="$MMP_ADDR" ;;
        nginx) target=nginx pop3="$NGINX_ADDR" ;;
        none) target=store1 pop3="${STORE_POP3[0]}" ;;
    esac
    tier_args "$target"
    log "run: levels $LEVELS at $RATE msgs/min, POP3 via $target ($pop3)"
    harness run "$RUN_TIMEOUT" "${COMMON[@]}" --pop3 "$pop3" --rate "$RATE" --levels "$LEVELS" \
        --seed "$SEED" "${PHASE_ARGS[@]}" --server-software "$SOFTWARE" "${TIER_ARGS[@]}" --out "$RUN_DIR/run"
    check_alive
}

# perf_start NAME PIDS: `perf record` of PIDS (comma-separated) until perf_stop,
# when --perf was given; PERF_PID is the recorder.
PERF_PID=""
perf_start() {
    [[ -n "$PERF" ]] || return 0
    perf record -q -e cpu-clock -g -p "$2" -o "$BENCH_TMP/$1.perf" >/dev/null 2>&1 &
    PERF_PID=$!
}

# perf_stop NAME: ends the recording and writes OUT/NAME-perf.txt: the CPU by
# binary and symbol (self time), the top 60 lines.
perf_stop() {
    [[ -n "$PERF_PID" ]] || return 0
    kill -INT "$PERF_PID" 2>/dev/null || true
    wait "$PERF_PID" 2>/dev/null || true
    PERF_PID=""
    {
        echo "# perf record -e cpu-clock -g over the run; perf report --no-children --sort dso,sym"
        perf report -i "$BENCH_TMP/$1.perf" --stdio --no-children --sort dso,sym -g none \
            --percent-limit 0.3 2>/dev/null | grep -v '^$' | head -n 80
    } >"$OUT/$1-perf.txt" || log "!!! perf report for $1 failed"
}

# run_compare: rounds of direct, stoa and nginx, the order alternating. Every run
# has its own seed: the same seed would make a run check the very mailboxes the
# run before it emptied, and find no mail to retrieve.
RUNS=()
run_compare() {
    local r mode pop3 name k
    for ((r = 1; r <= ROUNDS; r++)); do
        ((r == 1)) || wait_idle
        round_order "$r" direct stoa nginx
        for mode in "${ORDER[@]}"; do
            case "$mode" in
                direct) pop3="${STORE_POP3[0]}" k=0 && tier_args store1 ;;
                stoa) pop3="$MMP_ADDR" k=1 && tier_args mmp ;;
                nginx) pop3="$NGINX_ADDR" k=2 && tier_args nginx ;;
            esac
            name="$mode-r$r"
            log "round $r: $mode (POP3 $pop3)"
            case "$mode" in
                stoa) perf_start "$name" "$MMP_PID" ;;
                nginx) perf_start "$name" "$(tr ' +' ',,' <<<"$NGINX_PIDS")" ;;
            esac
            harness "$name" "$RUN_TIMEOUT" "${COMMON[@]}" --pop3 "$pop3" --rate "$RATE" --levels "$LEVELS" \
                --seed "$((SEED + 10 * r + k))" "${PHASE_ARGS[@]}" --server-software "$SOFTWARE ($mode)" \
                "${TIER_ARGS[@]}" --out "$RUN_DIR/$name"
            perf_stop "$name"
            RUNS+=("$mode|$r|$name")
            check_alive
        done
    done
}

if [[ "$PEER" == compare ]]; then run_compare; else run_topology; fi
check_background "after the runs"

# --- summary and README -----------------------------------------------------------------------

if [[ "$PEER" == compare ]]; then
    printf '%s\n' "${RUNS[@]}" >"$BENCH_TMP/runs.txt"
    python3 "$BENCH_DIR/lib/topology_summary.py" compare "$RUN_DIR" "$BENCH_TMP/runs.txt" >"$OUT/summary.txt"
else
    python3 "$BENCH_DIR/lib/topology_summary.py" tiers "$RUN_DIR/run/result.json" >"$OUT/summary.txt"
fi
for f in "$OUT"/*.txt "$OUT"/*.log; do
    if [[ -f "$f" ]]; then sed -i "s#$BENCH_TMP#\$TMP#g" "$f"; fi
done
cat "$OUT/summary.txt" >&2

{
    if [[ "$PEER" == compare ]]; then
        readme_header "The proxy tier: Stoa's POP3 proxy vs nginx's mail proxy vs direct, in the Sun SPECmail2001 topology"
    else
        readme_header "The Sun SPECmail2001 topology on one machine (--peer-proxy $PEER)"
    fi
    echo "- slapd: $SLAPD_VERSION; nginx mail module: $( [[ -n "$NGINX_PIDS" ]] && echo "$NGINX_VERSION (libnginx-mod-mail)" || echo "not used")"
    readme_section Setup
    echo "- One machine, loopback addresses per tier (the Sun page's servers): LDAP $LDAP_IP, POPSTORE 1 ${STORE_IPS[0]}$( ((NSTORES == 2)) && echo ", POPSTORE 2 ${STORE_IPS[1]}"), SMTPMTA $MTA_IP, MMP $MMP_IP (Stoa) / $NGINX_IP (nginx, auth_http on $AUTH_IP); the harness and its sink on 127.0.0.1. Nothing is pinned: every tier and the harness share the $(nproc) cores."
    echo "- $USERS users user1..user$USERS@$DOMAIN in slapd with \`{SSHA}\` passwords, $( [[ -n "$ONE_STORE" ]] && echo "all on store-1 (so the harness can also go to the store directly)" || echo "mailHost alternating store-1/store-2") ; configurations saved here (slapd.conf, store*.toml, mta.toml, mmp.toml, nginx.conf)."
    echo "- The stores were filled through the MTA (SMTP → queue → LMTP) by \`stoa bench mail --init-only\` in ${FILL_SECS} s; rate $RATE msgs/min, levels $LEVELS, profile $PROFILE${WARMUP:+, warm-up $WARMUP}${RUN_TIME:+, measurement $RUN_TIME}${COOLDOWN:+, cool-down $COOLDOWN}${DRAIN_LIMIT:+, drain limit $DRAIN_LIMIT}$( [[ "$PEER" == compare ]] && echo "; each run its own seed ($SEED + 10 × round + 0 direct, 1 stoa, 2 nginx)")."
    echo "- Each tier's CPU seconds (utime+stime of its processes, children not included) over each level's measurement window, its peak memory (VmHWM summed) and what it handled are in each report's System Configuration section (each run's report is in the results archive, \`stoa bench results\`, not here): SMTP and POP sessions from the harness's tally (the tier at --smtp/--pop3), POP logins and LMTP recipients of the stores and the MTA's delivered recipients counted from their own log lines written during the window."
    if [[ -n "$NGINX_PIDS" ]]; then
        echo "- nginx: the mail module's POP3 proxy, $NGINX_WORKERS workers (as many as Stoa's proxy has event loops), \`pop3_auth plain\`; its \`auth_http\` is bench/lib/auth_http.py: the user → mailHost map and \`{SSHA}\` values written from the same data slapd was loaded with, held in memory (an always-warm cache: Stoa's proxy asks slapd and caches), and the \`{SSHA}\` password checked on every login, as Stoa's proxy checks it. The auth service is its own tier, so nginx's cost is shown with and without it. nginx logs in to the store with USER/PASS; Stoa's proxy with AUTH PLAIN after XCLIENT (the stores trust 127.0.0.0/8). Both stores verify the password again."
    fi
    readme_section Commands
    echo "\$TMP is the script's temp directory, \$OUT this directory."
    echo
    echo '```'
    cat "$COMMANDS"
    echo '```'
    readme_background
    readme_summary
} >"$OUT/README.md"
results_done
