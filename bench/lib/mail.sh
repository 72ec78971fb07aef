# shellcheck shell=bash
# Globals set here (PF_*, VMAIL*, DOVECOT_BIN, ...) are read by the scripts.
# shellcheck disable=SC2034
# The mail half of the bench helpers: private Postfix and Dovecot instances beside
# (never instead of) the system's, for compare-smtp.sh, compare-pop3.sh and
# mail-sut.sh. Sourced by bench/lib.sh (log, die, apt_install, wait_port, ...); do
# not source it alone.
#
# A private Postfix lives in one directory, BASE (postfix_layout): BASE/postfix
# (main.cf, master.cf, maps), BASE/postfix-queue, BASE/postfix-data, BASE/vmail
# (virtual(8) Maildirs, owned by nobody) and BASE/postfix.log.

# --- prerequisites -------------------------------------------------------------------

# Installs Postfix without configuring it (so Debian starts no system instance), and
# makes sure no system instance runs: only our private instance may use the CPU and
# the ports.
ensure_postfix() {
    if [[ ! -x /usr/sbin/postfix || ! -x /usr/sbin/postmap || ! -x /usr/sbin/postconf ||
        ! -x /usr/sbin/smtp-source ]]; then
        [[ "$(id -u)" == 0 ]] || die "postfix is not installed and we are not root: install it first"
        log "installing postfix (debconf: No configuration)"
        echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
        apt_install postfix
    fi
    if [[ -d /run/systemd/system ]] && systemctl is-active --quiet postfix 2>/dev/null; then
        log "stopping the system postfix service"
        timeout 60 systemctl stop postfix || true
    fi
    if [[ -f /etc/postfix/main.cf ]] && timeout 20 /usr/sbin/postfix status >/dev/null 2>&1; then
        log "stopping the system postfix instance (/etc/postfix)"
        timeout 60 /usr/sbin/postfix stop >/dev/null 2>&1 || true
    fi
}

# ensure_dovecot [sqlite]: dovecot-pop3d (and dovecot-sqlite) installed, DOVECOT_BIN
# and DOVEADM_BIN set, and no system Dovecot running beside ours.
# shellcheck disable=SC2120 # the argument is optional
ensure_dovecot() {
    local sqlite_so=/usr/lib/dovecot/modules/libdriver_sqlite.so
    if [[ ! -x /usr/lib/dovecot/pop3 ]] || ! command -v doveadm >/dev/null 2>&1; then
        apt_install dovecot-pop3d
    fi
    [[ -x /usr/lib/dovecot/pop3 ]] || die "dovecot-pop3d is not installed (no /usr/lib/dovecot/pop3)"
    if [[ "${1:-}" == sqlite && ! -e "$sqlite_so" ]]; then
        apt_install dovecot-sqlite
        [[ -e "$sqlite_so" ]] || die "dovecot-sqlite is not installed (no $sqlite_so)"
    fi
    DOVECOT_BIN="$(command -v dovecot || echo /usr/sbin/dovecot)"
    DOVEADM_BIN="$(command -v doveadm || echo /usr/bin/doveadm)"
    stop_system_dovecot
}

# ensure_dovecot_imapd: Dovecot's imapd (dovecot-imapd) installed too.
ensure_dovecot_imapd() {
    [[ -x /usr/lib/dovecot/imap ]] || apt_install dovecot-imapd
    [[ -x /usr/lib/dovecot/imap ]] || die "dovecot-imapd is not installed (no /usr/lib/dovecot/imap)"
}

# The system Dovecot (started by the package) must not run beside ours: stop it
# (not disable it).
stop_system_dovecot() {
    local pidfile=/run/dovecot/master.pid
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet dovecot.service 2>/dev/null; then
        log "stopping the system dovecot.service"
        timeout 60 systemctl stop dovecot.service dovecot.socket 2>/dev/null || true
    fi
    # Without systemd: a master using the default configuration.
    if [[ -s "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        log "stopping the system dovecot (pid $(cat "$pidfile"))"
        timeout 60 "$DOVECOT_BIN" stop 2>/dev/null || true
    fi
    if [[ -s "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        die "a system dovecot is still running (pid $(cat "$pidfile")); stop it first"
    fi
}

# require_users USER...: dies unless every system user exists (the postfix and
# dovecot-core packages create them).
require_users() {
    local u
    for u in "$@"; do
        id "$u" >/dev/null 2>&1 || die "user $u is missing (base-passwd, postfix and dovecot-core create the ones used here)"
    done
}

# --- Postfix ------------------------------------------------------------------------------

# postfix_layout BASE: the paths of a private Postfix under BASE (PF_BASE, PF_CONF,
# PF_QUEUE, PF_DATA, PF_LOG, VMAIL) and the owner of its Maildirs (VMAIL_UID,
# VMAIL_GID: nobody). Creates the directories.
postfix_layout() {
    PF_BASE="$1"
    PF_CONF="$PF_BASE/postfix"      # main.cf, master.cf, maps
    PF_QUEUE="$PF_BASE/postfix-queue"
    PF_DATA="$PF_BASE/postfix-data"
    PF_LOG="$PF_BASE/postfix.log"
    VMAIL="$PF_BASE/vmail"          # virtual_mailbox_base: VMAIL/.../Maildir/
    PF_RUNNING=""
    PF_MASTER=""
    VMAIL_UID="$(id -u nobody)"
    VMAIL_GID="$(id -g nobody)"
    ((VMAIL_UID >= 100)) || die "user nobody has uid $VMAIL_UID, below Postfix's virtual_minimum_uid (100)"
    mkdir -p "$PF_CONF" "$PF_QUEUE" "$PF_DATA" "$VMAIL"
    chown postfix "$PF_DATA"
    chown "$VMAIL_UID:$VMAIL_GID" "$VMAIL"
}

# write_postfix_main_cf COMMENT HOSTNAME DOMAIN [EXTRA]: PF_CONF/main.cf for the
# layout above, listening on 127.0.0.1 only: DOMAIN a virtual mailbox domain whose
# users are in PF_CONF/vmailbox, virtual(8) delivery as nobody with fsync on (the
# default), no per-client limits, no reverse DNS, a log file; then EXTRA (the
# script's own settings: process and size limits, relaying).
write_postfix_main_cf() {
    local comment="$1" hostname="$2" domain="$3" extra="${4:-}"
    cat >"$PF_CONF/main.cf" <<EOF
# $comment
compatibility_level = 3.6
queue_directory = $PF_QUEUE
data_directory = $PF_DATA
mail_owner = postfix
setgid_group = postdrop
myhostname = $hostname
mydomain = bench.invalid
myorigin = \$myhostname
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
# The SMTP clients all connect from 127.0.0.1.
mynetworks = 127.0.0.0/8

# No local(8) domain: $domain is a virtual mailbox domain, which must not also
# be in mydestination. virtual(8) needs no system users; it writes the Maildirs
# under $VMAIL as nobody, fsync on (the default: queue file fsynced before the
# 250, each Maildir file before the delivery is done).
mydestination =
local_recipient_maps =
alias_maps =
alias_database =
virtual_mailbox_domains = $domain
virtual_mailbox_base = $VMAIL
virtual_mailbox_maps = hash:$PF_CONF/vmailbox
virtual_uid_maps = static:$VMAIL_UID
virtual_gid_maps = static:$VMAIL_GID
virtual_transport = virtual

# Load: no per-client limits (all load comes from 127.0.0.1), no reverse DNS.
smtpd_client_connection_rate_limit = 0
smtpd_client_connection_count_limit = 0
smtpd_client_message_rate_limit = 0
smtpd_client_recipient_rate_limit = 0
smtpd_peername_lookup = no
smtpd_recipient_limit = 1000
biff = no

# Logging to a file through postlogd (Postfix 3.4+).
maillog_file = $PF_LOG
maillog_file_prefixes = $PF_BASE
$extra
EOF
}

# write_postfix_master_cf PORT SMTPD_MAXPROC: PF_CONF/master.cf, smtpd on
# 127.0.0.1:PORT with at most SMTPD_MAXPROC processes (one per session), the
# usual services, none chrooted.
write_postfix_master_cf() {
    cat >"$PF_CONF/master.cf" <<EOF
# service type  private unpriv  chroot  wakeup  maxproc command
127.0.0.1:$1 inet n -       n       -       $2 smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
local     unix  -       n       n       -       -       local
virtual   unix  -       n       n       -       -       virtual
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
EOF
}

# postfix_check: `postfix check` of PF_CONF (output in PF_BASE/postfix-check.log).
postfix_check() {
    timeout 60 /usr/sbin/postfix -c "$PF_CONF" check >"$PF_BASE/postfix-check.log" 2>&1 ||
        die "postfix check failed: $(tail -n 5 "$PF_BASE/postfix-check.log")"
}

# postfix_start PORT: starts the instance in PF_CONF (output in
# PF_BASE/postfix-start.log) and waits for its master (PF_MASTER) to listen on
# 127.0.0.1:PORT. PF_RUNNING is set first, so postfix_stop tries even a failed start.
postfix_start() {
    local port="$1"
    PF_RUNNING=1
    timeout 60 /usr/sbin/postfix -c "$PF_CONF" start >"$PF_BASE/postfix-start.log" 2>&1 ||
        die "postfix start failed: $(tail -n 5 "$PF_BASE/postfix-start.log" "$PF_LOG" 2>/dev/null)"
    PF_MASTER="$(read_pidfile "$PF_QUEUE/pid/master.pid")"
    [[ "$PF_MASTER" =~ ^[0-9]+$ ]] || die "no Postfix master pid in $PF_QUEUE/pid/master.pid"
    wait_port "$port" "$PF_MASTER" || die "postfix did not listen on $port: $(tail -n 5 "$PF_LOG" 2>/dev/null)"
}

# Stops the instance postfix_start started (for bench_on_exit); a no-op otherwise.
postfix_stop() {
    [[ -n "${PF_RUNNING:-}" ]] || return 0
    PF_RUNNING=""
    if [[ -n "$PF_MASTER" ]]; then
        stop_tree Postfix "$PF_MASTER" "$(proc_sid "$PF_MASTER")" /usr/sbin/postfix -c "$PF_CONF" stop || true
    else
        timeout 60 /usr/sbin/postfix -c "$PF_CONF" stop >/dev/null 2>&1 || true
    fi
}

postfix_version() { /usr/sbin/postconf -c "$PF_CONF" -h mail_version; }

# --- stopping a daemon's process tree ------------------------------------------------------

# Session id of a process (empty if it is gone).
proc_sid() { ps -o sid= -p "$1" 2>/dev/null | tr -d ' '; }

# PIDs of every process in session SID (but never this shell or its parents).
session_pids() {
    local sid="$1"
    ps -eo pid=,sid= | awk -v s="$sid" -v me="$$" -v pp="$PPID" '$2 == s && $1 != me && $1 != pp { print $1 }'
}

# stop_tree NAME MASTER_PID SID STOP_CMD...: asks the master to stop (STOP_CMD), waits
# up to 15 s for it to exit, then SIGKILLs it; then makes sure nothing of its session
# is left (SIGTERM, up to 5 s, SIGKILL). SID is only used when the master leads its
# session (Postfix's and Dovecot's masters call setsid()), never the caller's own.
stop_tree() {
    local name="$1" pid="$2" sid="$3" i left
    shift 3
    if kill -0 "$pid" 2>/dev/null; then
        timeout 60 "$@" >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
        if ! wait_exit "$pid" 15; then
            log "$name master (pid $pid) still running 15 s after the stop request; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    [[ -n "$sid" && "$sid" == "$pid" && "$sid" != "$(proc_sid $$)" ]] || return 0
    left="$(session_pids "$sid")"
    [[ -z "$left" ]] && return 0
    # shellcheck disable=SC2086 # a list of pids
    kill -TERM $left 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        left="$(session_pids "$sid")"
        [[ -z "$left" ]] && return 0
        sleep 0.1
    done
    log "$name: processes ${left//$'\n'/ } outlived their master; sending SIGKILL"
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        [[ -z "$(session_pids "$sid")" ]] && return 0
        sleep 0.1
    done
    log "!!! $name: processes $(session_pids "$sid" | tr '\n' ' ')are still there after SIGKILL"
    return 1
}

# --- Dovecot ------------------------------------------------------------------------------

# dovecot_conf_head COMMENT DIR INSTANCE LOG [PROTOCOLS]: the start of a private
# dovecot.conf serving PROTOCOLS ("pop3" unless given; "pop3 imap", "imap")
# (base and state directories under DIR, plaintext logins, no TLS).
dovecot_conf_head() {
    cat <<EOF
# $1
protocols = ${5:-pop3}
listen = 127.0.0.1
base_dir = $2/base
state_dir = $2/state
instance_name = $3
log_path = $4
info_log_path = $4
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
EOF
}

# dovecot_conf_pop3_login PORT MIN_AVAIL LIMIT_SETTING: the pop3-login service on
# 127.0.0.1:PORT (no pop3s) in high-performance mode (service_count 0), MIN_AVAIL
# processes kept ready, and LIMIT_SETTING (process_limit or client_limit).
dovecot_conf_pop3_login() {
    cat <<EOF
service pop3-login {
  inet_listener pop3 {
    address = 127.0.0.1
    port = $1
  }
  inet_listener pop3s {
    port = 0
  }
  service_count = 0
  process_min_avail = $2
  $3
}
EOF
}

# dovecot_conf_imap_login PORT MIN_AVAIL LIMIT_SETTING: the imap-login service on
# 127.0.0.1:PORT (no imaps) in high-performance mode (service_count 0), MIN_AVAIL
# processes kept ready, and LIMIT_SETTING (process_limit or client_limit). Without
# TLS a login process hands the connection to an imap process and keeps nothing of
# it.
dovecot_conf_imap_login() {
    cat <<EOF
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = $1
  }
  inet_listener imaps {
    port = 0
  }
  service_count = 0
  process_min_avail = $2
  $3
}
EOF
}

# dovecot_conf_imap PROCESS_LIMIT MIN_AVAIL [SERVICE_COUNT]: the imap service (one
# process per session, Dovecot's model: client_limit 1), up to PROCESS_LIMIT
# processes, MIN_AVAIL kept ready, each serving SERVICE_COUNT sessions one after
# the other (1 unless given, Dovecot's default; 0: no limit); INBOX as the one namespace's inbox (as bench peers's
# Dovecot); no hibernation of IDLE sessions (imap_hibernate_timeout 0, Dovecot's
# default, written out: a hibernated session would move to the imap-hibernate
# process and its memory with it).
dovecot_conf_imap() {
    cat <<EOF
namespace inbox {
  inbox = yes
}
imap_hibernate_timeout = 0
service imap {
  client_limit = 1
  service_count = ${3:-1}
  process_min_avail = $2
  process_limit = $1
}
EOF
}

# No IMAP listeners (the package enables imap-login by default).
dovecot_conf_no_imap() {
    cat <<'EOF'
service imap-login {
  inet_listener imap {
    port = 0
  }
  inet_listener imaps {
    port = 0
  }
}
EOF
}

# dovecot_check CONF OUT: `dovecot -n` of CONF into OUT (errors into OUT.err).
dovecot_check() {
    "$DOVECOT_BIN" -c "$1" -n >"$2" 2>"$2.err" ||
        die "dovecot rejects its configuration: $(tail -n 5 "$2.err")"
}

# The argon2id cost ("m=...,t=...,p=...") of the first PHC string on standard input.
argon2_cost() {
    # Quits at the first match (no `| head -1`: under pipefail, sed's SIGPIPE would
    # fail the caller).
    # shellcheck disable=SC2016 # literal dollars in the sed pattern
    sed -n '/\$argon2id\$v=19\$/{s/.*\$argon2id\$v=19\$\([^$]*\)\$.*/\1/p;q;}'
}

# Dovecot's name of a stoa scheme name (stoa user add --scheme, [directory]
# password_scheme): argon2id -> ARGON2ID, ...; fails for anything else.
dovecot_scheme() {
    case "${1,,}" in
    argon2id) echo ARGON2ID ;;
    sha512-crypt) echo SHA512-CRYPT ;;
    blf-crypt | bcrypt) echo BLF-CRYPT ;;
    ssha) echo SSHA ;;
    plain) echo PLAIN ;;
    *) return 1 ;;
    esac
}

# The cost of the first {SCHEME}value on stdin (a passwd-file or one value), as a
# report says it: argon2id's m=,t=,p=, bcrypt's cost, sha512-crypt's rounds, or
# the scheme alone.
scheme_cost() {
    # One awk that exits at the first value (no head: see argon2_cost).
    awk 'match($0, /[{][A-Za-z0-9.-]+[}][^:]*/) {
        v = substr($0, RSTART, RLENGTH)
        if (match(v, /[$]argon2id[$]v=19[$][^$]*/)) { s = substr(v, RSTART, RLENGTH); sub(/.*[$]/, "", s); print "argon2id " s }
        else if (match(v, /[$]2[aby][$][0-9]+[$]/)) { print "bcrypt cost " substr(v, RSTART + 4, 2) }
        else if (match(v, /[$]6[$]rounds=[0-9]+/)) { s = substr(v, RSTART, RLENGTH); sub(/.*=/, "", s); print "sha512-crypt " s " rounds" }
        else if (v ~ /[$]6[$]/) { print "sha512-crypt 5000 rounds" }
        else { s = v; sub(/[}].*/, "}", s); print s }
        exit
    }'
}

# --- the Postfix + Dovecot system under test (bench/mail-sut.sh) ---------------------------

# For compare-mail.sh and ab-mail.sh: one SUT at a time, in SUT_DIR while SUT_UP.
MAIL_SUT="$BENCH_DIR/mail-sut.sh"
SUT_DIR=""
SUT_UP=""
PD_SOFTWARE=""

# sut_start DIR USERS SCHEME SINK LOG: a fresh SUT from mail-sut.sh (which empties
# DIR) for USERS accounts with SCHEME hashes in DOMAIN, relaying REMOTE_DOMAIN to
# SINK; its output in LOG.txt and LOG.log. Sources DIR/sut.env (SMTP_ADDR,
# POP3_ADDR, POSTFIX_PID, DOVECOT_PID, the versions) and sets PD_SOFTWARE. Stops
# the SUT before, dies if the new one does not start; the caller registers
# sut_stop with bench_on_exit.
sut_start() {
    local dir="$1" users="$2" scheme="$3" sink="$4" out="$5"
    sut_stop
    SUT_DIR="$dir"
    SUT_UP=1
    "$MAIL_SUT" start --dir "$dir" --users "$users" --domain "$DOMAIN" --remote-domain "$REMOTE_DOMAIN" \
        --sink "$sink" --stoa "$STOA_BIN" --scheme "$scheme" >"$out.txt" 2>"$out.log" ||
        die "bench/mail-sut.sh start failed: $(tail -n 3 "$out.log")"
    # shellcheck disable=SC1091 # written by mail-sut.sh start
    source "$dir/sut.env"
    PD_SOFTWARE="Postfix $POSTFIX_VERSION + Dovecot ${DOVECOT_VERSION%% *}"
}

# Stops the SUT sut_start started, if it runs (SUT_DIR stays for its files).
sut_stop() {
    [[ -n "$SUT_UP" ]] || return 0
    SUT_UP=""
    "$MAIL_SUT" stop --dir "$SUT_DIR" || log "!!! stopping the Postfix + Dovecot SUT failed"
}
