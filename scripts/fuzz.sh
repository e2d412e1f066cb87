#!/usr/bin/env bash
# Runs the fuzz targets (fuzz/: the wire protocol, the WebSocket framing, the Markdown parser) for
# a bounded time each, with cargo-fuzz (scripts/setup.sh installs it) on nightly if there is one,
# else on stable. CI fuzzes the WebSocket framing this way (scripts/test.sh: ws_frame, 60 s) and
# replays every target's committed inputs (fuzz/tests/corpus.rs).
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
# and shrink it with `cargo +nightly fuzz tmin <target> artifacts/<target>/<file>` (without
# nightly: `RUSTC_BOOTSTRAP=1 cargo fuzz …`).
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

# cargo-fuzz passes rustc the unstable sanitizer flags. With a nightly toolchain it uses that;
# without one (CI machines have only the stable toolchain, and no other can be fetched) it uses
# stable with RUSTC_BOOTSTRAP=1, whose rust-std ships the same sanitizer runtimes
# (FUZZ_STABLE=1 chooses stable even where nightly is installed).
if [[ "${FUZZ_STABLE:-}" != 1 ]] && rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    fuzz=(cargo +nightly fuzz)
else
    export RUSTC_BOOTSTRAP=1
    fuzz=(cargo fuzz)
fi
if ! "${fuzz[@]}" --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is missing." >&2
    echo "  install it with: cargo install cargo-fuzz --locked (scripts/setup.sh does)" >&2
    exit 2
fi

export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
echo "== building the fuzz targets (${fuzz[*]} $("${fuzz[@]}" --version | awk '{print $2}'))"
if [[ ${#TARGETS[@]} -eq 1 ]]; then
    nice -n 10 "${fuzz[@]}" build "${TARGETS[0]}"
else
    nice -n 10 "${fuzz[@]}" build
fi

mkdir -p logs
summary=()
status=0
for target in "${TARGETS[@]}"; do
    mkdir -p "corpus/$target"
    log="logs/$target.log"
    echo "== $target: ${secs}s (log: fuzz/$log)"
    set +e
    "${fuzz[@]}" run "$target" "corpus/$target" "seeds/$target" -- \
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
        "${fuzz[@]}" run "$target" "minimized/$target.new" "corpus/$target" "seeds/$target" \
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
