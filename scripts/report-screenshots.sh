#!/usr/bin/env bash
# Writes docs/screenshots/{web,mail}-{800,1400}.png (generated, ignored by git):
# runs the web harness
# (quick profile, about 70 s) and a short mail run (three levels of 40 s and
# their drains, about 8 min) on loopback, then renders each HTML report in
# headless Chromium at 800 and 1,400 px wide.
#
# Usage: [REPORTS=DIR] scripts/report-screenshots.sh [STOA_BINARY]
#   REPORTS  keep the reports in DIR/web and DIR/mail; when they are already
#            there, only take the screenshots again
# Needs chromium (apt-get install chromium) and, by default, a release build
# (cargo build --release -p stoa). The pages are cut after the web report's
# charts and the mail report's first level (a full mail page is several MB of
# PNG); the figures differ from run to run, the layout does not.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
stoa="${1:-${CARGO_TARGET_DIR:-$root/target}/release/stoa}"
chromium="${CHROMIUM:-chromium}"
out="$root/docs/screenshots"
if [ -n "${REPORTS:-}" ]; then
    work="$REPORTS"
    mkdir -p "$work"
else
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
fi

[ -x "$stoa" ] || [ -f "$work/web/report.html" ] ||
    { echo "no stoa binary at $stoa (cargo build --release -p stoa)" >&2; exit 1; }
command -v "$chromium" >/dev/null || { echo "no $chromium (apt-get install chromium)" >&2; exit 1; }

if [ ! -f "$work/web/report.html" ]; then
    timeout 300 "$stoa" bench web --out "$work/web" >"$work/web.log" 2>&1
fi
if [ ! -f "$work/mail/result.html" ]; then
    # A failing QoS level exits non-zero; the page is still written.
    timeout 900 "$stoa" bench mail --warmup 5s --run-time 30s --cooldown 5s --out "$work/mail" \
        >"$work/mail.log" 2>&1 || true
fi

mkdir -p "$out"
shoot() { # page name height
    for width in 800 1400; do
        timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars \
            --window-size="$width,$3" --screenshot="$out/$2-$width.png" "file://$1" \
            >/dev/null 2>&1
    done
}
shoot "$work/web/report.html" web 3000
shoot "$work/mail/result.html" mail 4000
ls -l "$out"
