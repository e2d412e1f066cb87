#!/usr/bin/env bash
# Sets up this machine if needed and runs every test: formatting, clippy (-D warnings) for both
# feature sets, the Rust tests of both feature sets (what `cargo leptos test` runs, the Postgres
# store's against a throwaway cluster started here), the fuzz targets'
# committed inputs replayed on stable (fuzz/tests/corpus.rs) and a minute of fuzzing the
# WebSocket framing (scripts/fuzz.sh ws_frame), the AI SDK
# conformance suite (the real npm `ai` package, 6.0.0 and 7, driving /api/chat) and the
# Playwright suite, each against servers started on free ports and stopped again: the server the
# Rust tests' build compiled (target/debug/countersign) with the release build of the site (the
# split, size-optimised wasm, its JS and CSS): docs/adr/0053-browser-tests-on-the-test-build.md.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$root/end2end/node_modules/.bin:$PATH"

# Each step's time is printed as it ends and all of them at the end (where CI's minutes go).
started=$SECONDS
step_name=""
step_started=$SECONDS
timings=()
end_step() {
  if [ -n "$step_name" ]; then
    timings+=("$(printf '%6d s  %s' $((SECONDS - step_started)) "$step_name")")
    printf '(%s: %d s)\n' "$step_name" $((SECONDS - step_started))
  fi
}
step() {
  end_step
  step_name="$*"
  step_started=$SECONDS
  printf '\n==> %s\n' "$*"
}

# What runs in the background, stopped however this script ends.
tools_pid=""
front_pid=""
pg_dir=""
cleanup() {
  if [ -n "$tools_pid" ]; then kill -- "-$tools_pid" 2>/dev/null || true; fi
  if [ -n "$front_pid" ]; then kill -- "-$front_pid" 2>/dev/null || true; fi
  if [ -n "$pg_dir" ]; then
    scripts/pg.sh stop "$pg_dir/data" || true
    rm -rf "$pg_dir"
  fi
}
trap cleanup EXIT

# The set-up in two halves (docs/adr/0050-ci-overlap.md). On a fresh machine the cargo tools
# (cargo-leptos above all) are many minutes of compiling that only the fuzzing and the release
# build need, so they are built in the background, at a lower priority, while the steps up to
# the fuzz corpus check and test the Rust code, taking the core those steps leave idle (one
# crate's type checking, links, test runs). Both cores are busy most of the time, so this
# moves minutes more than it removes them. Where the tools are present it is a few seconds.
step "set-up: what this machine lacks (scripts/setup.sh base packages; cargo-tools in the background)"
scripts/setup.sh base
tools_log="$(mktemp /tmp/countersign-cargo-tools.XXXXXX)"
# Its own session (setsid), so that cleanup stops the cargo it runs too. A new session is a new
# scheduler autogroup on Linux, where `nice` only orders tasks within their autogroup: the
# autogroup's own nice value is lowered too, or the tools would take half the machine.
setsid sh -c 'echo 10 >/proc/self/autogroup 2>/dev/null; exec nice -n 10 scripts/setup.sh cargo-tools' \
  >"$tools_log" 2>&1 &
tools_pid=$!
echo "building the cargo tools in the background (pid $tools_pid, log $tools_log)"
scripts/setup.sh packages

# A fresh clone's debug, test, fuzz and release builds take about 30 GB. CI (CI=true) builds once,
# so it skips incremental compilation's caches (several GB that only a rebuild would use).
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi
free_gb=$(df -Pk . | awk 'NR==2 {print int($4 / 1048576)}')
echo "free disk space here: ${free_gb} GB"
if [ "$free_gb" -lt 30 ]; then
  echo "warning: under 30 GB free; the builds below may run out of space (No space left on device)" >&2
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "a throwaway PostgreSQL cluster (scripts/pg.sh) for the Postgres store's tests"
pg_dir="$(mktemp -d /tmp/countersign-test-pg.XXXXXX)"
chmod 755 "$pg_dir" # the cluster runs as the postgres user when this runs as root
pg_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
COUNTERSIGN_TEST_POSTGRES="$(scripts/pg.sh start "$pg_dir/data" "$pg_port")"
# The Postgres tests fail (rather than skip) when the cluster is missing.
export COUNTERSIGN_TEST_POSTGRES COUNTERSIGN_REQUIRE_POSTGRES=1
echo "$COUNTERSIGN_TEST_POSTGRES"

# What `cargo leptos test` runs (the server's tests, then the browser code's unit tests on this
# machine), in one target directory: cargo-leptos would build the second half into target/front,
# compiling every dependency, proc macros included, a second time.
# Clippy for the server build is the compiler of this build (ADR 0051): clippy-driver stands in
# for rustc on this crate's targets (what `cargo clippy` does for a check), so the tests' own
# build lints every target `cargo clippy --all-targets` would (the library, the binary, the
# library's and the scenarios' tests, the example) with -D warnings, and the dependencies are
# compiled once rather than once to check and once to build. CLIPPY_ARGS is how cargo-clippy
# hands its arguments to clippy-driver.
step "Rust tests, server build (ssr), linted by clippy -D warnings as it compiles: unit, scenario and Postgres store tests"
clippy_driver="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver || true)"
if [ -z "$clippy_driver" ]; then
  echo "clippy-driver not found: this toolchain has no clippy (rustup component add clippy)" >&2
  exit 1
fi
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# That interface is cargo-clippy's own, not a documented one: first prove that it still denies
# a lint, so that a toolchain that changed it fails here instead of letting every lint pass.
probe_dir="$(mktemp -d /tmp/countersign-clippy-probe.XXXXXX)"
printf 'pub fn empty(v: &[u8]) -> bool {\n    v.len() == 0\n}\n' >"$probe_dir/probe.rs"
if "$clippy_driver" rustc --edition=2024 --crate-type=lib --emit=metadata \
  -o "$probe_dir/probe.rmeta" "$probe_dir/probe.rs" 2>/dev/null; then
  echo "clippy-driver did not deny clippy::len_zero with CLIPPY_ARGS=$CLIPPY_ARGS: the lints would not fail this run" >&2
  exit 1
fi
rm -rf "$probe_dir"
RUSTC_WORKSPACE_WRAPPER="$clippy_driver" cargo test --no-default-features --features ssr

# The browser build's code is linted the same way, in its unit tests' build on this machine: it
# has no code for wasm32 alone and none left out of test builds, so this lints the code `cargo
# clippy --lib --target wasm32-unknown-unknown` would, without checking every dependency a third
# time, for wasm32 (ADR 0052). The release build below compiles it for wasm32.
step "Rust tests, browser build (hydrate) run on this machine, linted by clippy -D warnings as it compiles: the page's unit tests"
# Both conditions are checked here, so that code for wasm32 alone, or for builds without tests
# alone, fails this run instead of going unlinted (src/server.rs and src/main.rs are the
# server's alone: never in the browser build).
one_target="$(grep -rlE 'target_(arch|family|os|env|pointer_width|vendor)|not\(test\)' src \
  | grep -vxE 'src/(server|main)\.rs' || true)"
if [ -n "$one_target" ]; then
  echo "code for one target, or for non-test builds, only in: $one_target; lint the browser build for wasm32 as well (cargo clippy --lib --no-default-features --features hydrate --target wasm32-unknown-unknown -- -D warnings)" >&2
  exit 1
fi
RUSTC_WORKSPACE_WRAPPER="$clippy_driver" cargo test --lib --no-default-features --features hydrate
unset CLIPPY_ARGS

step "fuzz corpus replayed on stable (protocol, WebSocket framing, Markdown vs pulldown-cmark)"
(cd fuzz && cargo test --no-default-features --locked)

# The conformance suite and the browser tests run the server the first step's build compiled
# (cargo builds a package's binaries for its scenario tests): the same code and features as a
# release build, unoptimised, with the test-only features the dev-dependencies add (tokio's
# test-util, rmcp's server half). CI no longer compiles the server a second time, optimised, for
# them: that compile was a third of a fresh run's minutes (ADR 0053). scripts/run.sh, bench/ and
# a deployment build the release server.
export COUNTERSIGN_BIN="$root/target/debug/countersign"

step "AI SDK conformance: ai@6.0.0 and ai@7 drive /api/chat (conformance/), against the server the tests built"
# It needs no site (the page's files): it runs while the cargo tools finish.
conformance/run.sh

step "waiting for the cargo tools (cargo-leptos, cargo-fuzz, wasm-bindgen-cli) built in the background"
if wait "$tools_pid"; then
  tools_pid=""
  # When each tool's build started (seconds into its background job).
  grep -E '^==> |^present' "$tools_log" || true
  rm -f "$tools_log"
else
  tools_pid=""
  echo "the cargo tools' set-up failed; its log:" >&2
  cat "$tools_log" >&2
  exit 1
fi

step "release build of the site (plain cargo-leptos, the wasm split and size-optimised) beside a minute of fuzzing the WebSocket framing (cargo-fuzz, ADR 0012)"
# --split: the wasm cut at its #[lazy] functions, each page loading only its own code (ADR 0030;
# tests/caching.spec.ts checks the chat page never fetches the other pages' parts). No
# --precompress: the server compresses each file once when first asked (the same test checks a
# build without compressed copies is still sent compressed). --frontend-only: the wasm, its JS,
# the CSS and the assets into target/site, and hash.txt (the hashed names) into target/release;
# the server is the one the tests built (above).
# The two run side by side: each has long stretches on one thread (the wasm's fat-LTO codegen
# into one unit and wasm-bindgen; the minute of fuzzing), so together they keep both cores busy.
front_log="$(mktemp /tmp/countersign-front.XXXXXX)"
setsid cargo leptos build --release --split --frontend-only >"$front_log" 2>&1 &
front_pid=$!
# The fuzz build gets both cores here (fuzz.sh builds on one by default, beside a developer's work).
CARGO_BUILD_JOBS="$(nproc)" scripts/fuzz.sh 60 ws_frame
echo "-- the site's build (cargo leptos build --release --split --frontend-only):"
if wait "$front_pid"; then
  front_pid=""
  cat "$front_log"
  rm -f "$front_log"
else
  front_pid=""
  cat "$front_log" >&2
  echo "the site's release build failed (above)" >&2
  exit 1
fi
# The server reads the hashed names of the site's files from hash.txt, beside its binary unless
# told where (cargo-leptos wrote it beside where a release server would be).
export LEPTOS_HASH_FILE_NAME="$root/target/release/hash.txt"

step "Playwright (Debian Chromium) against the server the tests built and the release site"
(cd end2end && npx playwright test)

end_step
echo
printf '%s\n' "${timings[@]}"
echo "all tests passed in $((SECONDS - started)) s"
