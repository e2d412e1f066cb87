#!/usr/bin/env bash
# Installs whatever this machine lacks to build, run and test Countersign. Idempotent: every step
# checks first and skips what is already there (the cargo-leptos install alone takes ~13 minutes).
#
#   scripts/setup.sh                 # everything
#   scripts/setup.sh base            # the wasm32 target, a C compiler, pkg-config, OpenSSL's headers
#   scripts/setup.sh packages        # Debian and npm packages (downloaded, not compiled)
#   scripts/setup.sh cargo-tools     # cargo-leptos, cargo-fuzz, wasm-bindgen-cli (compiled)
#
# Parts run in the order given. scripts/test.sh runs `cargo-tools` in the background, after
# `base`, while it checks and tests the Rust code (docs/adr/0050-ci-overlap.md).
#
# Needs: the Rust toolchain (rustup), Node.js + npm, python3, and apt-get (as root) for Chromium
# and PostgreSQL (and for gcc/make where they are missing).
# Nothing here downloads a binary from outside the package registries: cargo-leptos finds
# wasm-bindgen and wasm-opt on PATH and so never tries to fetch them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$HOME/.cargo/bin:$root/end2end/node_modules/.bin:$PATH"

# Each step says when it started (seconds into the set-up): where a fresh machine's minutes go.
step() { printf '\n==> %s (at %d s)\n' "$*" "$SECONDS"; }
have() { command -v "$1" >/dev/null 2>&1; }

for tool in cargo rustup node npm python3; do
  if ! have "$tool"; then
    echo "setup: '$tool' is required but not installed" >&2
    exit 1
  fi
done

base() {
  step "Rust target wasm32-unknown-unknown"
  if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    echo "present"
  else
    rustup target add wasm32-unknown-unknown
  fi

  step "C compiler, make, pkg-config and OpenSSL's headers (the bundled SQLite and jemalloc are built from source; cargo-leptos links the system's OpenSSL)"
  if have cc && have make && have pkg-config && pkg-config --exists openssl; then
    echo "present"
  else
    sudo_cmd=()
    if [ "$(id -u)" != 0 ]; then sudo_cmd=(sudo); fi
    "${sudo_cmd[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y gcc make pkg-config libssl-dev
  fi
}

# What is downloaded rather than compiled (Debian packages, npm packages) is fetched in the
# background while cargo compiles the tools below: on a fresh 2-core machine the cargo installs
# take most of the set-up, and the downloads fit inside them. Each background job writes a log
# that is printed when it ends; a failed one fails the set-up.
logs=""
jobs_started=()
in_background() {
  local name="$1"
  shift
  [ -n "$logs" ] || logs="$(mktemp -d /tmp/countersign-setup.XXXXXX)"
  local log="$logs/${#jobs_started[@]}.log"
  "$@" >"$log" 2>&1 &
  jobs_started+=("$!|$log|$name")
  echo "started in the background: $name"
}

# Started in the background; `wait_for_background` waits for them.
packages() {
  step "Debian packages: Chromium (Playwright drives it, it never downloads its own), PostgreSQL (the Postgres store's tests start a throwaway cluster: scripts/pg.sh), espeak-ng and PocketSphinx en-us (the demo model speaks and listens offline: ADR 0036)"
  apt_missing=()
  if have chromium || [ -x /usr/bin/chromium ]; then
    echo "present: $(/usr/bin/chromium --version 2>/dev/null | head -n1 || echo chromium)"
  else
    apt_missing+=(chromium)
  fi
  if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    echo "present: $(ls -d /usr/lib/postgresql/*/bin | head -n1)"
  else
    # The server binaries only: no cluster is created or started at install time here (the
    # package's own cluster, if Debian makes one, is left alone; tests use their own).
    apt_missing+=(postgresql)
  fi
  if have espeak-ng && have pocketsphinx_continuous && [ -f /usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict ]; then
    echo "present: $(espeak-ng --version | head -n1)"
  else
    # Called as programs, never linked: a machine without them still builds, and the demo then
    # answers in text and says why.
    apt_missing+=(espeak-ng pocketsphinx pocketsphinx-en-us)
  fi
  apt_install() {
    local sudo_cmd=()
    if [ "$(id -u)" != 0 ]; then sudo_cmd=(sudo); fi
    "${sudo_cmd[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y "$@"
  }
  if [ ${#apt_missing[@]} -gt 0 ]; then
    in_background "apt-get install ${apt_missing[*]}" apt_install "${apt_missing[@]}"
  fi

  npm_packages() {
    if [ -x end2end/node_modules/.bin/playwright ] && [ -x end2end/node_modules/.bin/wasm-opt ] \
      && [ -x end2end/node_modules/.bin/esbuild ] && [ -d end2end/node_modules/ai ] \
      && [ end2end/node_modules/.package-lock.json -nt end2end/package-lock.json ]; then
      echo "end2end/: present"
    else
      (cd end2end && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
    fi
    if [ -d conformance/node_modules/ai6 ] && [ -d conformance/node_modules/ai7 ] \
      && [ conformance/node_modules/.package-lock.json -nt conformance/package-lock.json ]; then
      echo "conformance/: present"
    else
      (cd conformance && npm ci --no-audit --no-fund)
    fi
    if [ -f tests/mcp-servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js ] \
      && [ -f tests/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js ] \
      && [ tests/mcp-servers/node_modules/.package-lock.json -nt tests/mcp-servers/package-lock.json ]; then
      echo "tests/mcp-servers/: present"
    else
      (cd tests/mcp-servers && npm ci --no-audit --no-fund)
    fi
  }
  step "npm packages: end2end/ (Playwright, binaryen's wasm-opt 132 for release builds, ai + esbuild for the seed UI copy), conformance/ (the real AI SDK, ai@6.0.0 and ai@7), tests/mcp-servers/ (real MCP servers for the MCP scenario tests)"
  in_background "npm ci (end2end/, conformance/, tests/mcp-servers/)" npm_packages
}

cargo_tools() {
  step "cargo-leptos 0.3.10 (0.3.11 needs rustc 1.96)"
  if [ "$(cargo leptos --version 2>/dev/null || true)" = "cargo-leptos 0.3.10" ]; then
    echo "present"
  else
    # Built for a fresh machine's clock, not for speed: its own work (splitting, hashing and
    # minifying the site) is a few seconds of a release build, rustc and wasm-opt the rest.
    # - OPENSSL_NO_VENDOR: link the system's OpenSSL instead of compiling the vendored one (its
    #   build script alone was 263 s of the install);
    # - opt-level 0, no LTO, 16 codegen units instead of its opt-level 3 + fat LTO +
    #   1 codegen unit: 439 s to install here instead of 810 s at opt-level 1, and the
    #   release build's site steps 240 s instead of 231 s (docs/adr/0049-ci-time.md,
    #   docs/adr/0052-ci-lints-and-the-release-halves.md).
    OPENSSL_NO_VENDOR=1 CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_LTO=false \
      CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 cargo install cargo-leptos --locked --version 0.3.10
  fi

  step "cargo-fuzz 0.13.2 (scripts/test.sh fuzzes the WebSocket framing with it: scripts/fuzz.sh)"
  if [ "$(cargo fuzz --version 2>/dev/null || true)" = "cargo-fuzz 0.13.2" ]; then
    echo "present"
  else
    cargo install cargo-fuzz --locked --version 0.13.2
  fi

  step "wasm-bindgen CLI (must equal the wasm-bindgen version in Cargo.lock)"
  wb_version="$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
  if [ -z "$wb_version" ]; then
    echo "setup: no wasm-bindgen in Cargo.lock" >&2
    exit 1
  fi
  if [ "$(wasm-bindgen --version 2>/dev/null || true)" = "wasm-bindgen $wb_version" ]; then
    echo "present: $wb_version"
  else
    # No --locked: wasm-bindgen-cli's own lockfile names a webpki-roots the registry lacks.
    cargo install wasm-bindgen-cli --version "$wb_version" --force
  fi
}

wait_for_background() {
  step "waiting for the background jobs"
  failed=0
  for job in "${jobs_started[@]}"; do
    IFS='|' read -r pid log name <<<"$job"
    if wait "$pid"; then
      echo "-- $name: done (at $SECONDS s); its last lines:"
      tail -n 3 "$log"
    else
      echo "-- $name: FAILED; its log:" >&2
      cat "$log" >&2
      failed=1
    fi
  done
  if [ -n "$logs" ]; then rm -rf "$logs"; fi
  logs=""
  jobs_started=()
  if [ "$failed" != 0 ]; then
    echo "setup: a background job failed (above)" >&2
    exit 1
  fi
  echo
}

parts=("$@")
if [ ${#parts[@]} = 0 ]; then
  # Everything: the downloads go on in the background while cargo compiles the tools.
  base
  packages
  cargo_tools
  wait_for_background
else
  for part in "${parts[@]}"; do
    case "$part" in
      base) base ;;
      packages)
        packages
        wait_for_background
        ;;
      cargo-tools) cargo_tools ;;
      *)
        echo "setup: unknown part '$part' (base, packages, cargo-tools)" >&2
        exit 2
        ;;
    esac
  done
fi
echo
echo "setup: done${parts[*]:+ (${parts[*]})}"
