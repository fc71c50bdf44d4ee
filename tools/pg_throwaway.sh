#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback for the storage tests (.ci/run uses it; so can you):
#   dir=$(mktemp -d); url=$(tools/pg_throwaway.sh start "$dir")   # a DATABASE_URL, database planner_test
#   tools/pg_throwaway.sh stop "$dir"   # DIR is handed to the postgres user: a fresh one, not inside a private dir
# Installs Debian's `postgresql` if no server binaries are found. Runs the server as the `postgres` user
# when started as root (initdb refuses root). Trust authentication, listening on 127.0.0.1 only.
set -euo pipefail
action=${1:?start or stop}
dir=${2:?a directory for the cluster}
bindir() {
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$found" ]; then
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
    found=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  echo "$found"
}
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
BIN=$(bindir)
case "$action" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_owner "$BIN/initdb" -D "$dir/data" -U postgres -A trust --no-sync >/dev/null
    as_owner "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off" start >/dev/null
    as_owner "$BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres planner_test
    echo "postgresql+psycopg://postgres@127.0.0.1:$port/planner_test"
    ;;
  stop)
    as_owner "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
