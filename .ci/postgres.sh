# Sourced by .ci/run: installs (if missing) and starts a throwaway PostgreSQL cluster on loopback,
# then exports CONTEXTWINDOW_TEST_POSTGRES_URL for the tests.
start_postgres() {
  local bindir
  bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    echo "ci: installing PostgreSQL (Debian package)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq postgresql >/dev/null
    bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  local data port=55432
  data=$(mktemp -d /tmp/cw-pg.XXXXXX)
  chown postgres:postgres "$data" 2>/dev/null || true
  local run=(env)
  if [ "$(id -u)" = "0" ]; then run=(runuser -u postgres --); fi
  "${run[@]}" "$bindir/initdb" -D "$data" -A trust -U postgres >/dev/null
  "${run[@]}" "$bindir/pg_ctl" -D "$data" -o "-p $port -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off" -l "$data/log" -w start >/dev/null
  "${run[@]}" "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres contextwindow_test
  export CONTEXTWINDOW_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:$port/contextwindow_test"
  trap "${run[*]} $bindir/pg_ctl -D $data -m immediate stop >/dev/null 2>&1; rm -rf $data" EXIT
}
