#!/usr/bin/env python3
"""nginx mail's auth_http service for bench/topology-sun.sh (standard library only).

    auth_http.py --listen 127.0.0.16:PORT --users MAP [--hosts HOSTS] [--wait 3]

nginx's mail proxy asks this service, for every login, whether the password is
right and which store host to proxy to (http://nginx.org/en/docs/mail/ngx_mail_auth_http_module.html).
It answers the way Stoa's POP3 proxy decides, so the two proxies do the same work:

- MAP is a tab-separated file written by the script from the same data it loads
  into slapd: ADDRESS, MAILHOST, and the userPassword value ({SSHA}base64).
  The lookup is a dict held in memory: a directory cache that is always warm
  (Stoa's proxy asks slapd and caches the entry; both answer from memory in the
  steady state).
- The password is checked on every request: {SSHA} (SHA-1 over password + salt,
  compared in constant time), as Stoa's LDAP backend checks it (Stoa also
  remembers a login's last successful check; SHA-1 costs microseconds either way).
- HOSTS maps each MAILHOST to the store's POP3 address (NAME<TAB>IP:PORT).
- OK: "Auth-Status: OK", "Auth-Server", "Auth-Port"; a wrong password or an
  unknown user: "Auth-Status: Invalid login or password" and "Auth-Wait".

Requests are answered by a threading HTTP/1.0 server (nginx opens one connection
per request). It prints "auth_http: listening on HOST:PORT" when ready.
"""

import argparse
import base64
import hashlib
import hmac
import http.server
import sys
import urllib.parse

# nginx escapes Auth-User and Auth-Pass (ngx_escape_uri, NGX_ESCAPE_MAIL_AUTH);
# a header longer than this is refused rather than decoded.
MAX_FIELD = 1024


def check_ssha(stored, password):
    """Whether PASSWORD matches STORED, a "{SSHA}base64(sha1(pw + salt) + salt)"."""
    if not stored.startswith("{SSHA}"):
        return False
    try:
        raw = base64.b64decode(stored[6:], validate=True)
    except ValueError:
        return False
    if len(raw) <= 20:
        return False
    digest, salt = raw[:20], raw[20:]
    return hmac.compare_digest(hashlib.sha1(password + salt).digest(), digest)


def load(users_path, hosts_path):
    users = {}
    with open(users_path, encoding="utf-8") as f:
        for line in f:
            address, host, secret = line.rstrip("\n").split("\t")
            users[address.lower()] = (host.lower(), secret)
    hosts = {}
    with open(hosts_path, encoding="utf-8") as f:
        for line in f:
            name, addr = line.rstrip("\n").split("\t")
            ip, port = addr.rsplit(":", 1)
            hosts[name.lower()] = (ip, int(port))
    return users, hosts


def handler(users, hosts, wait):
    class Auth(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def field(self, name):
            value = self.headers.get(name, "")
            if len(value) > MAX_FIELD:
                return None
            return urllib.parse.unquote_to_bytes(value)

        def do_GET(self):
            user, password = self.field("Auth-User"), self.field("Auth-Pass")
            entry = None
            if user is not None and password is not None:
                entry = users.get(user.decode("utf-8", "replace").lower())
            target = hosts.get(entry[0]) if entry else None
            if entry and target and check_ssha(entry[1], password):
                lines = ["Auth-Status: OK", f"Auth-Server: {target[0]}", f"Auth-Port: {target[1]}"]
            else:
                lines = ["Auth-Status: Invalid login or password", f"Auth-Wait: {wait}"]
            self.send_response(200)
            for line in lines:
                name, value = line.split(": ", 1)
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format, *args):  # noqa: A002 (the base class's name)
            pass

    return Auth


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--listen", required=True, help="IP:PORT")
    p.add_argument("--users", required=True, help="ADDRESS<TAB>MAILHOST<TAB>{SSHA}... lines")
    p.add_argument("--hosts", required=True, help="MAILHOST<TAB>IP:PORT lines")
    p.add_argument("--wait", type=int, default=3, help="Auth-Wait after a failed login (s)")
    a = p.parse_args()
    users, hosts = load(a.users, a.hosts)
    ip, port = a.listen.rsplit(":", 1)

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024

    server = Server((ip, int(port)), handler(users, hosts, a.wait))
    print(f"auth_http: listening on {ip}:{server.server_address[1]}, {len(users)} users",
          file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
