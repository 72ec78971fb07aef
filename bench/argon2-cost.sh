#!/usr/bin/env bash
# One argon2id password check in isolation, three implementations on the same PHC
# string (stoa's default cost, m=19456,t=2,p=1) and password: stoa's
# verify_password (crates/directory/examples/argon2_cost.rs, release build, the
# stoa binary's allocator), libsodium's crypto_pwhash_str_verify (what Dovecot's
# {ARGON2ID} scheme calls) and the reference libargon2's argon2_verify (Debian's
# builds of both, from a small C program). CPU time (user, system), minor page
# faults and wall time per check, interleaved rounds; then callgrind's
# instructions per check (two runs' difference).
#
#   bench/argon2-cost.sh [--runs 30] [--rounds 3] [--callgrind yes|no]
#                        [--baseline PATH]
#
# --baseline PATH adds a row "stoa-baseline" from another build of the example
# (say, of an older commit) run the same way. libsodium picks its fill function at
# run time (AVX-512F, AVX2 or SSSE3); valgrind 3.19 has no AVX-512, so under
# callgrind libsodium runs its AVX2 code, natively its AVX-512 code. Installs
# gcc, libsodium-dev, libargon2-dev and valgrind when run as root and missing.
# Results go to bench-results/<date>-<host>-argon2/ (argon2-cost.csv,
# callgrind.csv, summary.txt).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=30
ROUNDS=3
CALLGRIND=yes
BASELINE=""
PASSWORD="pw-u1"
bench_cmdline "$@"
parse_args "--runs=RUNS --rounds=ROUNDS --callgrind=CALLGRIND --baseline=BASELINE" "$@"
require_positive "runs and rounds must be positive integers" "$RUNS" "$ROUNDS"
[[ "$CALLGRIND" == yes || "$CALLGRIND" == no ]] || die "--callgrind is yes or no"
[[ -z "$BASELINE" || -x "$BASELINE" ]] || die "--baseline $BASELINE is not an executable"

ensure_commands gcc:gcc
[[ "$CALLGRIND" == no ]] || ensure_commands valgrind:valgrind
missing=()
[[ -e /usr/include/sodium.h ]] || missing+=(libsodium-dev)
[[ -e /usr/include/argon2.h ]] || missing+=(libargon2-dev)
((${#missing[@]} == 0)) || apt_install "${missing[@]}"

bench_install_traps
make_tmp
OUT="$(result_dir argon2)"

log "building the argon2_cost example (release)"
(cd "$REPO_ROOT" && cargo build --release -q -p stoa-directory --example argon2_cost) ||
    die "cargo build of the argon2_cost example failed"
STOA_COST="${CARGO_TARGET_DIR:-$REPO_ROOT/target}/release/examples/argon2_cost"
cp "$STOA_COST" "$BENCH_TMP/argon2_cost"
STOA_COST="$BENCH_TMP/argon2_cost"

# The C side: the same output lines as the example's.
cat >"$BENCH_TMP/cost.c" <<'EOF'
#include <argon2.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* sodium|ref RUNS PASSWORD PHC: one check alone, then RUNS more together. */
int main(int argc, char **argv) {
    if (argc != 5) return 2;
    int sodium = strcmp(argv[1], "sodium") == 0, runs = atoi(argv[2]);
    const char *pw = argv[3], *phc = argv[4];
    if (runs < 0 || (sodium && sodium_init() < 0)) return 2;
    struct rusage r0, r1, r2;
    double w0 = 0, w1 = 0, w2;
    for (int i = -1; i < runs; i++) {
        if (i == -1) getrusage(RUSAGE_SELF, &r0), w0 = wall_ms();
        if (i == 0) getrusage(RUSAGE_SELF, &r1), w1 = wall_ms();
        int ok = sodium ? crypto_pwhash_str_verify(phc, pw, strlen(pw)) == 0
                        : argon2_verify(phc, pw, strlen(pw), Argon2_id) == ARGON2_OK;
        if (!ok) {
            fprintf(stderr, "the password does not match the PHC string\n");
            return 1;
        }
    }
    if (runs == 0) getrusage(RUSAGE_SELF, &r1), w1 = wall_ms();
    getrusage(RUSAGE_SELF, &r2), w2 = wall_ms();
    printf("first  minflt %ld wall_ms %.3f\n", r1.ru_minflt - r0.ru_minflt, w1 - w0);
    if (runs == 0) return 0;
#define MS(a, b) (((b).tv_sec - (a).tv_sec) * 1e3 + ((b).tv_usec - (a).tv_usec) / 1e3)
    double user = MS(r1.ru_utime, r2.ru_utime) / runs, sys = MS(r1.ru_stime, r2.ru_stime) / runs;
    printf("steady cpu_ms %.2f user_ms %.2f sys_ms %.2f minflt %.1f wall_ms %.2f runs %d\n", user + sys,
           user, sys, (double)(r2.ru_minflt - r1.ru_minflt) / runs, (w2 - w1) / runs, runs);
    return 0;
}
EOF
gcc -O2 -Wall -o "$BENCH_TMP/cost" "$BENCH_TMP/cost.c" -lsodium -largon2 || die "compiling cost.c failed"

PHC="$("$STOA_COST" 0 "$PASSWORD" | awk '$1 == "phc" { print $2 }')"
[[ "$PHC" == '$argon2id$v=19$m=19456,t=2,p=1$'* ]] || die "unexpected PHC string: $PHC"
log "PHC string: $PHC"

IMPLS=(stoa sodium ref)
[[ -z "$BASELINE" ]] || IMPLS=(stoa-baseline "${IMPLS[@]}")
cmd_of() { # IMPL RUNS -> the command line
    case "$1" in
        stoa) echo "$STOA_COST $2 $PASSWORD $PHC" ;;
        stoa-baseline) echo "$BASELINE $2 $PASSWORD $PHC" ;;
        sodium | ref) echo "$BENCH_TMP/cost $1 $2 $PASSWORD $PHC" ;;
    esac
}

CSV="$OUT/argon2-cost.csv"
echo "round,impl,cpu_ms,user_ms,sys_ms,minflt,wall_ms,first_minflt,first_wall_ms" >"$CSV"
for ((r = 1; r <= ROUNDS; r++)); do
    round_order "$r" "${IMPLS[@]}"
    for impl in "${ORDER[@]}"; do
        # shellcheck disable=SC2046 # the command line is split on purpose (no spaces in its parts)
        res="$($(cmd_of "$impl" "$RUNS"))" || die "$impl failed"
        awk -v pre="$r,$impl" '$1 == "first" { ff = $3; fw = $5 }
            $1 == "steady" { printf "%s,%s,%s,%s,%s,%s,%s,%s\n", pre, $3, $5, $7, $9, $11, ff, fw }' \
            <<<"$res" >>"$CSV"
        log "round $r $impl: $(grep steady <<<"$res")"
    done
done

CG="$OUT/callgrind.csv"
echo "impl,instructions_per_check" >"$CG"
if [[ "$CALLGRIND" == yes ]]; then
    for impl in "${IMPLS[@]}"; do
        ir=()
        for n in 0 2; do
            # shellcheck disable=SC2046
            valgrind --tool=callgrind --callgrind-out-file=/dev/null $(cmd_of "$impl" "$n") \
                >/dev/null 2>"$BENCH_TMP/vg.log" || die "callgrind of $impl failed: $(tail -n 5 "$BENCH_TMP/vg.log")"
            ir+=("$(awk '/Collected :/ { print $NF }' "$BENCH_TMP/vg.log")")
        done
        echo "$impl,$(((ir[1] - ir[0]) / 2))" >>"$CG"
        log "callgrind $impl: $(((ir[1] - ir[0]) / 2)) instructions per check"
    done
fi

python3 - "$CSV" "$CG" <<'EOF' | tee "$OUT/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ir = {r["impl"]: int(r["instructions_per_check"]) for r in csv.DictReader(open(sys.argv[2]))}
impls = list(dict.fromkeys(r["impl"] for r in rows))
med = lambda impl, k: statistics.median(float(r[k]) for r in rows if r["impl"] == impl)
span = lambda impl, k: [float(r[k]) for r in rows if r["impl"] == impl]
print("per check, medians over rounds [min-max of the rounds' means]")
print(f"{'impl':<14} {'cpu ms':>20} {'user ms':>8} {'sys ms':>7} {'minflt':>7} {'wall ms':>8} {'1st minflt':>10} {'Ir (callgrind)':>15}")
for i in impls:
    c = span(i, "cpu_ms")
    print(f"{i:<14} {med(i, 'cpu_ms'):>7.2f} [{min(c):.2f}-{max(c):.2f}] {med(i, 'user_ms'):>8.2f} {med(i, 'sys_ms'):>7.2f}"
          f" {med(i, 'minflt'):>7.1f} {med(i, 'wall_ms'):>8.2f} {med(i, 'first_minflt'):>10.0f} {ir.get(i, 0):>15,}")
if "sodium" in impls:
    print()
    print("ratio to libsodium (per round, median [min-max])")
    for i in impls:
        if i == "sodium":
            continue
        rs = [float(a["cpu_ms"]) / float(b["cpu_ms"]) for a in rows for b in rows
              if a["impl"] == i and b["impl"] == "sodium" and a["round"] == b["round"]]
        line = f"{i:<14} cpu {statistics.median(rs):.3f} [{min(rs):.3f}-{max(rs):.3f}]"
        if ir.get(i) and ir.get("sodium"):
            line += f"   instructions {ir[i] / ir['sodium']:.3f} (libsodium's AVX2 path under valgrind)"
        print(line)
EOF
results_done
