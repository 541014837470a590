#!/usr/bin/env bash
# cli/sweep_sql: `dlock sweep URI` against the real PostgreSQL and MariaDB of the native launcher
# (DLOCK_POSTGRES_URI, DLOCK_MYSQL_URI: the test FAILS when they are unset). Rows are written
# with the servers' own clients (psql, mariadb), as another tool would: the expired ones are
# deleted and counted exactly, the live ones stay. Usage: cli_sweep_sql_test.sh DLOCK
set -u
dlock=$1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
for v in DLOCK_POSTGRES_URI DLOCK_MYSQL_URI; do
  [[ -n ${!v:-} ]] || { echo "FAIL: $v is not set: eval \"\$(compose/native/dlock-servers up)\" first"; exit 1; }
done
for tool in psql mariadb; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool (the server's client) is not installed"; exit 1; }
done
suffix=$(od -An -N5 -tx1 /dev/urandom | tr -d ' \n')
table="cli_sweep_$suffix"

# sweep URI EXPECTED_OUTPUT
check_sweep() {
  local out; out=$("$dlock" sweep "$1" 2>&1); local st=$?
  if [[ $st -ne 0 || $out != "$2" ]]; then fail "dlock sweep $3: exit $st, printed '$out', expected '$2'"
  else echo "ok: $3: $out"; fi
}

# ---- PostgreSQL (postgres+index): the table is created by the first open, i.e. the first sweep.
pg=${DLOCK_POSTGRES_URI/#postgres:/postgres+index:}
check_sweep "$pg?table=$table" "swept 0 expired rows from \"$table\"" "postgres: new table"
psql -q -v ON_ERROR_STOP=1 "$DLOCK_POSTGRES_URI" -c "INSERT INTO $table (name, owner, hold_count, expires_at, fence) VALUES
  ('\\x01', 'tool', 1, clock_timestamp() - interval '1 second', 1),
  ('\\x02', 'tool', 2, clock_timestamp() - interval '1 hour', 2),
  ('\\x03', 'tool', 1, clock_timestamp() + interval '1 hour', 3)" || fail "psql insert"
check_sweep "$pg?table=$table" "swept 2 expired rows from \"$table\"" "postgres: 2 expired of 3"
left=$(psql -qAt "$DLOCK_POSTGRES_URI" -c "SELECT count(*) FROM $table WHERE name = '\\x03'")
[[ $left == 1 ]] || fail "postgres: the live row is gone ($left)"
check_sweep "$pg?table=$table" "swept 0 expired rows from \"$table\"" "postgres: nothing left to sweep"
psql -q "$DLOCK_POSTGRES_URI" -c "DROP TABLE $table" >/dev/null

# ---- MariaDB (mysql+index)
if [[ $DLOCK_MYSQL_URI =~ ^mysql://([^:@/]+):([^@/]*)@([^:/]+):([0-9]+)/([A-Za-z0-9_]+) ]]; then
  my=(mariadb -N -B -u"${BASH_REMATCH[1]}" -p"${BASH_REMATCH[2]}" -h"${BASH_REMATCH[3]}" -P"${BASH_REMATCH[4]}" "${BASH_REMATCH[5]}")
else
  echo "FAIL: DLOCK_MYSQL_URI is not mysql://user:password@host:port/database"; exit 1
fi
mi=${DLOCK_MYSQL_URI/#mysql:/mysql+index:}
check_sweep "$mi?table=$table" "swept 0 expired rows from \"$table\"" "mariadb: new table"
"${my[@]}" -e "INSERT INTO $table (name, owner, hold_count, fence, expires_at) VALUES
  ('a', 'tool', 1, 1, NOW(6) - INTERVAL 1 SECOND), ('b', 'tool', 1, 2, NOW(6) - INTERVAL 1 SECOND),
  ('c', 'tool', 3, 3, '2000-01-01'), ('d', 'tool', 1, 4, NOW(6) + INTERVAL 1 HOUR)" || fail "mariadb insert"
check_sweep "$mi?table=$table" "swept 3 expired rows from \"$table\"" "mariadb: 3 expired of 4"
left=$("${my[@]}" -e "SELECT COUNT(*) FROM $table WHERE name = 'd'")
[[ $left == 1 ]] || fail "mariadb: the live row is gone ($left)"
"${my[@]}" -e "DROP TABLE $table; DROP SEQUENCE ${table}_fence"

# A scheme whose locks live only as long as a connection: nothing to sweep.
out=$("$dlock" sweep "${DLOCK_MYSQL_URI/#mysql:/mysql+getlock:}" 2>&1); st=$?
[[ $st -eq 0 && $out == "nothing to sweep: "* ]] || fail "mysql+getlock: exit $st, printed '$out'"
[[ $out != *dlock-secret* ]] || fail "the password was printed: $out"

echo "$failures failure(s)"
exit $((failures > 0))
