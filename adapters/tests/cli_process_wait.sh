# Sourced by the CLI test scripts that start dlock processes (and whose command may be a shell with
# a child shell, the "grandchild", that records its pid): bounded waits on files and processes, over
# the caller's $work folder.
# shellcheck shell=bash disable=SC2154  # $work is the sourcing script's

# running PID: true while PID runs as our grandchild (a zombie has stopped running; the command
# line guards against a recycled pid).
running() {
  [[ -r /proc/$1/status ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null &&
    tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$work"
}
# appears FILE: true once FILE is written, within 10 s.
appears() {
  local i
  for ((i = 0; i < 200; i++)); do [[ -s $1 ]] && return 0; sleep 0.05; done
  return 1
}
# exits PID SECONDS: true once PID has exited, within SECONDS (a zombie our shell has not reaped yet
# has exited: kill -0 still finds it).
exits() {
  local i
  for ((i = 0; i < $2 * 20; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
# why_still_running PID: what a process that should have ended is doing, for a failure's message:
# its signal masks (pending, blocked, caught) and each thread's state and kernel wait.
why_still_running() {
  local t
  grep -E '^(State|SigPnd|ShdPnd|SigBlk|SigIgn|SigCgt):' "/proc/$1/status" 2>/dev/null | tr '\n' ' '
  echo
  for t in /proc/"$1"/task/*; do
    echo "  thread ${t##*/}: $(awk '/^State:/ {print $2, $3}' "$t/status" 2>/dev/null)" \
      "wchan $(cat "$t/wchan" 2>/dev/null) blocked $(awk '/^SigBlk:/ {print $2}' "$t/status" 2>/dev/null)"
  done
}
# catching PID: waits (up to 10 s) until PID has installed its SIGINT handler (SigCgt bit 1),
# so a signal sent after this reaches dlock's own handling, never the default action.
catching() {
  local i mask
  for ((i = 0; i < 200; i++)); do
    mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$1/status" 2>/dev/null)
    [[ -n $mask ]] && (((16#$mask & 2) != 0)) && return 0
    sleep 0.05
  done
  return 1
}
