# shellcheck shell=bash disable=SC2016  # backquotes in the why texts are markdown, not commands
# Servers: zookeeper (a single node, port 12181), zookeeper-ensemble (three nodes, zookeeper-ensemble.1..3 on
# 12182..12184; quorum ports 12888.., election ports 13888..). Both get the chroot /dlock that the URIs name.
# Keeps its data across stop/start. An ensemble member with no quorum running beside it only has to be up,
# not serving, to count as ready.
# Reads DLOCK_ZOOKEEPER_HEAP (-Xmx of each JVM, default 256m) and DLOCK_ZOOKEEPER_CLASSPATH (ZooKeeper's class
# path; default Debian's /usr/share/java/zookeeper.jar).
# Prints:
#   DLOCK_ZOOKEEPER_URI             zookeeper://127.0.0.1:12181/dlock
#   DLOCK_ZOOKEEPER_HOST, DLOCK_ZOOKEEPER_PORT
#   DLOCK_ZOOKEEPER_ENSEMBLE_URI    zookeeper://127.0.0.1:12182,127.0.0.1:12183,127.0.0.1:12184/dlock
#   DLOCK_ZOOKEEPER_ENSEMBLE_PORTS  12182,12183,12184   (processes zookeeper-ensemble.1, .2, .3)
# Sourced by compose/native/dlock-servers, whose header describes the recipe interface.

recipe_packages library 'the ZooKeeper C client (multi-threaded) for `zookeeper://`' libzookeeper-mt-dev
recipe_packages server 'the ZooKeeper server (Java) the `zookeeper://` tests run against' zookeeper
recipe_packages clients "interoperability tests against kazoo's \`Lock\`, \`WriteLock\` and \`ReadLock\` on the same names \
(kazoo must pass \`extra_lock_patterns=[\"-lock-\"]\` to see dlock's and Curator's nodes)" python3-kazoo

recipe_server zookeeper zookeeper --core 12181
recipe_server zookeeper-ensemble zookeeper --procs 3 12182 12888 13888   # client, quorum and election ports

ZK_HEAP=${DLOCK_ZOOKEEPER_HEAP:-256m}

zk_classpath() {
  if [[ -n ${DLOCK_ZOOKEEPER_CLASSPATH:-} ]]; then echo "$DLOCK_ZOOKEEPER_CLASSPATH"; return 0; fi
  # Debian's zookeeper.jar names its dependencies in its manifest; slf4j-simple makes it log to stderr.
  local cp=/usr/share/java/zookeeper.jar
  if [[ -r /usr/share/java/slf4j-simple.jar ]]; then cp+=:/usr/share/java/slf4j-simple.jar; fi
  echo "$cp"
}
zookeeper_check() {
  require_commands "$1" java
  [[ -n ${DLOCK_ZOOKEEPER_CLASSPATH:-} ]] || require_commands "$1" /usr/share/java/zookeeper.jar
}
zookeeper_init() {  # PROCESS: zoo.cfg, plus myid and the server list for an ensemble member
  local proc=$1 d=$DIR/$1 client member m_peer m_election
  read -r client _ <"$d/ports"
  mkdir -p "$d/data"
  {
    echo "tickTime=500"   # short ticks: session expiry and elections are quick in tests
    echo "initLimit=20"
    echo "syncLimit=10"
    echo "minSessionTimeout=1000"
    echo "maxSessionTimeout=60000"
    echo "dataDir=$d/data"
    echo "clientPort=$client"
    echo "clientPortAddress=$LOOPBACK"
    echo "maxClientCnxns=0"              # every test client comes from 127.0.0.1
    echo "admin.enableServer=false"      # else Jetty takes port 8080
    echo "4lw.commands.whitelist=*"      # ruok, srvr, stat, ... (3.5+ allows only srvr by default)
    if [[ $proc == *.* ]]; then          # an ensemble member: every member's quorum and election ports
      for member in $(procs_of "${proc%.*}"); do
        read -r _ m_peer m_election <"$DIR/$member/ports"
        echo "server.${member##*.}=$LOOPBACK:$m_peer:$m_election"
      done
    fi
  } >"$d/zoo.cfg"
  if [[ $proc == *.* ]]; then echo "${proc##*.}" >"$d/data/myid"; fi
}
# znode.container.checkIntervalMs: the server removes empty container nodes (our per-name parents) every
# second instead of every minute, so a test can see them go away.
zookeeper_launch() {
  spawn "$1" java "-Xmx$ZK_HEAP" -Xms16m -Xss512k -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
    -XX:+ExitOnOutOfMemoryError -Djava.net.preferIPv4Stack=true -Dorg.slf4j.simpleLogger.showDateTime=true \
    -Dznode.container.checkIntervalMs=1000 \
    -cp "$(zk_classpath)" org.apache.zookeeper.server.quorum.QuorumPeerMain "$DIR/$1/zoo.cfg"
}
zookeeper_setup() {  # once: the chroot /dlock that the URIs name (clients do not create a chroot)
  local d=$DIR/$1 out
  [[ ! -f $d/.setup-done ]] || return 0
  out=$(java -Xmx64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData -cp "$(zk_classpath)" \
    org.apache.zookeeper.ZooKeeperMain -server "$LOOPBACK:$2" create "/$DB_NAME" 2>&1) || true
  printf '%s\n' "$out" >>"$d/init.log"
  if [[ $out != *"Created /$DB_NAME"* && $out != *"already exists"* ]]; then
    show_log "$1" "$d/init.log" "could not create the znode /$DB_NAME"
    return 1
  fi
  touch "$d/.setup-done"
}
zk_four_letter() {  # PORT WORD -> ZooKeeper's answer (it closes the connection after it)
  # shellcheck disable=SC2016  # expanded by the inner bash
  timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf %s "$2" >&3 && cat <&3' "$LOOPBACK" "$1" "$2" 2>/dev/null
}
zookeeper_ready() {  # serving: srvr shows a Mode
  local proc=$1 port=$2 answer members
  answer=$(zk_four_letter "$port" srvr) || true
  [[ $answer != *"Mode: "* ]] || return 0
  # An ensemble member with no quorum running beside it cannot serve; then being up is all we can wait for.
  [[ $proc == *.* ]] || return 1
  members=$(procs_of "${proc%.*}" | wc -l)
  (($(running_count "${proc%.*}") <= members / 2)) && [[ $(zk_four_letter "$port" ruok || true) == imok ]]
}
zookeeper_env() {  # SERVER HOSTS PORTS
  case $1 in
    zookeeper)
      emit DLOCK_ZOOKEEPER_URI "zookeeper://$2/$DB_NAME"
      emit DLOCK_ZOOKEEPER_HOST "$LOOPBACK"
      emit DLOCK_ZOOKEEPER_PORT "$3"
      ;;
    zookeeper-ensemble)
      emit DLOCK_ZOOKEEPER_ENSEMBLE_URI "zookeeper://$2/$DB_NAME"
      emit DLOCK_ZOOKEEPER_ENSEMBLE_PORTS "$3"
      ;;
  esac
}
