# shellcheck shell=bash
# Starts a throwaway PostgreSQL cluster for the test suite and exports OCS_TEST_POSTGRES_URL.
#
# Source it (do not execute it), then stop the cluster when done:
#
#   source .ci/postgres.sh            # installs PostgreSQL if missing (root), starts a cluster
#   trap stop_test_postgres EXIT      # or call stop_test_postgres yourself
#   npx vitest run test/warehouse.test.ts
#
# The cluster lives in a fresh temp dir, listens on 127.0.0.1 only, on a free port, with trust
# auth for the `postgres` role, and is gone after stop_test_postgres. Sourcing again while one is
# running reuses it. Settings that trade durability for speed (fsync=off, ...) are on because the
# data is thrown away; set OCS_TEST_POSTGRES_DURABLE=1 for stock settings (e.g. for benchmarks
# that should look like production).
#
# Written to be sourced by scripts running under `set -euo pipefail`: everything runs inside
# functions that return non-zero on failure instead of exiting, and no shell option is changed.

_ocs_pg_log() { printf 'postgres.sh: %s\n' "$*" >&2; }

# Runs a PostgreSQL binary as the cluster's owner: initdb and postgres refuse to run as root.
_ocs_pg_as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# Newest installed server's bin dir (Debian keeps them in /usr/lib/postgresql/<version>/bin).
_ocs_pg_bin_dir() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1) || true
  if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then
    printf '%s\n' "$dir"
    return 0
  fi
  # Other systems: take what is on PATH.
  if command -v initdb >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return 0
  fi
  return 1
}

_ocs_pg_install() {
  if _ocs_pg_bin_dir >/dev/null; then return 0; fi
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    _ocs_pg_log "PostgreSQL server binaries not found; install the 'postgresql' package (needs root and apt-get)."
    return 1
  fi
  _ocs_pg_log "installing PostgreSQL from Debian's packages..."
  # policy-rc.d exit 101 keeps the package from starting its own default cluster on port 5432.
  local policy=/usr/sbin/policy-rc.d added_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added_policy=1
  fi
  local status=0
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || status=$?
  if [ "$status" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql \
      >/dev/null || status=$?
  fi
  if [ "$added_policy" -eq 1 ]; then rm -f "$policy"; fi
  if [ "$status" -ne 0 ]; then
    _ocs_pg_log "apt-get could not install postgresql (exit $status)."
    return 1
  fi
  _ocs_pg_bin_dir >/dev/null || {
    _ocs_pg_log "postgresql installed but no server binaries found under /usr/lib/postgresql."
    return 1
  }
}

# A port nobody listens on now (the kernel picks it); postgres binds it a moment later, and a
# lost race only makes pg_ctl fail, which the caller retries with another port.
_ocs_pg_free_port() {
  node -e '
    const server = require("node:net").createServer();
    server.listen(0, "127.0.0.1", () => { console.log(server.address().port); server.close(); });
  ' 2>/dev/null || python3 -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
'
}

_ocs_pg_running() {
  [ -n "${OCS_TEST_POSTGRES_DIR:-}" ] && [ -d "${OCS_TEST_POSTGRES_DIR}/data" ] &&
    [ -n "${OCS_TEST_POSTGRES_BIN:-}" ] &&
    _ocs_pg_as_owner "$OCS_TEST_POSTGRES_BIN/pg_ctl" -D "$OCS_TEST_POSTGRES_DIR/data" status \
      >/dev/null 2>&1
}

start_test_postgres() {
  if _ocs_pg_running && [ -n "${OCS_TEST_POSTGRES_URL:-}" ]; then
    _ocs_pg_log "reusing the running cluster at $OCS_TEST_POSTGRES_URL"
    return 0
  fi
  _ocs_pg_install || return 1
  local bin dir
  bin=$(_ocs_pg_bin_dir) || return 1
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ocs-pg.XXXXXX") || return 1
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir" || return 1; fi
  chmod 700 "$dir" || true

  if ! _ocs_pg_as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 \
    --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1; then
    _ocs_pg_log "initdb failed:"
    tail -n 20 "$dir/initdb.log" >&2 || true
    rm -rf "$dir"
    return 1
  fi

  local settings="-c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir"
  if [ "${OCS_TEST_POSTGRES_DURABLE:-0}" != 1 ]; then
    settings="$settings -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  fi

  local attempt port="" started=0
  for attempt in 1 2 3 4 5; do
    port=$(_ocs_pg_free_port) || {
      _ocs_pg_log "could not find a free port (needs node or python3)."
      break
    }
    if _ocs_pg_as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "$settings -p $port" start >/dev/null 2>&1; then
      started=1
      break
    fi
    _ocs_pg_log "start on port $port failed (attempt $attempt); retrying on another port."
  done
  if [ "$started" -ne 1 ]; then
    _ocs_pg_log "could not start PostgreSQL; server log:"
    tail -n 20 "$dir/server.log" >&2 2>/dev/null || true
    _ocs_pg_as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    return 1
  fi

  # pg_ctl -w already waited; this bounded check proves TCP on 127.0.0.1 answers too.
  local ready=0 tries
  for tries in $(seq 1 60); do
    if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres -t 1; then
      ready=1
      break
    fi
    sleep 0.5 || true
  done
  if [ "$ready" -ne 1 ]; then
    _ocs_pg_log "PostgreSQL on 127.0.0.1:$port did not become ready; server log:"
    tail -n 20 "$dir/server.log" >&2 || true
    _ocs_pg_as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    return 1
  fi

  if ! "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres ocs_test; then
    _ocs_pg_log "createdb ocs_test failed."
    _ocs_pg_as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    return 1
  fi

  export OCS_TEST_POSTGRES_DIR="$dir"
  export OCS_TEST_POSTGRES_BIN="$bin"
  export OCS_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/ocs_test"
  _ocs_pg_log "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') ready: $OCS_TEST_POSTGRES_URL"
}

stop_test_postgres() {
  if [ -n "${OCS_TEST_POSTGRES_DIR:-}" ] && [ -d "$OCS_TEST_POSTGRES_DIR" ]; then
    if [ -n "${OCS_TEST_POSTGRES_BIN:-}" ] && [ -d "$OCS_TEST_POSTGRES_DIR/data" ]; then
      _ocs_pg_as_owner "$OCS_TEST_POSTGRES_BIN/pg_ctl" -D "$OCS_TEST_POSTGRES_DIR/data" -m fast \
        -w -t 30 stop >/dev/null 2>&1 ||
        _ocs_pg_as_owner "$OCS_TEST_POSTGRES_BIN/pg_ctl" -D "$OCS_TEST_POSTGRES_DIR/data" \
          -m immediate stop >/dev/null 2>&1 || true
    fi
    rm -rf "$OCS_TEST_POSTGRES_DIR" || true
  fi
  unset OCS_TEST_POSTGRES_DIR OCS_TEST_POSTGRES_BIN OCS_TEST_POSTGRES_URL
  return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  _ocs_pg_log "source this file (source .ci/postgres.sh) so OCS_TEST_POSTGRES_URL reaches your shell."
  exit 2
fi

start_test_postgres
