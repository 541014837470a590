# shellcheck shell=bash disable=SC2016  # backquotes in the why texts are markdown, not commands
# Server: mariadb (MariaDB, port 13306): database dlock, user dlock (password dlock-secret, all privileges on
# dlock.*), and root without a password on the unix socket. Keeps its data across stop/start.
# Prints:
#   DLOCK_MYSQL_URI     mysql://dlock:dlock-secret@127.0.0.1:13306/dlock   (the server, not a lock URI: dlock
#                       takes it with a strategy scheme, ${DLOCK_MYSQL_URI/#mysql:/mysql+getlock:})
#   DLOCK_MYSQL_HOST, DLOCK_MYSQL_PORT
#   DLOCK_MYSQL_SOCKET  unix socket where MariaDB's root logs in without a password (probes)
# Sourced by compose/native/dlock-servers, whose header describes the recipe interface.

recipe_packages library 'MySQL Connector/C++ (legacy API) for `mysql+*://` against MariaDB (brings Boost 1.74 headers)' \
  libmysqlcppconn-dev
recipe_packages server 'the MariaDB server (and its `mariadb` client, for readiness) the `mysql+*://` tests run against' \
  mariadb-server

recipe_server mariadb mariadb --core 13306

mariadb_check() { require_commands "$1" mariadbd mariadb-install-db mariadb; }
mariadb_init() {  # datadir from mariadb-install-db, which also creates the dlock database and user
  local proc=$1 port=$2 d=$DIR/$1 user=() run_as=""
  if is_root; then   # mariadbd refuses root unless told which user to be
    user=(--user=mysql)
    run_as="user = mysql"
  fi
  mkdir -p "$d/data" "$d/tmp"
  cat >"$d/my.cnf" <<CNF
[client]
socket = $d/mysqld.sock
[mysqld]
$run_as
datadir = $d/data
tmpdir = $d/tmp
socket = $d/mysqld.sock
pid-file = $d/mysqld.pid
port = $port
bind-address = $LOOPBACK
skip-name-resolve
performance-schema = OFF
max-connections = 300
innodb-buffer-pool-size = 64M
innodb-log-file-size = 16M
innodb-flush-log-at-trx-commit = 2
CNF
  # mariadb-install-db runs with --skip-grant-tables; FLUSH PRIVILEGES loads them so CREATE USER works.
  cat >"$d/init.sql" <<SQL
FLUSH PRIVILEGES;
CREATE DATABASE $DB_NAME;
CREATE USER '$DB_USER'@'%' IDENTIFIED BY '$DB_PASSWORD';
CREATE USER '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASSWORD';
GRANT ALL PRIVILEGES ON $DB_NAME.* TO '$DB_USER'@'%';
GRANT ALL PRIVILEGES ON $DB_NAME.* TO '$DB_USER'@'localhost';
SQL
  if is_root; then chown -R mysql:mysql "$d"; fi
  if ! mariadb-install-db --defaults-file="$d/my.cnf" "${user[@]}" --auth-root-authentication-method=normal \
    --skip-test-db --extra-file="$d/init.sql" >"$d/init.log" 2>&1; then
    show_log "$proc" "$d/init.log" "mariadb-install-db failed"
    return 1
  fi
}
mariadb_launch() { spawn "$1" mariadbd --defaults-file="$DIR/$1/my.cnf"; }
mariadb_ready() {  # the dlock user logs in over TCP
  timeout 5 mariadb --no-defaults --protocol=tcp -h "$LOOPBACK" -P "$2" -u "$DB_USER" -p"$DB_PASSWORD" \
    --connect-timeout=2 -e 'SELECT 1' "$DB_NAME" >/dev/null 2>&1
}
mariadb_env() {  # SERVER HOSTS PORTS
  emit DLOCK_MYSQL_URI "mysql://$DB_USER:$DB_PASSWORD@$2/$DB_NAME"
  emit DLOCK_MYSQL_HOST "$LOOPBACK"
  emit DLOCK_MYSQL_PORT "$3"
  emit DLOCK_MYSQL_SOCKET "$DIR/$1/mysqld.sock"
}
