#!/usr/bin/env bash
# Sets up this machine if needed, builds the release site and runs Countersign in the
# repository, where it reads Leptos.toml: on http://127.0.0.1:3000 (its site-addr; edit it, or
# set LEPTOS_SITE_ADDR, which wins), serving target/site. --split cuts the wasm so that each
# page loads only its own code (ADR 0030); --precompress writes the brotli and gzip copies the
# server sends (without them it compresses each file once, when first asked).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
export PATH="$HOME/.cargo/bin:$root/end2end/node_modules/.bin:$PATH"
cargo leptos build --release --split --precompress
exec target/release/countersign "$@"
