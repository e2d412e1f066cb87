#!/usr/bin/env bash
# Runs the fuzz targets (fuzz/: the wire protocol, the WebSocket framing, the Markdown parser) for
# a bounded time each. Fuzzing needs nightly and cargo-fuzz, so it is not part of CI; CI replays
# the committed inputs on stable instead (fuzz/tests/corpus.rs).
#
#   scripts/fuzz.sh                 # every target, 60 s each
#   scripts/fuzz.sh 300             # every target, 300 s each
#   FUZZ_SECS=10 scripts/fuzz.sh sse_decoder chunk_decode
#   FUZZ_KEEP=1 scripts/fuzz.sh     # then minimise each corpus (cargo fuzz cmin) into
#                                   # fuzz/minimized/<target>/, the inputs CI replays
#
# Each target keeps its growing corpus in fuzz/corpus/<target>/ (git-ignored) and also reads the
# committed seeds in fuzz/seeds/<target>/. A crash stops that target, leaves the input in
# fuzz/artifacts/<target>/ and makes this script exit non-zero; reproduce it with
#   cd fuzz && cargo +nightly fuzz run <target> artifacts/<target>/<file>
# and shrink it with `cargo +nightly fuzz tmin <target> artifacts/<target>/<file>`.
#
# Builds with CARGO_BUILD_JOBS=1 under `nice` unless CARGO_BUILD_JOBS is set (2-core machines).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../fuzz"

TARGETS=(sse_decoder chunk_decode ws_envelope ws_frame markdown)
secs="${FUZZ_SECS:-60}"
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then
    secs="$1"
    shift
fi
if [[ $# -gt 0 ]]; then
    TARGETS=("$@")
fi

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "fuzz.sh: the nightly toolchain is missing (cargo-fuzz needs it for the sanitizers)." >&2
    echo "  install it with: rustup toolchain install nightly --profile minimal" >&2
    exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is missing." >&2
    echo "  install it with: cargo install cargo-fuzz --locked" >&2
    exit 2
fi

export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
echo "== building the fuzz targets (cargo-fuzz $(cargo +nightly fuzz --version | awk '{print $2}'))"
nice -n 10 cargo +nightly fuzz build

mkdir -p logs
summary=()
status=0
for target in "${TARGETS[@]}"; do
    mkdir -p "corpus/$target"
    log="logs/$target.log"
    echo "== $target: ${secs}s (log: fuzz/$log)"
    set +e
    cargo +nightly fuzz run "$target" "corpus/$target" "seeds/$target" -- \
        -max_total_time="$secs" -dict=protocol.dict -timeout=25 -print_final_stats=1 \
        >"$log" 2>&1
    rc=$?
    set -e
    # libFuzzer's last status line: "#<execs> DONE cov: … corp: <n>/<size> exec/s: …".
    runs="$(grep -E '^stat::number_of_executed_units' "$log" | tail -1 | awk '{print $2}')"
    speed="$(grep -E '^stat::average_exec_per_sec' "$log" | tail -1 | awk '{print $2}')"
    cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')"
    corpus="$(find "corpus/$target" -type f | wc -l)"
    if [[ $rc -eq 0 ]]; then
        result=ok
    else
        result="FAILED (exit $rc, see fuzz/$log and fuzz/artifacts/$target/)"
        status=1
        tail -n 40 "$log" >&2
    fi
    line="$(printf '%-13s %12s execs  %7s exec/s  cov %6s  corpus %6s files  %s' \
        "$target" "${runs:-?}" "${speed:-?}" "${cov:-?}" "$corpus" "$result")"
    echo "$line"
    summary+=("$line")
done

if [[ "${FUZZ_KEEP:-}" == 1 && $status -eq 0 ]]; then
    for target in "${TARGETS[@]}"; do
        echo "== minimising corpus/$target into minimized/$target"
        rm -rf "minimized/$target.new"
        mkdir -p "minimized/$target.new"
        cargo +nightly fuzz run "$target" "minimized/$target.new" "corpus/$target" "seeds/$target" \
            -- -merge=1 -dict=protocol.dict >"logs/$target.merge.log" 2>&1
        rm -rf "minimized/$target"
        mv "minimized/$target.new" "minimized/$target"
        echo "   $(find "minimized/$target" -type f | wc -l) inputs"
    done
fi

echo
echo "== summary (${secs}s per target)"
printf '%s\n' "${summary[@]}"
exit "$status"
