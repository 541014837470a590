# shellcheck shell=bash disable=SC2016  # backquotes in the why texts are markdown, not commands
# Servers: etcd (a single member, client port 12379, peer port 12380), etcd-cluster (three members, etcd-cluster.1..3
# on client ports 12391..12393, peer ports 12396..12398). Keeps its data across stop/start. A cluster member with no
# quorum running beside it only has to answer /version, not /health, to count as ready.
# Prints:
#   DLOCK_ETCD_URI             etcd://127.0.0.1:12379
#   DLOCK_ETCD_HOST, DLOCK_ETCD_PORT
#   DLOCK_ETCD_CLUSTER_URI     etcd://127.0.0.1:12391,127.0.0.1:12392,127.0.0.1:12393
#   DLOCK_ETCD_CLUSTER_PORTS   12391,12392,12393   (processes etcd-cluster.1, .2, .3)
# Sourced by compose/native/dlock-servers, whose header describes the recipe interface.

recipe_packages library 'HTTP/1.1 for `etcd://`: the requests and watch streams of the v3 JSON gateway' libcurl4-openssl-dev
recipe_packages library 'JSON for `etcd://`: the bodies of the v3 JSON gateway (header-only)' nlohmann-json3-dev
recipe_packages server 'the etcd server (3.4) the `etcd://` tests run against' etcd-server
recipe_packages clients 'interoperability tests against `etcdctl lock` on the same names' etcd-client

recipe_server etcd etcd 12379 12380                  # client and peer ports
recipe_server etcd-cluster etcd --procs 3 12391 12396  # client and peer ports of members 1..3

etcd_check() { require_commands "$1" etcd; }
etcd_init() {  # PROCESS: its data dir (etcd writes it on first start)
  mkdir -p "$DIR/$1/data"
  chmod 700 "$DIR/$1/data"
}
etcd_peers() {  # PROCESS -> the --initial-cluster list: itself, or every member of its cluster
  local proc=$1 member peer list=""
  if [[ $proc == *.* ]]; then
    for member in $(procs_of "${proc%.*}"); do
      read -r _ peer <"$DIR/$member/ports"
      list+=${list:+,}$member=http://$LOOPBACK:$peer
    done
  else
    read -r _ peer <"$DIR/$proc/ports"
    list=$proc=http://$LOOPBACK:$peer
  fi
  echo "$list"
}
# Short heartbeats and elections: a lost leader is replaced within a second in the fault tests.
etcd_launch() {
  local proc=$1 client peer
  read -r client peer <"$DIR/$proc/ports"
  spawn "$proc" etcd --name "$proc" --data-dir "$DIR/$proc/data" \
    --listen-client-urls "http://$LOOPBACK:$client" --advertise-client-urls "http://$LOOPBACK:$client" \
    --listen-peer-urls "http://$LOOPBACK:$peer" --initial-advertise-peer-urls "http://$LOOPBACK:$peer" \
    --initial-cluster "$(etcd_peers "$proc")" --initial-cluster-state new --initial-cluster-token "dlock-${proc%.*}" \
    --heartbeat-interval 100 --election-timeout 1000 --logger zap --log-outputs stderr
}
etcd_http_get() {  # PORT PATH -> the body of etcd's answer
  # shellcheck disable=SC2016  # expanded by the inner bash
  timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" &&
    printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$2" "$0" >&3 && cat <&3' "$LOOPBACK" "$1" "$2" 2>/dev/null
}
etcd_ready() {  # serving: /health says true (a leader and a quorum)
  local proc=$1 port=$2 members
  [[ $(etcd_http_get "$port" /health || true) != *'"health":"true"'* ]] || return 0
  # A cluster member with no quorum running beside it cannot serve; then being up is all we can wait for.
  [[ $proc == *.* ]] || return 1
  members=$(procs_of "${proc%.*}" | wc -l)
  (($(running_count "${proc%.*}") <= members / 2)) && [[ $(etcd_http_get "$port" /version || true) == *etcdserver* ]]
}
etcd_env() {  # SERVER HOSTS PORTS
  case $1 in
    etcd)
      emit DLOCK_ETCD_URI "etcd://$2"
      emit DLOCK_ETCD_HOST "$LOOPBACK"
      emit DLOCK_ETCD_PORT "$3"
      ;;
    etcd-cluster)
      emit DLOCK_ETCD_CLUSTER_URI "etcd://$2"
      emit DLOCK_ETCD_CLUSTER_PORTS "$3"
      ;;
  esac
}
