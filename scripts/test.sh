#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script).
#
# Installs what the tests need first (Debian packages, only when missing, so a
# second run installs nothing), then: format check, clippy with warnings as
# errors, rustdoc with warnings as errors, and every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

# command -> Debian package providing it
declare -A needs=(
  [curl]=curl
  [openssl]=openssl
  [sslscan]=sslscan
  [python3]=python3
  [setpriv]=util-linux
  [swaks]=swaks
  [fetchmail]=fetchmail
  # The IMAP clients of crates/stoa/tests/imap_clients.rs: mbsync's two-way sync,
  # and mutt driven through tmux.
  [mbsync]=isync
  [mutt]=mutt
  [tmux]=tmux
  # crates/stoa/tests/man.rs renders the generated manual pages with both.
  [groff]=groff-base
  [man]=man-db
  # Postfix's load client for crates/stoa/tests/mail_crash.rs. The package is
  # preseeded to "No configuration" below, so it installs no main.cf and starts no
  # daemon.
  [smtp-source]=postfix
  # OpenLDAP for the LDAP directory's tests (crates/directory/tests/ldap.rs,
  # crates/stoa/tests/ldap.rs): they start their own slapd from /usr/sbin in a
  # temporary directory; the package is preseeded to create no database below.
  [ldapsearch]=ldap-utils
  # `systemd-analyze verify contrib/stoa.service` (crates/stoa/tests/production.rs).
  [systemd-analyze]=systemd
  # The real decoders of crates/stoa/tests/compression.rs.
  [gzip]=gzip
  [brotli]=brotli
  [zstd]=zstd
  # The load of crates/stoa/tests/bench_peers.rs (`stoa bench peers --workload
  # static`), which without it is skipped.
  [wrk]=wrk
  # The ACME test CA of crates/acme/tests/pebble.rs (pebble and pebble-challtestsrv),
  # which without it is skipped.
  [pebble]=pebble
)
missing=()
for cmd in "${!needs[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${needs[$cmd]}")
done
# /usr/sbin may not be on PATH: look for the server itself.
[ -x /usr/sbin/slapd ] || missing+=(slapd)
# Python's prometheus_client, which crates/stoa/tests/metrics.rs parses /metrics
# with. Debian's package installs it for /usr/bin/python3, which may not be the
# python3 on PATH (the test tries both).
python3 -c 'import prometheus_client' 2>/dev/null \
  || /usr/bin/python3 -c 'import prometheus_client' 2>/dev/null \
  || missing+=(python3-prometheus-client)
# hyperframe and hpack, which crates/stoa/tests/http2.rs builds its HTTP/2 attack
# frames with (Debian's python3-h2 brings both, for /usr/bin/python3).
/usr/bin/python3 -c 'import hpack, hyperframe' 2>/dev/null \
  || python3 -c 'import hpack, hyperframe' 2>/dev/null \
  || missing+=(python3-h2)
# h2load, which crates/stoa/tests/http2.rs drives many HTTP/2 streams with.
command -v h2load >/dev/null || missing+=(nghttp2-client)
# Dovecot's LMTP server, as a store host behind Stoa's MTA
# (crates/stoa/tests/routing.rs starts its own `dovecot -F` in a temporary
# directory).
[ -x /usr/lib/dovecot/lmtp ] || missing+=(dovecot-lmtpd)
# Dovecot's imapd, the peer of `stoa bench peers --workload imap`
# (crates/stoa/tests/bench_peers.rs starts its own `dovecot -F`).
[ -x /usr/lib/dovecot/imap ] || missing+=(dovecot-imapd)
# nginx, the peer crates/stoa/tests/bench_peers.rs compares stoa with (it starts
# its own from a generated nginx.conf on a free port).
[ -x /usr/sbin/nginx ] || missing+=(nginx-light)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test.sh: missing ${missing[*]}; run as root or install them" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if [[ " ${missing[*]} " == *" postfix "* ]]; then
    echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections
  fi
  if [[ " ${missing[*]} " == *" slapd "* ]]; then
    echo "slapd slapd/no_configuration boolean true" | debconf-set-selections
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # Only smtp-source is wanted: never leave a Postfix daemon running.
  pidfile=/var/spool/postfix/pid/master.pid
  if [ -s "$pidfile" ] && kill -0 $(cat "$pidfile") 2>/dev/null; then
    postfix stop
  fi
  # Nor a system slapd: the tests start their own on free ports.
  pidfile=/var/run/slapd/slapd.pid
  if [ -s "$pidfile" ] && kill -0 $(cat "$pidfile") 2>/dev/null; then
    kill $(cat "$pidfile")
  fi
  # Nor a system Dovecot.
  pidfile=/run/dovecot/master.pid
  if [ -s "$pidfile" ] && kill -0 $(cat "$pidfile") 2>/dev/null; then
    kill $(cat "$pidfile")
  fi
  # Nor a system nginx, which the package starts on port 80.
  pidfile=/run/nginx.pid
  if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    kill "$(cat "$pidfile")"
  fi
fi

# Dovecot's imaptest for crates/stoa/tests/imap.rs (its compliance scripts and its
# stress mode against Stoa's IMAP server), built offline from the tarball in
# ../shared/tools/imaptest against Debian's libdovecot (the script installs the
# packages it needs; a second run only prints the path).
imaptest_build=../shared/tools/imaptest/build-imaptest.sh
if [ -z "${STOA_IMAPTEST:-}" ] && [ -x "$imaptest_build" ]; then
  STOA_IMAPTEST="$("$imaptest_build" "${IMAPTEST_DIR:-/opt/imaptest}")"
  export STOA_IMAPTEST
fi

cargo fmt --all -- --check
# The web crate's modules layer one way (issue 51): no import circle between them.
python3 scripts/module-cycles.py crates/web/src --fail
cargo clippy --workspace --all-targets --locked -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet
cargo test --workspace --locked
# The Sun SPECmail2001 topology end to end (bench/topology-sun.sh): slapd, two store
# hosts, the MTA and Stoa's POP3 proxy on loopback addresses, 2,000 users filled
# through the MTA, one short level; then every tier must have been measured. It runs
# the debug binary the tests just built (before the failpoints builds below replace
# it). About 2 minutes.
topology_out="$(mktemp -d)"
timeout 600 bench/topology-sun.sh --stoa "${CARGO_TARGET_DIR:-target}/debug/stoa" \
  --users 2000 --rate 10 --levels 100 --warmup 5s --run-time 30s --cooldown 10s \
  --out "$topology_out" --keep-runs "$topology_out/runs"
python3 bench/lib/topology_summary.py check "$topology_out/runs/run/result.json"
rm -rf "$topology_out"
# The mail queue's crash points are compiled only with this feature.
cargo clippy -p stoa-smtp --features failpoints --all-targets --locked -- -D warnings
cargo test -p stoa-smtp --features failpoints --locked --test failpoints
# kill -9 at each crash point of the built binary (the test binary inherits the
# feature, so CARGO_BIN_EXE_stoa honours FAILPOINTS).
cargo clippy -p stoa --features failpoints --all-targets --locked -- -D warnings
cargo test -p stoa --features failpoints --locked --test mail_crash kill_9_at_each_crash_point
