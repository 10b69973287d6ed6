#!/usr/bin/env bash
# A throwaway PostgreSQL server on 127.0.0.1 for the migration example and its tests:
# its own data folder under /tmp, a free port, a login role with a random password.
#
#   pg_sandbox.sh start   prints the sandbox folder; DIR/env holds PGHOST, PGPORT,
#                         PGUSER, PGPASSWORD, PGDATABASE (mode 600: source it, don't print it)
#   pg_sandbox.sh stop DIR
#
# PG_SANDBOX_FSYNC=on starts it with fsync on, as a real server runs (the default, off,
# is for tests: nothing there needs to survive a crash of the machine).
#
# Exit 3 with the reason on stderr when PostgreSQL cannot be had here (server binaries
# missing: apt-get install postgresql). As root the server runs as user postgres.
set -euo pipefail

unavailable() { echo "PostgreSQL unavailable: $*" >&2; exit 3; }

pg_bin() {
  local initdb
  initdb=$(command -v initdb 2>/dev/null) || initdb=$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -1) || true
  [ -n "$initdb" ] && [ -x "$initdb" ] || unavailable "no initdb on PATH or in /usr/lib/postgresql/*/bin (apt-get install postgresql)"
  dirname -- "$(readlink -f -- "$initdb")"
}

as_owner() {  # run a server command as the data folder's owner
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  local bin dir port password
  bin=$(pg_bin)
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    unavailable "running as root and there is no user 'postgres' to run the server"
  fi
  dir=$(mktemp -d /tmp/dataflow-pg.XXXXXX)
  chmod 755 "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    >"$dir/initdb.log" 2>&1 || unavailable "initdb failed: $(tail -1 "$dir/initdb.log")"
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=${PG_SANDBOX_FSYNC:-off}" start >/dev/null \
    || unavailable "the server did not start: $(tail -1 "$dir/server.log")"
  "$bin/psql" -qX -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
    -v password="$password" >/dev/null <<'SQL'
CREATE ROLE etl LOGIN PASSWORD :'password';
CREATE DATABASE source OWNER etl;
SQL
  umask 077
  printf 'PGHOST=127.0.0.1\nPGPORT=%s\nPGUSER=etl\nPGPASSWORD=%s\nPGDATABASE=source\nPGBIN=%s\n' \
    "$port" "$password" "$bin" >"$dir/env"
  echo "$dir"
}

stop() {
  local dir=$1
  [ -d "$dir/data" ] || { echo "no sandbox at $dir" >&2; exit 1; }
  as_owner "$(pg_bin)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf -- "$dir"
}

case ${1:-} in
  start) start ;;
  stop) stop "${2:?usage: pg_sandbox.sh stop DIR}" ;;
  *) echo "usage: pg_sandbox.sh start | stop DIR" >&2; exit 2 ;;
esac
