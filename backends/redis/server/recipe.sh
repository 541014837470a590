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
# redis-sentinel: a Sentinel set of six processes. redis-sentinel.1 (16390, master at first), .2 and .3 (16391,
# 16392, its replicas), .4 to .6 (16393..16395, sentinels with quorum 2 monitoring the master set `mymaster`;
# down-after-milliseconds 1000, failover-timeout 3000). Config files in the state dir, rewritten by the sentinels on
# a failover, so a data node started again keeps the role they gave it (an old master started again comes back
# as a master until the sentinels convert it, or a test sends it REPLICAOF).
#   DLOCK_REDIS_SENTINEL_URI         redis+sentinel://127.0.0.1:16393,127.0.0.1:16394,127.0.0.1:16395/mymaster
#   DLOCK_REDIS_SENTINEL_PORTS       16393,16394,16395   (the sentinels: redis-sentinel.4, .5, .6)
#   DLOCK_REDIS_SENTINEL_DATA_PORTS  16390,16391,16392   (the data nodes: redis-sentinel.1, .2, .3)
#   DLOCK_REDIS_SENTINEL_MASTER      mymaster
# redis-cluster: a Redis Cluster of three masters and three replicas (redis-cluster.1..6, 16400..16405, bus ports
# 26400..26405, allocated like the client ports so that two launchers never meet), cluster-node-timeout 1000; created once by redis-cli --cluster create. nodes.conf keeps the membership
# across stop/start; the data itself is not persisted.
#   DLOCK_REDIS_CLUSTER_URI          redis+cluster://127.0.0.1:16400,...,127.0.0.1:16405
#   DLOCK_REDIS_CLUSTER_PORTS        16400,...,16405
# Sourced by compose/native/dlock-servers, whose header describes the recipe interface.

recipe_packages library 'the Redis client for `redis*://` and `redlock://`' libhiredis-dev
recipe_packages server 'the Redis server the `redis*://` and `redlock://` tests run against' redis-server
recipe_packages server 'the Redis Sentinel of the `redis+sentinel://` tests (the package starts a system service; ours
  run on their own ports)' redis-sentinel
recipe_packages clients "interoperability tests against redis-py's \`Lock\` on the same names" python3-redis

recipe_option redis-masters REDIS_MASTERS "${DLOCK_REDIS_MASTERS:-3}" \
  "number of redlock masters (default 3, or DLOCK_REDIS_MASTERS)"
recipe_server redis redis --core 16379
recipe_server redlock redis --procs REDIS_MASTERS 16380
recipe_server redis-sentinel redis_sentinel --procs 6 16390
recipe_server redis-cluster redis_cluster --procs 6 16400 26400   # client and cluster bus ports

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

# The Sentinel set: processes 1..3 are data nodes (1 the first master), 4..6 sentinels.
REDIS_SENTINEL_MASTER=mymaster
redis_sentinel_check() { require_commands "$1" redis-server redis-cli redis-sentinel; }
redis_sentinel_is_sentinel() { ((${1##*.} > 3)); }
redis_sentinel_port_of() { local p; read -r p _ <"$DIR/$1/ports"; printf '%s' "$p"; }
redis_sentinel_init() {  # PROCESS PORT: its config file (the sentinels rewrite theirs, and the data nodes' on failover)
  local proc=$1 port=$2 d=$DIR/$1 master
  master=$(redis_sentinel_port_of "${proc%.*}.1")
  if redis_sentinel_is_sentinel "$proc"; then
    {
      echo "port $port"
      echo "bind $LOOPBACK"
      echo "dir $d"
      echo "sentinel resolve-hostnames no"
      echo "sentinel monitor $REDIS_SENTINEL_MASTER $LOOPBACK $master 2"
      echo "sentinel down-after-milliseconds $REDIS_SENTINEL_MASTER 1000"
      echo "sentinel failover-timeout $REDIS_SENTINEL_MASTER 3000"
      echo "sentinel parallel-syncs $REDIS_SENTINEL_MASTER 2"
    } >"$d/sentinel.conf"
  else
    {
      echo "port $port"
      echo "bind $LOOPBACK"
      echo "dir $d"
      echo "save \"\""
      echo "appendonly no"
      echo "enable-debug-command local"
      echo "user $DB_USER on >$DB_PASSWORD ~* &* +@all"
      if [[ $proc != *.1 ]]; then echo "replicaof $LOOPBACK $master"; fi
    } >"$d/redis.conf"
  fi
}
redis_sentinel_launch() {
  if redis_sentinel_is_sentinel "$1"; then
    spawn "$1" redis-sentinel "$DIR/$1/sentinel.conf" --daemonize no --logfile ''
  else
    spawn "$1" redis-server "$DIR/$1/redis.conf" --daemonize no --logfile ''
  fi
}
redis_sentinel_ready() { redis_ready "$@"; }
redis_sentinel_setup() {  # once every process answers: until the sentinels see the master, two replicas, each other
  local first=$1 proc port deadline=$((SECONDS + 30)) ok
  while ((SECONDS < deadline)); do
    ok=true
    for proc in $(procs_of "${first%.*}"); do
      redis_sentinel_is_sentinel "$proc" || continue
      port=$(redis_sentinel_port_of "$proc")
      [[ $(timeout 3 redis-cli -h "$LOOPBACK" -p "$port" sentinel master "$REDIS_SENTINEL_MASTER" 2>/dev/null |
        awk 'prev == "num-slaves" || prev == "num-other-sentinels" {printf "%s ", $0} {prev = $0}') == "2 2 " ]] ||
        ok=false
    done
    if $ok; then return 0; fi
    sleep 0.2
  done
  say "redis-sentinel: the sentinels did not all see the master, 2 replicas and 2 other sentinels within 30s"
  return 1
}
redis_sentinel_env() {  # SERVER HOSTS PORTS
  local sentinels="" sentinel_ports="" data_ports="" port i=0
  for port in ${3//,/ }; do
    i=$((i + 1))
    if ((i > 3)); then
      sentinels+=${sentinels:+,}$LOOPBACK:$port
      sentinel_ports+=${sentinel_ports:+,}$port
    else
      data_ports+=${data_ports:+,}$port
    fi
  done
  emit DLOCK_REDIS_SENTINEL_URI "redis+sentinel://$sentinels/$REDIS_SENTINEL_MASTER"
  emit DLOCK_REDIS_SENTINEL_PORTS "$sentinel_ports"
  emit DLOCK_REDIS_SENTINEL_DATA_PORTS "$data_ports"
  emit DLOCK_REDIS_SENTINEL_MASTER "$REDIS_SENTINEL_MASTER"
}

# The cluster: six nodes, made one cluster (three masters, a replica each) by the first setup.
redis_cluster_check() { require_commands "$1" redis-server redis-cli; }
# --repl-diskless-sync-delay 0: a restarted node is a working replica at once, not 5 s later (the
# default waits for more replicas to share the transfer; the fault tests restart one at a time).
redis_cluster_launch() {  # nodes.conf keeps the membership (and its epoch) across stop/start
  local bus
  read -r _ bus <"$DIR/$1/ports"
  spawn "$1" redis-server --bind "$LOOPBACK" --port "$2" --dir "$DIR/$1" --save '' --appendonly no \
    --daemonize no --logfile '' --enable-debug-command local \
    --cluster-enabled yes --cluster-port "$bus" --cluster-config-file nodes.conf --cluster-node-timeout 1000 \
    --repl-diskless-sync-delay 0 \
    --user "$DB_USER" on ">$DB_PASSWORD" '~*' '&*' '+@all'
}
redis_cluster_ready() { redis_ready "$@"; }
redis_cluster_setup() {
  local first=$1 d=$DIR/$1 nodes=() proc deadline=$((SECONDS + 30))
  if [[ ! -f $d/.cluster-created ]]; then
    for proc in $(procs_of "${first%.*}"); do nodes+=("$LOOPBACK:$(redis_sentinel_port_of "$proc")"); done
    if ! redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$d/create.log" 2>&1; then
      show_log "$first" "$d/create.log" "could not create the cluster"
      return 1
    fi
    touch "$d/.cluster-created"
  fi
  until [[ $(timeout 3 redis-cli -h "$LOOPBACK" -p "$2" cluster info 2>/dev/null) == *cluster_state:ok* ]]; do
    if ((SECONDS >= deadline)); then say "redis-cluster: cluster_state is not ok after 30s"; return 1; fi
    sleep 0.2
  done
}
redis_cluster_env() {  # SERVER HOSTS PORTS
  emit DLOCK_REDIS_CLUSTER_URI "redis+cluster://$2"
  emit DLOCK_REDIS_CLUSTER_PORTS "$3"
}
