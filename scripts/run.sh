#!/usr/bin/env bash
# Sets up this machine if needed, builds the release site and runs Countersign on
# http://127.0.0.1:3000 (Cargo.toml's [package.metadata.leptos] site-addr; LEPTOS_SITE_ADDR
# overrides it). --precompress writes the brotli and gzip variants the server sends.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
export PATH="$HOME/.cargo/bin:$root/end2end/node_modules/.bin:$PATH"
cargo leptos build --release --precompress
exec target/release/countersign "$@"
