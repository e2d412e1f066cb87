#!/usr/bin/env bash
# Sets up this machine if needed, builds the release site and runs Countersign on
# http://127.0.0.1:3000 (Leptos.toml's site-addr; LEPTOS_SITE_ADDR overrides it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
scripts/leptos build --release
exec target/release/countersign "$@"
