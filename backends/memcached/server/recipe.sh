# shellcheck shell=bash disable=SC2016  # backquotes in the why texts are markdown, not commands
# Servers: memcached (one server, port 11311), memcached-ring (two servers that one URI spreads names over by
# consistent hashing: memcached-ring.1, .2 on 11312, 11313). A restarted memcached comes back empty.
# Prints:
#   DLOCK_MEMCACHED_URI         memcached://127.0.0.1:11311
#   DLOCK_MEMCACHED_HOST, DLOCK_MEMCACHED_PORT
#   DLOCK_MEMCACHED_RING_URI    memcached://127.0.0.1:11312,127.0.0.1:11313
#   DLOCK_MEMCACHED_RING_PORTS  11312,11313        (processes memcached-ring.1, memcached-ring.2)
# Sourced by compose/native/dlock-servers, whose header describes the recipe interface.

recipe_packages library 'the memcached client for `memcached://`' libmemcached-dev
recipe_packages server 'the memcached server the `memcached://` tests run against' memcached

recipe_server memcached memcached --core 11311
recipe_server memcached-ring memcached --procs 2 11312

memcached_check() { require_commands "$1" memcached; }
memcached_launch() {
  local user=()
  if is_root; then   # memcached refuses to run as root without -u
    if id -u memcache >/dev/null 2>&1; then user=(-u memcache); else user=(-u nobody); fi
  fi
  spawn "$1" memcached -l "$LOOPBACK" -p "$2" -U 0 -m 64 -c 4096 "${user[@]}"
}
memcached_ready() {
  local answer
  # shellcheck disable=SC2016  # expanded by the inner bash
  answer=$(timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf "version\r\n" >&3 && read -r line <&3 &&
    printf %s "$line"' "$LOOPBACK" "$2" 2>/dev/null) || return 1
  [[ $answer == VERSION* ]]
}
memcached_env() {  # SERVER HOSTS PORTS
  case $1 in
    memcached)
      emit DLOCK_MEMCACHED_URI "memcached://$2"
      emit DLOCK_MEMCACHED_HOST "$LOOPBACK"
      emit DLOCK_MEMCACHED_PORT "$3"
      ;;
    memcached-ring)
      emit DLOCK_MEMCACHED_RING_URI "memcached://$2"
      emit DLOCK_MEMCACHED_RING_PORTS "$3"
      ;;
  esac
}
