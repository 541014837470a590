#!/usr/bin/env bash
# cli/password_env: the client libraries' own password sources, which the README documents as a
# way to keep a password off the command line, are used when the URI has none: PGPASSWORD and
# libpq's password file (PGPASSFILE, ~/.pgpass) for the postgres+* schemes, MYSQL_PWD (MariaDB
# Connector/C under Connector/C++) for the mysql+* schemes; a password in the URI wins over them. Against the launcher's PostgreSQL and
# MariaDB (DLOCK_POSTGRES_URI, DLOCK_MYSQL_URI: the test FAILS when they are unset).
# Usage: cli_password_env_test.sh DLOCK
set -u
dlock=$1
failures=0
for v in DLOCK_POSTGRES_URI DLOCK_MYSQL_URI; do
  [[ -n ${!v:-} ]] || { echo "FAIL: $v is not set: eval \"\$(compose/native/dlock-servers up)\" first"; exit 1; }
done
name="cli-password-env-$$"
# No password file may stand in for the variable: ~/.pgpass is read by libpq when no password is given.
export PGPASSFILE=/nonexistent/pgpass
unset PGPASSWORD MYSQL_PWD DLOCK_URI

expect() {  # expect STATUS DESCRIPTION -- CMD...
  local want=$1 what=$2; shift 3
  local err; err=$("$@" 2>&1 </dev/null); local got=$?
  if [[ $got -ne $want ]]; then
    echo "FAIL: $what: exit $got, expected $want"; while IFS= read -r line; do echo "  $line"; done <<<"$err"; failures=$((failures + 1))
  else
    echo "ok: $what (exit $got)"
  fi
}

# split URI: sets user, password, rest (host:port/database) from scheme://user:password@rest
split() {
  [[ $1 =~ ^[a-z+]+://([^:@/]+):([^@/]*)@(.+)$ ]] || { echo "FAIL: '$1' is not scheme://user:password@host..."; exit 1; }
  user=${BASH_REMATCH[1]} password=${BASH_REMATCH[2]} rest=${BASH_REMATCH[3]}
}

# password_variable_used SCHEME VARIABLE: with $user, $password and $rest of the server's URI, no
# password anywhere is refused, VARIABLE stands in for the URI's password, and the URI's wins over it.
password_variable_used() {
  local scheme=$1 variable=$2 bare="$1://$user@$rest"
  expect 69 "$scheme: no password anywhere is refused by the server" -- "$dlock" run "$bare" "$name" --wait 5s -- true
  expect 0 "$scheme: $variable when the URI has none" -- env "$variable=$password" "$dlock" run "$bare" "$name" --wait 5s -- true
  expect 0 "$scheme: the URI's password wins over $variable" -- \
    env "$variable=wrong" "$dlock" run "$scheme://$user:$password@$rest" "$name" --wait 5s -- true
}

split "$DLOCK_POSTGRES_URI"
pgpass=$(mktemp)
trap 'rm -f "$pgpass"' EXIT
echo "*:*:*:$user:$password" >"$pgpass"
chmod 600 "$pgpass"  # libpq ignores a password file others can read
for scheme in postgres+advisory postgres+index; do
  password_variable_used "$scheme" PGPASSWORD
  expect 0 "$scheme: a password file (PGPASSFILE, ~/.pgpass) when the URI has none" -- \
    env PGPASSFILE="$pgpass" "$dlock" run "$scheme://$user@$rest" "$name" --wait 5s -- true
done

split "$DLOCK_MYSQL_URI"
for scheme in mysql+getlock mysql+index; do
  password_variable_used "$scheme" MYSQL_PWD
done

echo "$failures failure(s)"
exit $((failures > 0))
