#!/usr/bin/env bash
# Postfix + Dovecot as the mail system under test for `stoa bench mail`.
#
#   bench/mail-sut.sh start --dir DIR --sink 127.0.0.1:PORT [--users 1000]
#                     [--domain stoa.test] [--remote-domain remote.test]
#                     [--password stoa-bench] [--smtp-port P1] [--pop3-port P2]
#                     [--imap-port P3]
#                     [--stoa PATH] [--passdb sqlite|passwd-file]
#                     [--scheme argon2id|sha512-crypt|blf-crypt|ssha|plain]
#   bench/mail-sut.sh stop --dir DIR
#
# start: a private Postfix (SMTP on 127.0.0.1:P1, virtual(8) delivery into
# DIR/vmail/DOMAIN/userK/Maildir/, mail for REMOTE relayed to the sink) and a
# private Dovecot (POP3 on 127.0.0.1:P2 and IMAP on 127.0.0.1:P3, same Maildirs,
# one hash of --scheme, argon2id by default, for user1..userN@DOMAIN from a
# passwd-file, checked through SQLite by default),
# free ports unless given. Writes DIR/sut.env (SMTP_ADDR, POP3_ADDR, IMAP_ADDR,
# pids, versions) and prints SMTP_ADDR=..., POP3_ADDR=... and IMAP_ADDR=... on
# standard output.
# stop: stops both and leaves nothing running.
# Run as root. Sourcing the file defines `mail_sut start|stop ...` (runs this
# script) and `mail_sut_load DIR` (reads DIR/sut.env). See bench/README.md.

MAIL_SUT_SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
# A caller that already sourced lib.sh keeps its state (SERVER_PIDS, BENCH_TMP).
if ! declare -F bench_cleanup >/dev/null; then
    # shellcheck source=bench/lib.sh disable=SC1091
    source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
fi

# For scripts that source this file: run the script (a separate process, so its
# `set -e`, traps and exits stay its own).
mail_sut() { "$MAIL_SUT_SCRIPT" "$@"; }
# Loads DIR/sut.env (written by start) into the caller's shell.
mail_sut_load() {
    [[ -s "$1/sut.env" ]] || die "no $1/sut.env: was the SUT started with --dir $1?"
    # shellcheck disable=SC1091 # written by mail_sut_start
    source "$1/sut.env"
}

# Marker that makes DIR ours: start refuses a non-empty directory without it.
SUT_MARKER=".stoa-mail-sut"
# Processes: smtpd is one per SMTP session (master.cf), every other Postfix service
# up to default_process_limit; Dovecot runs one pop3 or imap process per session.
SMTPD_LIMIT=1000
PF_PROCESS_LIMIT=1000
POP3_LIMIT=3000
POP3_LOGIN_CLIENTS=1000
IMAP_LIMIT=3000
IMAP_LOGIN_CLIENTS=1000
NOFILE=65536

# This script's own usage, also when another script has sourced it.
usage() { script_header "$MAIL_SUT_SCRIPT"; exit "${1:-0}"; }

# --- prerequisites -------------------------------------------------------------------

# Installs Postfix without configuring it (so Debian starts no system instance) and
# dovecot-pop3d, and stops any system instance of either (as compare-smtp.sh and
# compare-pop3.sh do): only our private instances may use the CPU and the ports.
sut_prerequisites() {
    ensure_commands python3:python3 timeout:coreutils awk:gawk runuser:util-linux
    ensure_postfix
    if [[ "$PASSDB" == sqlite ]]; then ensure_dovecot sqlite; else ensure_dovecot; fi
    ensure_dovecot_imapd
    require_users postfix dovecot dovenull nobody
    getent group postdrop >/dev/null || die "group postdrop is missing (the postfix package creates it)"
}

# --- helpers ---------------------------------------------------------------------------

# Whether something accepts TCP connections on 127.0.0.1:PORT right now.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# "HOST:PORT" -> checks it is a loopback IPv4 address and a valid port.
check_loopback_addr() {
    local what="$1" addr="$2" port
    [[ "$addr" =~ ^127\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3}):([0-9]{1,5})$ ]] ||
        die "$what must be 127.x.y.z:PORT (loopback only), got '$addr'"
    port="${BASH_REMATCH[4]}"
    ((BASH_REMATCH[1] <= 255 && BASH_REMATCH[2] <= 255 && BASH_REMATCH[3] <= 255)) || die "$what: bad address '$addr'"
    ((port >= 1 && port <= 65535)) || die "$what: bad port in '$addr'"
}

check_port_arg() {
    if ! [[ "$2" =~ ^[1-9][0-9]{0,4}$ ]] || (($2 > 65535)); then
        die "$1 must be a port number (1-65535), got '$2'"
    fi
    port_in_use "$2" && die "$1 $2: something already listens on 127.0.0.1:$2"
    return 0
}

# Valid DNS name (letters, digits, hyphens; labels of at most 63 characters).
check_domain() {
    local what="$1" d="$2" label='[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?'
    if ! [[ "$d" =~ ^$label(\.$label)*$ ]] || ((${#d} > 253)); then
        die "$what: not a valid domain name: '$d'"
    fi
}

# Value of KEY in an env file written by write_env (unquoted by bash's own parser).
env_get() {
    local file="$1" key="$2" line
    line="$(grep -m1 "^$key=" "$file" 2>/dev/null || true)"
    [[ -n "$line" ]] || return 0
    # Values are written with printf %q; evaluate only that one assignment.
    (eval "$line" && printf '%s\n' "${!key}")
}

# Reads the first line a server sends on 127.0.0.1:PORT (SMTP 220 / POP3 +OK /
# IMAP * OK), then says goodbye (QUIT, or with "imap" as the second argument
# LOGOUT). Bounded by a 10 s socket timeout.
probe_greeting() {
    python3 - "$1" "${2:-}" <<'EOF'
import socket, sys
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as s:
    f = s.makefile("rb")
    line = f.readline().decode("latin-1").rstrip()
    s.sendall(b"a LOGOUT\r\n" if sys.argv[2] == "imap" else b"QUIT\r\n")
    f.readline()
print(line)
EOF
}

# --- passwords -------------------------------------------------------------------------

# The stoa binary to ask for the passwd-file: --stoa, $STOA, the repository's
# release build, or stoa on PATH.
find_stoa() {
    local c
    for c in "${OPT_STOA:-}" "${STOA:-}" "$STOA_BIN" "$(command -v stoa 2>/dev/null || true)"; do
        [[ -n "$c" && -x "$c" ]] && { echo "$c"; return 0; }
    done
    return 0
}

# write_passwd FILE: Dovecot's passwd-file for user1..userN@DOMAIN, all with the same
# password, hashed with --scheme. In order of preference:
#   stoa:   `stoa bench mail-users --format dovecot --scheme S` (the harness's own
#           file: the strings the built-in server's directory holds);
# and for argon2id only (other schemes go straight to doveadm, at its default cost):
#   sodium: one argon2id hash at stoa's cost (m=19456,t=2,p=1) made with libsodium
#           (the library Dovecot verifies it with), repeated for every user;
#   doveadm: one `doveadm pw -s ARGON2ID` hash (Dovecot's minimum cost, m=65536,t=3,p=1:
#           more work per login than stoa's, an unfairness against Dovecot).
# Sets PASSWD_SOURCE and PASSWD_COST.
write_passwd() {
    local file="$1" stoa hash="" first
    stoa="$(find_stoa)"
    PASSWD_SOURCE=""
    if [[ -n "$stoa" ]] && timeout 30 "$stoa" bench mail-users --help >/dev/null 2>&1; then
        log "passwd-file: $stoa bench mail-users"
        timeout 600 "$stoa" bench mail-users --users "$USERS" --domain "$DOMAIN" --password "$PASSWORD" \
            --format dovecot --scheme "$SCHEME" --out "$file" >"$DIR/mail-users.log" 2>&1 ||
            die "stoa bench mail-users failed: $(tail -n 3 "$DIR/mail-users.log")"
        PASSWD_SOURCE="stoa bench mail-users --scheme $SCHEME ($stoa)"
    elif [[ "$SCHEME" != argon2id ]]; then
        local dv_name="$DV_SCHEME"
        [[ "$dv_name" == PLAIN ]] && dv_name=PLAIN.BASE64
        hash="$(timeout 60 "$DOVEADM_BIN" pw -s "$dv_name" -p "$PASSWORD")" || die "doveadm pw failed"
        [[ "$hash" == "{$dv_name}"* ]] || die "doveadm pw gave '$hash'"
        PASSWD_SOURCE="doveadm pw -s $dv_name (Dovecot's default cost; stoa bench mail-users not available)"
        log "passwd-file: $PASSWD_SOURCE"
        HASH="$hash" awk -v n="$USERS" -v d="$DOMAIN" \
            'BEGIN { h = ENVIRON["HASH"]; for (i = 1; i <= n; i++) printf "user%d@%s:%s\n", i, d, h }' >"$file"
    else
        hash="$(python3 - "$PASSWORD" <<'EOF' 2>"$DIR/passwd-hash.log" || true
import ctypes, ctypes.util, sys
lib = ctypes.CDLL(ctypes.util.find_library("sodium") or "libsodium.so.23")
if lib.sodium_init() < 0:
    sys.exit("sodium_init failed")
out = ctypes.create_string_buffer(lib.crypto_pwhash_strbytes())
pw = sys.argv[1].encode()
# opslimit 2 (t=2), memlimit 19456 KiB (m=19456), algorithm argon2id13: stoa's cost.
if lib.crypto_pwhash_str_alg(out, pw, ctypes.c_ulonglong(len(pw)), ctypes.c_ulonglong(2),
                             ctypes.c_size_t(19456 * 1024), lib.crypto_pwhash_alg_argon2id13()) != 0:
    sys.exit("crypto_pwhash_str_alg failed")
print("{ARGON2ID}" + out.value.decode())
EOF
        )"
        if [[ "$hash" == "{ARGON2ID}\$argon2id\$"* ]]; then
            PASSWD_SOURCE="libsodium argon2id at stoa's cost (stoa bench mail-users not available)"
        else
            log "libsodium hashing failed ($(tail -n 1 "$DIR/passwd-hash.log" 2>/dev/null)); using doveadm pw"
            hash="$(timeout 60 "$DOVEADM_BIN" pw -s ARGON2ID -p "$PASSWORD")" || die "doveadm pw failed"
            [[ "$hash" == "{ARGON2ID}"* ]] || die "doveadm pw gave '$hash'"
            PASSWD_SOURCE="doveadm pw -s ARGON2ID (Dovecot's minimum cost, above stoa's)"
        fi
        log "passwd-file: $PASSWD_SOURCE"
        # Same hash for every user (the harness's file shares one hash too): fast for
        # any N. ENVIRON, not -v, so awk does not interpret backslashes.
        HASH="$hash" awk -v n="$USERS" -v d="$DOMAIN" \
            'BEGIN { h = ENVIRON["HASH"]; for (i = 1; i <= n; i++) printf "user%d@%s:%s\n", i, d, h }' >"$file"
    fi
    first="$(head -1 "$file")"
    [[ "$first" == "user1@$DOMAIN:{"* ]] || die "passwd-file $file: unexpected first line '${first:0:60}'"
    (($(wc -l <"$file") == USERS)) || die "passwd-file $file: $(wc -l <"$file") lines, expected $USERS"
    PASSWD_COST="$(head -1 "$file" | scheme_cost)"
    PASSWD_COST="${PASSWD_COST:-?}"
    chown root:dovecot "$file"
    chmod 640 "$file"
}

# setup_passdb DV_DIR: Dovecot's passdb for the passwd-file DV_DIR/passwd; sets
# PASSDB_CONF (the dovecot.conf lines).
#   sqlite (default): the passwd-file loaded into DV_DIR/users.db, an SQL passdb. SQL
#     is a blocking passdb, so the argon2 checks run in auth-worker processes (up to
#     auth_worker_max_count, 30) on every core, and the auth cache works (10M, 15 min,
#     like stoa's cache of successful checks), its hits checked in the workers too.
#     Dovecot's cache keeps the passdb entry, not the result: a cached login still
#     runs argon2 (measured: 18 ms per login with the cache, 1.8 ms for a {PLAIN} user).
#   passwd-file: Dovecot reads the file itself. Every argon2 check then runs in the
#     single auth process (one core), and this passdb never uses the auth cache.
setup_passdb() {
    local dv="$1"
    if [[ "$PASSDB" == passwd-file ]]; then
        PASSDB_CONF="# passwd-file: no auth cache (this passdb never uses it); every argon2 check
# runs in the one auth process.
passdb {
  driver = passwd-file
  args = scheme=$DV_SCHEME $dv/passwd
}"
        return 0
    fi
    rm -f "$dv/users.db"
    python3 - "$dv/passwd" "$dv/users.db" <<'EOF' || die "loading the passwd-file into SQLite failed"
import sqlite3, sys
src, dst = sys.argv[1], sys.argv[2]
db = sqlite3.connect(dst)
db.execute("CREATE TABLE users (user TEXT PRIMARY KEY, password TEXT NOT NULL)")
with open(src) as f:
    db.executemany("INSERT INTO users VALUES (?, ?)",
                   (line.rstrip("\n").split(":", 2)[:2] for line in f if ":" in line))
db.commit()
db.close()
EOF
    chown root:dovecot "$dv/users.db"
    chmod 640 "$dv/users.db"
    cat >"$dv/sql.conf.ext" <<EOF
# SQL passdb of bench/mail-sut.sh: the passwd-file's user:hash pairs in SQLite.
driver = sqlite
connect = $dv/users.db
default_pass_scheme = $DV_SCHEME
password_query = SELECT user, password FROM users WHERE user = '%u'
EOF
    PASSDB_CONF="# SQL (SQLite) passdb loaded from the passwd-file: the argon2 checks run in the
# auth-worker processes (up to 30, on every core). The auth cache (sized like stoa's
# cache of successful checks, 15 min) saves the lookup, but Dovecot still runs
# argon2 on a cached login (in the workers too).
auth_cache_size = 10M
auth_cache_ttl = 15 min
auth_cache_verify_password_with_worker = yes
passdb {
  driver = sql
  args = $dv/sql.conf.ext
}"
}

# --- start ----------------------------------------------------------------------------

# EXIT trap of start: unless start got to the end, stop whatever it started.
start_failed() {
    [[ -z "${SUT_STARTED:-}" ]] || return 0
    log "start failed; stopping what was started"
    mail_sut_stop --dir "$DIR" >/dev/null 2>&1 || true
}

# Options of start (globals DIR, USERS, DOMAIN, REMOTE, PASSWORD, SINK, ...), checked.
sut_parse_start() {
    DIR="" USERS=1000 DOMAIN=stoa.test REMOTE=remote.test PASSWORD=stoa-bench SINK=""
    SMTP_PORT="" POP3_PORT="" IMAP_PORT="" OPT_STOA="" PASSDB=sqlite SCHEME=argon2id
    parse_args "--dir=DIR --users=USERS --domain=DOMAIN --remote-domain=REMOTE --password=PASSWORD --sink=SINK
        --smtp-port=SMTP_PORT --pop3-port=POP3_PORT --imap-port=IMAP_PORT --stoa=OPT_STOA --passdb=PASSDB
        --scheme=SCHEME" "$@"
    SCHEME="${SCHEME,,}"
    DV_SCHEME="$(dovecot_scheme "$SCHEME")" || die "--scheme is argon2id, sha512-crypt, blf-crypt, ssha or plain"
    [[ -n "$DIR" ]] || die "start: --dir DIR is required"
    [[ -n "$SINK" ]] || die "start: --sink 127.0.0.1:PORT is required (where Postfix relays mail for the remote domain)"
    if ! [[ "$USERS" =~ ^[1-9][0-9]{0,7}$ ]] || ((USERS > 10000000)); then
        die "--users must be an integer from 1 to 10000000"
    fi
    check_domain --domain "$DOMAIN"
    check_domain --remote-domain "$REMOTE"
    DOMAIN="${DOMAIN,,}" REMOTE="${REMOTE,,}"
    [[ "$DOMAIN" != "$REMOTE" ]] || die "--domain and --remote-domain must differ"
    [[ -n "$PASSWORD" ]] || die "--password must not be empty"
    [[ "$PASSWORD" =~ ^[[:print:]]+$ ]] || die "--password: printable characters only (no tabs or newlines)"
    check_loopback_addr --sink "$SINK"
    [[ -n "$OPT_STOA" && ! -x "$OPT_STOA" ]] && die "--stoa $OPT_STOA: not an executable"
    [[ "$PASSDB" == sqlite || "$PASSDB" == passwd-file ]] || die "--passdb is sqlite or passwd-file"
    [[ "$(id -u)" == 0 ]] || die "run as root: Postfix's and Dovecot's master processes start as root"
}

# The directory: new, empty, or one of ours from an earlier start (whose state is
# reset: queue, mailboxes, logs).
sut_prepare_dir() {
    mkdir -p "$DIR"
    DIR="$(cd "$DIR" && pwd)"
    [[ "$DIR" != / ]] || die "--dir must not be /"
    if [[ -n "$(ls -A "$DIR")" && ! -e "$DIR/$SUT_MARKER" ]]; then
        die "--dir $DIR is not empty and was not made by mail-sut.sh; use a new directory"
    fi
    if [[ -e "$DIR/$SUT_MARKER" ]]; then
        local pf_old dv_old
        pf_old="$(tr -d ' \n' 2>/dev/null <"$DIR/postfix-queue/pid/master.pid" || true)"
        dv_old="$(cat "$DIR/dovecot/base/master.pid" 2>/dev/null || true)"
        if [[ -n "$pf_old" ]] && kill -0 "$pf_old" 2>/dev/null; then
            die "a Postfix from $DIR still runs (pid $pf_old): mail-sut.sh stop --dir $DIR"
        fi
        if [[ -n "$dv_old" ]] && kill -0 "$dv_old" 2>/dev/null; then
            die "a Dovecot from $DIR still runs (pid $dv_old): mail-sut.sh stop --dir $DIR"
        fi
        log "resetting the earlier SUT state in $DIR"
        rm -rf "${DIR:?}"/{postfix,postfix-queue,postfix-data,dovecot,vmail,sut.env} \
            "$DIR"/{postfix,dovecot}{.log,-check.log,-start.log} "$DIR"/{mail-users,passwd-hash}.log
    fi
    touch "$DIR/$SUT_MARKER"
    chmod 755 "$DIR"
}

# SMTP_PORT, POP3_PORT and IMAP_PORT: as given (and free), or free ones.
sut_choose_ports() {
    [[ -n "$SMTP_PORT" ]] && check_port_arg --smtp-port "$SMTP_PORT"
    [[ -n "$POP3_PORT" ]] && check_port_arg --pop3-port "$POP3_PORT"
    [[ -n "$IMAP_PORT" ]] && check_port_arg --imap-port "$IMAP_PORT"
    if [[ -n "$SMTP_PORT$POP3_PORT$IMAP_PORT" ]] &&
        { [[ -n "$SMTP_PORT" && ("$SMTP_PORT" == "$POP3_PORT" || "$SMTP_PORT" == "$IMAP_PORT") ]] ||
            [[ -n "$POP3_PORT" && "$POP3_PORT" == "$IMAP_PORT" ]]; }; then
        die "--smtp-port, --pop3-port and --imap-port must differ"
    fi
    SMTP_PORT="${SMTP_PORT:-$(free_port)}"
    POP3_PORT="${POP3_PORT:-$(free_port)}"
    while [[ "$POP3_PORT" == "$SMTP_PORT" ]]; do POP3_PORT="$(free_port)"; done
    IMAP_PORT="${IMAP_PORT:-$(free_port)}"
    while [[ "$IMAP_PORT" == "$SMTP_PORT" || "$IMAP_PORT" == "$POP3_PORT" ]]; do IMAP_PORT="$(free_port)"; done
    [[ "$SINK" != "127.0.0.1:$SMTP_PORT" && "$SINK" != "127.0.0.1:$POP3_PORT" && "$SINK" != "127.0.0.1:$IMAP_PORT" ]] ||
        die "--sink $SINK is one of the SUT's own ports"
}

# The Maildir root for DOMAIN (nobody must be able to write it) and Dovecot's directories.
sut_make_dirs() {
    mkdir -p "$VMAIL/$DOMAIN" "$DV_DIR"/{base,state}
    chown -R "$VMAIL_UID:$VMAIL_GID" "$VMAIL"
    chmod 755 "$DV_DIR"
    runuser -u nobody -- test -w "$VMAIL/$DOMAIN" ||
        die "user nobody cannot write $VMAIL/$DOMAIN: a parent of $DIR is not searchable by others (use a --dir under /tmp or /var)"
}

# main.cf and master.cf: local users in DIR/vmail/DOMAIN/userK/Maildir/, remote ones
# relayed to the sink.
sut_write_postfix() {
    write_postfix_main_cf "Private Postfix for bench/mail-sut.sh: the SMTP side of the mail SUT." \
        sut.bench.invalid "$DOMAIN" "
# The harness's SMTP clients (users sending mail, and remote MTAs delivering
# inbound mail) all connect from 127.0.0.1.
smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination
virtual_destination_concurrency_limit = 20

# Remote users: $REMOTE is relayed to the harness's mail sink at $SINK. No DNS at
# all (the next hop is an IP literal), no TLS. Up to 20 connections to the sink at
# once (Postfix's default destination concurrency).
relay_domains = $REMOTE
transport_maps = hash:$PF_CONF/transport
smtp_dns_support_level = disabled
smtp_host_lookup = native
smtp_tls_security_level = none
smtp_destination_concurrency_limit = 20

# Processes per service (smtpd's own limit, $SMTPD_LIMIT, is in master.cf: one per
# session); cleanup needs one per smtpd receiving a message.
default_process_limit = $PF_PROCESS_LIMIT
# SPECmail2001 messages go up to 2,675 KiB; 1-20 recipients.
message_size_limit = 10485760
virtual_mailbox_limit = 51200000"
    write_postfix_master_cf "$SMTP_PORT" "$SMTPD_LIMIT"
}

# Users (postmap needs main.cf): the Postfix maps, one line per user, and Dovecot's
# passwd-file and passdb.
sut_write_users() {
    local t0=$SECONDS
    awk -v n="$USERS" -v d="$DOMAIN" \
        'BEGIN { for (i = 1; i <= n; i++) printf "user%d@%s %s/user%d/Maildir/\n", i, d, d, i }' >"$PF_CONF/vmailbox"
    printf '%s smtp:[%s]:%s\n' "$REMOTE" "${SINK%:*}" "${SINK##*:}" >"$PF_CONF/transport"
    /usr/sbin/postmap -c "$PF_CONF" "hash:$PF_CONF/vmailbox"
    /usr/sbin/postmap -c "$PF_CONF" "hash:$PF_CONF/transport"
    write_passwd "$DV_DIR/passwd"
    setup_passdb "$DV_DIR"
    log "$USERS users written (Postfix map and Dovecot passwd-file) in $((SECONDS - t0)) s"
}

# DV_DIR/dovecot.conf: POP3 on 127.0.0.1:POP3_PORT and IMAP on 127.0.0.1:IMAP_PORT
# over the same Maildirs.
sut_write_dovecot() {
    # Dovecot's auth process serves the login processes and one userdb connection per
    # pop3 or imap process; anvil and stats see every process too.
    local auth_clients=$((POP3_LIMIT + IMAP_LIMIT + 1000))
    {
        dovecot_conf_head "Private Dovecot for bench/mail-sut.sh: the POP3 and IMAP side of the mail SUT." \
            "$DV_DIR" stoa-bench-mail-sut "$DV_LOG" "pop3 imap"
        cat <<EOF
# The Maildirs Postfix's virtual(8) writes, as the same user (nobody).
mail_location = maildir:$VMAIL/%d/%n/Maildir
first_valid_uid = $VMAIL_UID
first_valid_gid = $VMAIL_GID
default_internal_user = dovecot
default_login_user = dovenull
# mail_fsync at its default (optimized): POP3 only deletes and renames; IMAP's
# STORE \\Deleted and EXPUNGE rename and delete too (and write Dovecot's index).
pop3_uidl_format = %g
# Logins are USER userK@$DOMAIN, one argon2id hash per user in the passwd-file.
$PASSDB_CONF
userdb {
  driver = static
  args = uid=$VMAIL_UID gid=$VMAIL_GID home=$VMAIL/%d/%n
}
# All sessions come from 127.0.0.1: the per-user-and-address limit (default 10)
# must not turn concurrent sessions of one user away.
mail_max_userip_connections = 1000
# Up to $POP3_LIMIT POP3 sessions at once: a pop3 process per session (Dovecot's
# model, reused for up to 100 sessions, $(nproc) kept ready), login processes in
# high-performance mode ($POP3_LOGIN_CLIENTS connections each, $(nproc) kept ready).
EOF
        dovecot_conf_pop3_login "$POP3_PORT" "$(nproc)" "client_limit = $POP3_LOGIN_CLIENTS"
        cat <<EOF
service pop3 {
  service_count = 100
  process_min_avail = $(nproc)
  process_limit = $POP3_LIMIT
}
# IMAP (stoa bench mail --access imap) sized like POP3: up to $IMAP_LIMIT sessions, an
# imap process per session reused for up to 100, $(nproc) kept ready; imap-login in
# high-performance mode ($IMAP_LOGIN_CLIENTS connections each).
EOF
        dovecot_conf_imap_login "$IMAP_PORT" "$(nproc)" "client_limit = $IMAP_LOGIN_CLIENTS"
        dovecot_conf_imap "$IMAP_LIMIT" "$(nproc)" 100
        cat <<EOF
service auth {
  client_limit = $auth_clients
}
# No per-IP auth penalty: with every client on 127.0.0.1, one failed login would
# otherwise delay every later login by 2 s and more (measured: a good login 4 s
# after one failure). Disabled the documented way, by making anvil's penalty
# socket unusable; the 2 s delay of the failed login itself (auth_failure_delay)
# stays.
service anvil {
  client_limit = $auth_clients
  unix_listener anvil-auth-penalty {
    mode = 0
  }
}
service stats {
  client_limit = $auth_clients
}
EOF
    } >"$DV_DIR/dovecot.conf"
}

# Starts Dovecot (it daemonizes: master.pid in base_dir) and waits for DV_PID to
# listen on POP3_PORT and IMAP_PORT.
sut_start_dovecot() {
    if ! "$DOVECOT_BIN" -c "$DV_DIR/dovecot.conf" >"$DIR/dovecot-start.log" 2>&1; then
        # The daemonized child may write the reason just after the parent has exited.
        wait_file "$DIR/dovecot-start.log" 2 || true
        die "dovecot failed to start: $(tail -n 5 "$DIR/dovecot-start.log" "$DV_LOG" 2>/dev/null)"
    fi
    DV_PID="$(read_pidfile "$DV_DIR/base/master.pid")"
    [[ "$DV_PID" =~ ^[0-9]+$ ]] || die "no Dovecot master pid in $DV_DIR/base/master.pid: $(tail -n 5 "$DV_LOG" 2>/dev/null)"
    wait_port "$POP3_PORT" "$DV_PID" || die "dovecot did not listen on $POP3_PORT: $(tail -n 5 "$DV_LOG" 2>/dev/null)"
    wait_port "$IMAP_PORT" "$DV_PID" || die "dovecot did not listen on $IMAP_PORT: $(tail -n 5 "$DV_LOG" 2>/dev/null)"
}

# Both answer with their greeting, and what Dovecot logged at startup.
sut_check_greetings() {
    local smtp_banner pop3_banner imap_banner
    smtp_banner="$(probe_greeting "$SMTP_PORT")" || die "no SMTP greeting on 127.0.0.1:$SMTP_PORT"
    [[ "$smtp_banner" == 220* ]] || die "unexpected SMTP greeting: $smtp_banner"
    pop3_banner="$(probe_greeting "$POP3_PORT")" || die "no POP3 greeting on 127.0.0.1:$POP3_PORT"
    [[ "$pop3_banner" == +OK* ]] || die "unexpected POP3 greeting: $pop3_banner"
    imap_banner="$(probe_greeting "$IMAP_PORT" imap)" || die "no IMAP greeting on 127.0.0.1:$IMAP_PORT"
    [[ "$imap_banner" == "* OK"* ]] || die "unexpected IMAP greeting: $imap_banner"
    if grep -qiE 'warning|error|fatal' "$DV_LOG" 2>/dev/null; then
        log "dovecot logged at startup: $(grep -iE 'warning|error|fatal' "$DV_LOG" | tail -3)"
    fi
}

# DIR/sut.env, for mail_sut_load and compare-mail.sh.
sut_write_env() {
    PF_VERSION="$(postfix_version)"
    DV_VERSION="$("$DOVECOT_BIN" --version)"
    {
        printf '# Written by bench/mail-sut.sh start on %s\n' "$(date -Is)"
        printf '%s=%q\n' SMTP_ADDR "127.0.0.1:$SMTP_PORT" POP3_ADDR "127.0.0.1:$POP3_PORT" \
            IMAP_ADDR "127.0.0.1:$IMAP_PORT" \
            SINK_ADDR "$SINK" DOMAIN "$DOMAIN" REMOTE_DOMAIN "$REMOTE" USERS "$USERS" \
            POSTFIX_PID "$PF_MASTER" DOVECOT_PID "$DV_PID" \
            POSTFIX_VERSION "$PF_VERSION" DOVECOT_VERSION "$DV_VERSION" \
            POSTFIX_PACKAGE "$(dpkg-query -W -f '${Version}' postfix 2>/dev/null || echo '?')" \
            DOVECOT_PACKAGE "$(dpkg-query -W -f '${Version}' dovecot-pop3d 2>/dev/null || echo '?')" \
            PASSWD_SOURCE "$PASSWD_SOURCE" PASSWD_COST "$PASSWD_COST" PASSDB "$PASSDB" \
            PASSWD_SCHEME "$DV_SCHEME" \
            POSTFIX_CONF "$PF_CONF" DOVECOT_CONF "$DV_DIR/dovecot.conf" VMAIL "$VMAIL" \
            POSTFIX_LOG "$PF_LOG" DOVECOT_LOG "$DV_LOG"
    } >"$DIR/sut.env"
}

mail_sut_start() {
    sut_parse_start "$@"
    sut_prerequisites
    sut_prepare_dir
    sut_choose_ports
    # PF_CONF, PF_QUEUE, PF_LOG, VMAIL, VMAIL_UID, ... (bench/lib/mail.sh).
    postfix_layout "$DIR"
    DV_DIR="$DIR/dovecot" DV_LOG="$DIR/dovecot.log"

    # Whatever fails from here on: stop what was started.
    SUT_STARTED=""
    trap 'start_failed' EXIT

    sut_make_dirs
    sut_write_postfix
    sut_write_users
    sut_write_dovecot
    postfix_check
    dovecot_check "$DV_DIR/dovecot.conf" "$DV_DIR/dovecot-n.txt"

    # Both masters (and so every process they fork) inherit this limit.
    raise_nofile "$NOFILE"
    postfix_start "$SMTP_PORT"
    sut_start_dovecot
    sut_check_greetings
    sut_write_env
    SUT_STARTED=1
    log "Postfix $PF_VERSION (master $PF_MASTER) on 127.0.0.1:$SMTP_PORT," \
        "Dovecot $DV_VERSION (master $DV_PID) on 127.0.0.1:$POP3_PORT (POP3) and 127.0.0.1:$IMAP_PORT (IMAP);" \
        "$REMOTE relayed to $SINK"
    printf 'SMTP_ADDR=127.0.0.1:%s\nPOP3_ADDR=127.0.0.1:%s\nIMAP_ADDR=127.0.0.1:%s\n' "$SMTP_PORT" "$POP3_PORT" "$IMAP_PORT"
}

# --- stop ------------------------------------------------------------------------------

mail_sut_stop() {
    local dir="" pf_pid dv_pid pf_sid dv_sid rc=0
    parse_args "--dir=dir" "$@"
    [[ -n "$dir" ]] || die "stop: --dir DIR is required"
    [[ -d "$dir" ]] || die "stop: no directory $dir"
    [[ -e "$dir/$SUT_MARKER" ]] || die "stop: $dir was not made by mail-sut.sh"
    [[ "$(id -u)" == 0 ]] || die "run as root"
    # The pid files are authoritative (sut.env is only written once start succeeded).
    pf_pid="$(tr -d ' \n' 2>/dev/null <"$dir/postfix-queue/pid/master.pid" || true)"
    [[ -n "$pf_pid" ]] || pf_pid="$(env_get "$dir/sut.env" POSTFIX_PID)"
    dv_pid="$(tr -d ' \n' 2>/dev/null <"$dir/dovecot/base/master.pid" || true)"
    [[ -n "$dv_pid" ]] || dv_pid="$(env_get "$dir/sut.env" DOVECOT_PID)"

    # A pid counts only if it is still that program (pids get reused).
    if [[ "$pf_pid" =~ ^[0-9]+$ ]] && [[ "$(cat "/proc/$pf_pid/comm" 2>/dev/null)" == master ]]; then
        pf_sid="$(proc_sid "$pf_pid")"
        log "stopping Postfix (master $pf_pid)"
        stop_tree Postfix "$pf_pid" "$pf_sid" /usr/sbin/postfix -c "$dir/postfix" stop || rc=1
    fi
    if [[ "$dv_pid" =~ ^[0-9]+$ ]] && [[ "$(cat "/proc/$dv_pid/comm" 2>/dev/null)" == dovecot ]]; then
        dv_sid="$(proc_sid "$dv_pid")"
        log "stopping Dovecot (master $dv_pid)"
        stop_tree Dovecot "$dv_pid" "$dv_sid" "$(command -v dovecot || echo /usr/sbin/dovecot)" \
            -c "$dir/dovecot/dovecot.conf" stop || rc=1
    fi
    rm -f "$dir/dovecot/base/master.pid"
    ((rc == 0)) || die "some SUT processes could not be stopped"
    log "SUT in $dir stopped"
}

# --- main --------------------------------------------------------------------------------

mail_sut_main() {
    set -euo pipefail
    (($#)) || usage 2
    local cmd="$1"
    shift
    case "$cmd" in
        start) mail_sut_start "$@" ;;
        stop) mail_sut_stop "$@" ;;
        -h | --help) usage 0 ;;
        *) echo "unknown command: $cmd (start or stop)" >&2; usage 2 ;;
    esac
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    mail_sut_main "$@"
fi
