#!/usr/bin/env python3
"""Print `export LEPTOS_...=...` lines for every key of Leptos.toml.

cargo-leptos 0.3.10 takes its site settings only from Cargo.toml metadata, `.env` and LEPTOS_*
environment variables; Leptos.toml is our one place for them (docs/adr/0001-leptos-toml.md), so
the build scripts eval this output before calling cargo-leptos. A variable already set in the
environment wins, exactly as it does for the server at start-up.
"""
import os
import shlex
import sys
import tomllib


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "Leptos.toml"
    try:
        with open(path, "rb") as f:
            settings = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        print(f"leptos_env: cannot read {path}: {e}", file=sys.stderr)
        return 1
    for key, value in settings.items():
        if isinstance(value, dict):
            print(f"leptos_env: {path}: [{key}] tables are not supported", file=sys.stderr)
            return 1
        name = "LEPTOS_" + key.upper().replace("-", "_")
        if name in os.environ:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        print(f"export {name}={shlex.quote(str(value))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
