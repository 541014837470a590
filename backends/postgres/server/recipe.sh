# shellcheck shell=bash disable=SC2016  # backquotes in the why texts are markdown, not commands
# Server: postgres (PostgreSQL, port 15432): role dlock (password dlock-secret, scram-sha-256 over TCP, not a
# superuser) owning database dlock; the superuser postgres is trusted on the unix socket. Keeps its data
# across stop/start. Reads DLOCK_PG_BINDIR, the server's binaries (default: the newest /usr/lib/postgresql/*/bin).
# Prints:
#   DLOCK_POSTGRES_URI         postgres://dlock:dlock-secret@127.0.0.1:15432/dlock (the server as psql takes it;
#                              dlock: ${DLOCK_POSTGRES_URI/#postgres:/postgres+advisory:} etc.)
#   DLOCK_POSTGRES_HOST, DLOCK_POSTGRES_PORT
#   DLOCK_POSTGRES_SOCKET_DIR  unix socket dir where the superuser postgres is trusted (probes)
# Sourced by compose/native/dlock-servers, whose header describes the recipe interface.

recipe_packages library 'the PostgreSQL client (libpq) for `postgres+*://`' libpq-dev
recipe_packages server 'the PostgreSQL server (and `psql`, `pg_isready`) the `postgres+*://` tests run against' postgresql

# SIGINT is a fast shutdown; SIGTERM would wait for every client to leave.
recipe_server postgres postgres --core --stop-signal INT 15432

pg_bindir() {
  if [[ -n ${DLOCK_PG_BINDIR:-} ]]; then echo "$DLOCK_PG_BINDIR"; return 0; fi
  local dirs=(/usr/lib/postgresql/*/bin)
  [[ -x ${dirs[0]}/postgres ]] || return 0
  printf '%s\n' "${dirs[@]}" | sort -V | tail -n 1
}
postgres_check() { require_commands "$1" "$(pg_bindir)/postgres" "$(pg_bindir)/initdb" psql pg_isready; }
postgres_init() {  # initdb refuses root: run it as postgres
  local proc=$1 port=$2 d=$DIR/$1
  as_user postgres
  if is_root; then chown postgres: "$d"; fi
  if ! (cd "$d" && "${AS[@]}" "$(pg_bindir)/initdb" -D "$d/data" -U postgres --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C --no-sync --no-instructions) >"$d/init.log" 2>&1; then
    show_log "$proc" "$d/init.log" "initdb failed"
    return 1
  fi
  cat >>"$d/data/postgresql.conf" <<CONF
# dlock-servers: a throw-away test server
listen_addresses = '$LOOPBACK'
port = $port
unix_socket_directories = '$d'
max_connections = 300
shared_buffers = 32MB
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
}
postgres_launch() {
  # A postmaster killed with SIGKILL leaves its lock files. Whether it still runs is ours to judge: until its
  # parent reaps it, the dead postmaster is a zombie, which postgres would take for a live one, and refuse.
  rm -f -- "$DIR/$1/data/postmaster.pid" "$DIR/$1"/.s.PGSQL.*.lock
  as_user postgres
  spawn "$1" "${AS[@]}" "$(pg_bindir)/postgres" -D "$DIR/$1/data"
}
postgres_ready() { pg_isready -q -h "$LOOPBACK" -p "$2" -t 2; }
postgres_setup() {  # once: the dlock role (password over TCP, scram-sha-256) and its database
  local d=$DIR/$1
  [[ ! -f $d/.setup-done ]] || return 0
  if ! psql -X -q -v ON_ERROR_STOP=1 -h "$d" -p "$2" -U postgres -d postgres \
    -c "CREATE ROLE $DB_USER LOGIN PASSWORD '$DB_PASSWORD'" -c "CREATE DATABASE $DB_NAME OWNER $DB_USER" \
    >>"$d/init.log" 2>&1; then
    show_log "$1" "$d/init.log" "could not create the $DB_USER role and database"
    return 1
  fi
  touch "$d/.setup-done"
}
postgres_env() {  # SERVER HOSTS PORTS
  emit DLOCK_POSTGRES_URI "postgres://$DB_USER:$DB_PASSWORD@$2/$DB_NAME"
  emit DLOCK_POSTGRES_HOST "$LOOPBACK"
  emit DLOCK_POSTGRES_PORT "$3"
  emit DLOCK_POSTGRES_SOCKET_DIR "$DIR/$1"
}
