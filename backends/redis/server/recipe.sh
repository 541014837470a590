# shellcheck shell=bash disable=SC2016  # backquotes in the why texts are markdown, not commands
# Servers: redis (one server), redlock (independent masters, redlock.1..N; --redis-masters N, default 3 or
# DLOCK_REDIS_MASTERS). Ports 16379 and 16380... No persistence: a restarted Redis comes back empty. The
# passwordless default user plus ACL user dlock.
# Prints:
#   DLOCK_REDIS_URI        redis://127.0.0.1:16379                      (default user, no password)
#   DLOCK_REDIS_ACL_URI    redis://dlock:dlock-secret@127.0.0.1:16379   (ACL user dlock)
#   DLOCK_REDIS_HOST, DLOCK_REDIS_PORT
#   DLOCK_REDLOCK_URI      redlock://127.0.0.1:16380,127.0.0.1:16381,127.0.0.1:16382
#   DLOCK_REDLOCK_PORTS    16380,16381,16382                            (processes redlock.1, redlock.2, redlock.3)
# Sourced by compose/native/dlock-servers, whose header describes the recipe interface.

recipe_packages library 'the Redis client for `redis*://` and `redlock://`' libhiredis-dev
recipe_packages server 'the Redis server the `redis*://` and `redlock://` tests run against' redis-server
recipe_packages clients "interoperability tests against redis-py's \`Lock\` on the same names" python3-redis

recipe_option redis-masters REDIS_MASTERS "${DLOCK_REDIS_MASTERS:-3}" \
  "number of redlock masters (default 3, or DLOCK_REDIS_MASTERS)"
recipe_server redis redis --core 16379
recipe_server redlock redis --procs REDIS_MASTERS 16380

redis_check() { require_commands "$1" redis-server redis-cli; }
redis_launch() {  # nothing on disk: no persistence, so a restart comes back empty
  spawn "$1" redis-server --bind "$LOOPBACK" --port "$2" --dir "$DIR/$1" --save '' --appendonly no \
    --daemonize no --logfile '' --enable-debug-command local \
    --user "$DB_USER" on ">$DB_PASSWORD" '~*' '&*' '+@all'
}
redis_ready() { [[ $(timeout 3 redis-cli -h "$LOOPBACK" -p "$2" ping 2>/dev/null) == PONG ]]; }
redis_env() {  # SERVER HOSTS PORTS
  case $1 in
    redis)
      emit DLOCK_REDIS_URI "redis://$2"
      emit DLOCK_REDIS_ACL_URI "redis://$DB_USER:$DB_PASSWORD@$2"
      emit DLOCK_REDIS_HOST "$LOOPBACK"
      emit DLOCK_REDIS_PORT "$3"
      ;;
    redlock)
      emit DLOCK_REDLOCK_URI "redlock://$2"
      emit DLOCK_REDLOCK_PORTS "$3"
      ;;
  esac
}
