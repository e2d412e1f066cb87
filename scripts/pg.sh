#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and local trials, from Debian's `postgresql` package
# (scripts/setup.sh installs it). Nothing of the system's own clusters is touched.
#
#   scripts/pg.sh start [dir] [port]   initdb + start (trust auth, loopback only); prints the URL
#   scripts/pg.sh stop  [dir]          stop it (the directory stays; `start` reuses it)
#   scripts/pg.sh url   [dir] [port]   the URL again
#
# Defaults: dir /tmp/countersign-pg, port 55432. Postgres refuses to run as root: as root, the
# cluster belongs to (and runs as) the `postgres` user the package created.
set -euo pipefail
cmd="${1:-}"
dir="${2:-/tmp/countersign-pg}"
port="${3:-55432}"

bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)"
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "pg.sh: PostgreSQL is not installed (scripts/setup.sh installs Debian's postgresql)" >&2
  exit 1
fi

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

url() { echo "postgres://postgres@127.0.0.1:${port}/postgres"; }

case "$cmd" in
  start)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$dir"; fi
    chmod 700 "$dir"
    if [ ! -f "$dir/PG_VERSION" ]; then
      as_owner "$bin/initdb" -D "$dir" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
        >"$dir.initdb.log" 2>&1 || { cat "$dir.initdb.log" >&2; exit 1; }
    fi
    if as_owner "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
      url
      exit 0
    fi
    # Loopback TCP only; the socket in the data directory (no /var/run/postgresql needed).
    # fsync stays on: the store's durability is what the tests are about.
    as_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir -c max_connections=200" \
      start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    url
    ;;
  stop)
    if [ -f "$dir/PG_VERSION" ]; then
      as_owner "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
    fi
    ;;
  url)
    url
    ;;
  *)
    echo "usage: scripts/pg.sh start|stop|url [dir] [port]" >&2
    exit 2
    ;;
esac
