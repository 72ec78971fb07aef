#!/usr/bin/env bash
# Runs the cargo-fuzz targets of fuzz/ for a while each.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  time per target (default 60)
#   TARGET   fuzz targets to run (default: every target `cargo fuzz list` shows)
#
# Needs the nightly toolchain (libFuzzer instrumentation); installs cargo-fuzz if it is
# missing. New interesting inputs are added to fuzz/corpus/<target>/; shrink them
# before committing as fuzz/README.md says (`cargo fuzz cmin`). Crashes are saved under
# fuzz/artifacts/<target>/ and make the script fail.
set -euo pipefail

seconds="${1:-60}"
shift || true
toolchain="${FUZZ_TOOLCHAIN:-nightly}"

if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
    echo "usage: $0 [SECONDS] [TARGET...]" >&2
    exit 2
fi

cd "$(dirname "$0")/../fuzz"

if ! rustup toolchain list | grep -q "^${toolchain}"; then
    echo "fuzz.sh: installing the ${toolchain} toolchain" >&2
    rustup toolchain install "$toolchain" --profile minimal
fi
if ! cargo "+${toolchain}" fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

if [[ $# -gt 0 ]]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo "+${toolchain}" fuzz list)
fi

for target in "${targets[@]}"; do
    echo "fuzz.sh: ${target} for ${seconds}s" >&2
    mkdir -p "corpus/${target}"
    dict=http.dict
    [[ "$target" == pop3_* ]] && dict=pop3.dict
    cargo "+${toolchain}" fuzz run "$target" -- \
        -max_total_time="$seconds" \
        -dict="$dict" \
        -print_final_stats=1
done
