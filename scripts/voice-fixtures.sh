#!/usr/bin/env bash
# Regenerates the committed voice clips in tests/fixtures/voice/ (see its README.md): each phrase
# spoken by espeak-ng with the demo model's own voice (src/models/demo/voice) and resampled with
# its own resampler. Deterministic: the same espeak-ng (Debian 1.51) writes the same bytes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
for tool in espeak-ng cargo; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "voice-fixtures: '$tool' is required (scripts/setup.sh installs espeak-ng)" >&2
    exit 1
  fi
done
cargo run --quiet --example voice_fixtures --no-default-features --features ssr -- tests/fixtures/voice
