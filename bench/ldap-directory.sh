#!/usr/bin/env bash
# The LDAP directory from Stoa: N users in a private slapd, then `stoa bench directory`.
#
#   bench/ldap-directory.sh [--users 1500000] [--argon2-users 4] [--duration 20s]
#                           [--concurrency 1,64] [--hot-set 10000] [--pool-size 8]
#                           [--slapadd-timeout 1800] [--run-timeout 1800]
#
# Generates an LDIF of N users (1.5 M is the Sun SPECmail2001 system's count):
# user1..userN@stoa.test, inetOrgPerson + inetLocalMailRecipient, mailHost
# alternating store-a/store-b.stoa.test, userPassword {SSHA} (a salted SHA-1:
# 1.5 M argon2 hashes would take hours at ~20 ms each, so only --argon2-users
# extra users, argonK@stoa.test, have {ARGON2} hashes, made by `stoa user add` +
# `stoa user export-ldif`). Loads it with `slapadd -q` into a back-mdb database
# in a temp directory (indexes: objectClass, mail, mailLocalAddress eq), timed;
# starts that slapd on a free loopback port; runs `stoa bench directory`: lookups
# of random users with Stoa's cache off (cold) and of a cached hot set (warm) at
# each concurrency, and password checks of {SSHA} and {ARGON2} users. Results go
# to bench-results/<date>-<host>-ldap-directory/. See bench/README.md.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

USERS=1500000
ARGON2_USERS=4
DURATION=20s
CONCURRENCY=1,64
HOT_SET=10000
POOL_SIZE=8
SLAPADD_TIMEOUT=1800
RUN_TIMEOUT=1800
PASSWORD=stoa-bench
BASE="dc=stoa,dc=test"
ADMIN_DN="cn=admin,$BASE"
bench_cmdline "$@"
parse_args "--users=USERS --argon2-users=ARGON2_USERS --duration=DURATION
    --concurrency=CONCURRENCY --hot-set=HOT_SET --pool-size=POOL_SIZE
    --slapadd-timeout=SLAPADD_TIMEOUT --run-timeout=RUN_TIMEOUT" "$@"
require_positive "--users, --argon2-users, --hot-set, --pool-size and the timeouts take positive integers" \
    "$USERS" "$ARGON2_USERS" "$HOT_SET" "$POOL_SIZE" "$SLAPADD_TIMEOUT" "$RUN_TIMEOUT"
((HOT_SET <= USERS)) || HOT_SET="$USERS"

ensure_commands python3:python3 timeout:coreutils slapd:slapd slapadd:slapd
bench_setup 0

# Disk: the LDIF is ~330 bytes a user, the mdb database with its indexes ~2.5 KiB;
# ask for 4 KiB a user plus 512 MiB.
need_kib=$((USERS * 4 + 512 * 1024))
free_kib="$(df -Pk "$BENCH_TMP" | awk 'NR == 2 { print $4 }')"
((free_kib >= need_kib)) ||
    die "$((free_kib / 1024)) MiB free under $BENCH_TMP, need about $((need_kib / 1024)) MiB for --users $USERS"

bench_begin ldap-directory

# --- the LDIF ----------------------------------------------------------------------

LDIF="$BENCH_TMP/users.ldif"
log "generating $USERS users into ${LDIF#"$BENCH_TMP"/}"
t0=$SECONDS
python3 - "$USERS" "$PASSWORD" "$BASE" >"$LDIF" <<'EOF'
import base64, hashlib, random, sys
users, password, base = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
rng = random.Random(1)
out = sys.stdout
out.write(f"dn: {base}\nobjectClass: top\nobjectClass: dcObject\nobjectClass: organization\n"
          f"o: Stoa bench\ndc: stoa\n\ndn: ou=people,{base}\nobjectClass: organizationalUnit\n"
          f"ou: people\n\n")
for n in range(1, users + 1):
    salt = rng.randbytes(8)
    ssha = base64.b64encode(hashlib.sha1(password + salt).digest() + salt).decode()
    host = "store-a" if n % 2 else "store-b"
    out.write(f"dn: uid=user{n},ou=people,{base}\nobjectClass: inetOrgPerson\n"
              f"objectClass: inetLocalMailRecipient\nuid: user{n}\ncn: user{n}\nsn: user{n}\n"
              f"mail: user{n}@stoa.test\nmailHost: {host}.stoa.test\nemployeeNumber: {n}\n"
              f"userPassword: {{SSHA}}{ssha}\n\n")
EOF
EMBEDDED="$BENCH_TMP/argon2-users"
for ((k = 1; k <= ARGON2_USERS; k++)); do
    printf '%s\n' "$PASSWORD" | "$STOA_BIN" user add "argon$k@stoa.test" --mail-dir "$EMBEDDED" \
        --password-stdin 2>>"$BENCH_TMP/stoa-user.log" ||
        die "stoa user add argon$k failed: $(tail -n 3 "$BENCH_TMP/stoa-user.log")"
done
"$STOA_BIN" user export-ldif --mail-dir "$EMBEDDED" --base "ou=people,$BASE" \
    --mail-host store-a.stoa.test >>"$LDIF"
GEN_SECS=$((SECONDS - t0))
log "LDIF: $(du -h "$LDIF" | cut -f1) in ${GEN_SECS}s"

# --- slapd ----------------------------------------------------------------------------

SLAPD_DIR="$BENCH_TMP/slapd"
slapd_conf "$SLAPD_DIR" "$USERS"
save_config "$SLAPD_DIR/slapd.conf" "$OUT/slapd.conf"

log "slapadd -q of $((USERS + ARGON2_USERS)) users (timeout ${SLAPADD_TIMEOUT}s)"
t0="$(date +%s.%N)"
slapd_load "$SLAPD_DIR" "$LDIF" "$SLAPADD_TIMEOUT"
t1="$(date +%s.%N)"
SLAPADD_SECS="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')"
DB_SIZE="$(du -sh "$SLAPD_DIR/db" | cut -f1)"
log "slapadd: ${SLAPADD_SECS}s, database $DB_SIZE"
# The LDIF is no longer needed: give its disk back before measuring.
rm -f "$LDIF"

slapd_start "$SLAPD_DIR"
log "slapd $(/usr/sbin/slapd -VV 2>&1 | grep -o 'slapd [0-9.]*' | head -1) (pid $SLAPD_PID) on 127.0.0.1:$LDAP_PORT"

# --- the measurement -------------------------------------------------------------------

printf 'admin-secret\n' >"$BENCH_TMP/ldap.secret"
cat >"$BENCH_TMP/stoa.toml" <<EOF
[directory]
backend = "ldap"
urls = ["ldap://127.0.0.1:$LDAP_PORT"]
base = "$BASE"
bind_dn = "$ADMIN_DN"
bind_password_file = "ldap.secret"
this_host = "store-a.stoa.test"
pool_size = $POOL_SIZE
EOF
save_config "$BENCH_TMP/stoa.toml" "$OUT/stoa.toml"
ARGON2_LOGINS="$(seq -f 'argon%g@stoa.test' -s, 1 "$ARGON2_USERS")"
SSHA_LOGINS="$(seq -f 'user%g@stoa.test' -s, 1 "$ARGON2_USERS")"
BENCH_ARGS=(bench directory --config "$BENCH_TMP/stoa.toml" --users "$USERS"
    --concurrency "$CONCURRENCY" --duration "$DURATION" --hot-set "$HOT_SET"
    --verify "ssha=$SSHA_LOGINS" --verify "argon2=$ARGON2_LOGINS" --password "$PASSWORD")
log "stoa ${BENCH_ARGS[*]}"
snap0="$(cpu_snapshot "$SLAPD_PID")"
timeout --kill-after=10 "$RUN_TIMEOUT" "$STOA_BIN" "${BENCH_ARGS[@]}" >"$OUT/bench.txt" \
    2>"$BENCH_TMP/bench.err" || die "stoa bench directory failed: $(tail -n 5 "$BENCH_TMP/bench.err")"
snap1="$(cpu_snapshot "$SLAPD_PID")"
cat "$OUT/bench.txt" >&2
check_background "after the run"

{
    echo "users: $USERS {SSHA} + $ARGON2_USERS {ARGON2}"
    echo "LDIF generation: ${GEN_SECS}s"
    echo "slapadd -q: ${SLAPADD_SECS}s ($(awk -v u="$((USERS + ARGON2_USERS))" -v s="$SLAPADD_SECS" \
        'BEGIN { printf "%.0f", u / s }') entries/s), database $DB_SIZE"
    echo "CPU of other processes during the runs: $(other_cpu_pct "$snap0" "$snap1")% of the machine"
    echo "CPU of slapd + stoa bench during the runs: $(awk -v a="${snap0##* }" -v b="${snap1##* }" \
        -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", (b - a) / hz }') s"
    echo
    sed "s#$BENCH_TMP#\$TMP#g" "$OUT/bench.txt"
} >"$OUT/summary.txt"

{
    readme_header "LDAP directory from Stoa: $USERS users in slapd"
    readme_section "Setup"
    echo "- slapd (back-mdb, $(basename "$SLAPD_DIR")/slapd.conf saved as slapd.conf) on loopback, loaded with slapadd -q"
    echo "- Stoa's [directory] as saved in stoa.toml (pool_size $POOL_SIZE); cold = cache_size 0, warm = the default cache with a hot set of $HOT_SET users"
    echo "- Each run lasts $DURATION; concurrency $CONCURRENCY"
    readme_background
    readme_summary
} >"$OUT/README.md"
results_done
