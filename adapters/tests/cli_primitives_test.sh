#!/usr/bin/env bash
# cli/primitives: dlock run / hold with --shared, --write and --permits N --of M.
#   - every bad combination is a usage error (exit 64) saying what is wrong, before connecting;
#   - a backend that does not make the primitive is refused with exit 64 and the registry's message;
#   - on memory:// (one process) each form runs its command;
#   - across processes, on URI (default file://; a scheme that lacks either primitive fails):
#     two `run --shared` overlap, two `run --write` never do, `--permits 2 --of 3` holders together
#     with `--permits 1 --of 3` ones never hold more than 3 permits and do reach 3, and `hold
#     --shared` holders make `run --write --wait` give up with 75 naming the side.
# Usage: cli_primitives_test.sh DLOCK [URI]
set -u
dlock=$1
work=$(mktemp -d)
uri=${2:-"file://$work/locks"}
# shellcheck disable=SC2154  # p is the trap's own loop variable
trap 'for p in $(jobs -p); do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
# shellcheck source=adapters/tests/cli_expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_expect.sh"
name="prim-$$"

# ---- usage errors: found before anything connects (the host below does not exist) ----
down="redis://127.0.0.1:1"
expect 64 "--permits without --of" -- "$dlock" run memory:// "$name" --permits 2 -- true
says "--permits 2 needs --of M"
expect 64 "--of without --permits" -- "$dlock" run memory:// "$name" --of 3 -- true
says "--of 3 needs --permits N"
expect 64 "N > M" -- "$dlock" run memory:// "$name" --permits 4 --of 3 -- true
says "--permits 4 is more than --of 3"
expect 64 "M = 0" -- "$dlock" run memory:// "$name" --permits 1 --of 0 -- true
says "--of 0: a semaphore has at least 1 permit"
expect 64 "N = 0" -- "$dlock" run memory:// "$name" --permits 0 --of 3 -- true
says "--permits 0: take at least 1 permit"
expect 64 "M not a number" -- "$dlock" run memory:// "$name" --permits 1 --of many -- true
says "--of many: expected an integer"
expect 64 "--shared with --permits" -- "$dlock" run memory:// "$name" --shared --permits 1 --of 2 -- true
says "--shared and --permits choose different primitives"
expect 64 "--write with --of" -- "$dlock" hold memory:// "$name" --write --of 2
says "--write and --of choose different primitives"
expect 64 "--shared with --write" -- "$dlock" run memory:// "$name" --shared --write -- true
says "--shared and --write are the two sides of one reader-writer lock"
expect 64 "a usage error wins over an unreachable server" -- "$dlock" run "$down" "$name" --permits 3 --of 2 -- true
expect 0 "run --help documents --shared" -- "$dlock" run --help
if ! { grep -q -- "--shared" "$work/out" && grep -q -- "--permits N --of M" "$work/out"; }; then
  fail "run --help lacks the new options"
fi
expect 0 "dlock --help documents them" -- "$dlock" --help
grep -q -- "--shared | --write | --permits N --of M" "$work/out" || fail "dlock --help lacks the new options"

# ---- a backend without the primitive: the registry refuses it before connecting, exit 64 ----
# The schemes that make neither, from `dlock backends` (the table keeps up as backends gain them).
"$dlock" backends >"$work/backends" || fail "dlock backends failed"
offers() {  # offers SCHEME COLUMN(read_write|semaphore): the capability column of the first table says yes
  awk -v s="$1" -v c="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) col = i; next }
                           $1 == s { print $col; exit }' "$work/backends" | grep -q yes
}
without_rw="" without_sem=""
while read -r scheme _; do
  [[ -z $scheme ]] && break
  [[ -z $without_rw ]] && ! offers "$scheme" read_write && without_rw=$scheme
  [[ -z $without_sem ]] && ! offers "$scheme" semaphore && without_sem=$scheme
done < <(tail -n +2 "$work/backends")
if [[ -n $without_rw ]]; then
  expect 64 "--shared on $without_rw (no reader-writer lock)" -- "$dlock" run "$without_rw://127.0.0.1:1/x" "$name" --shared -- true
  says "lacks the required capabilities read_write"
  expect 64 "hold --write on $without_rw" -- "$dlock" hold "$without_rw://127.0.0.1:1/x" "$name" --write
  says "lacks the required capabilities read_write"
fi
if [[ -n $without_sem ]]; then
  expect 64 "--permits on $without_sem (no semaphore)" -- "$dlock" run "$without_sem://127.0.0.1:1/x" "$name" --permits 1 --of 2 -- true
  says "lacks the required capabilities semaphore"
fi
grep -q "^Reader-writer locks and semaphores" "$work/backends" || fail "dlock backends lacks the reader-writer locks and semaphores table"
"$dlock" backends --markdown >"$work/md"
grep -q "^| scheme | read-write lock capabilities | semaphore capabilities |" "$work/md" || fail "backends --markdown lacks the second table"

# ---- memory:// in one process: each form runs its command ----
expect 0 "run --shared on memory://" -- "$dlock" run memory:// "$name" --shared -- true
# shellcheck disable=SC2016  # $DLOCK_FENCING_TOKEN is the command's, set by dlock run
expect 0 "run --write on memory:// passes the fencing token" -- \
  "$dlock" run memory:// "$name" --write -- sh -c 'test -n "$DLOCK_FENCING_TOKEN"'
expect 3 "run --permits 2 --of 3 passes the status through" -- "$dlock" run memory:// "$name" --permits 2 --of 3 -- sh -c 'exit 3'
expect 0 "hold --shared on memory://" -- "$dlock" hold memory:// "$name" --shared
grep -q "^acquired " "$work/out" || fail "hold --shared printed '$(cat "$work/out")'"

# ---- across processes ----
scheme=${uri%%:*}
if ! offers "$scheme" read_write || ! offers "$scheme" semaphore; then
  fail "$scheme:// makes no reader-writer lock or no semaphore: the tests across processes need both"
  echo "$failures failure(s)"
  exit 1
fi

# The command every holder runs: marks itself inside with its permit count, samples the total of
# the marks until `reached` exists (someone saw TARGET at once) or 5 s passed, keeps the most it
# saw in seen.<pid>.
cat >"$work/inside.sh" <<'EOF'
dir=$1 units=$2 target=$3
echo "$units" >"$dir/in.$$.tmp" && mv "$dir/in.$$.tmp" "$dir/in.$$"
most=0
# 5 s by the clock, not by iterations: on a loaded machine each sample's cat and awk take longer,
# and 100 of them held the lock long enough for the holders queued behind to give up.
until_s=$((SECONDS + 5))
while ((SECONDS < until_s)); do
  total=$(cat "$dir"/in.* 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
  ((total > most)) && most=$total
  ((total >= target)) && touch "$dir/reached"
  [[ -e $dir/reached ]] && break
  sleep 0.05
done
sleep 0.1
total=$(cat "$dir"/in.* 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
((total > most)) && most=$total
echo "$most" >"$dir/seen.$$"
rm -f "$dir/in.$$"
EOF
round() {  # round DIR: the largest total any holder saw, and whether `reached` was made
  sort -n "$1"/seen.* | tail -1
}
seen_count() {  # seen_count DIR: how many holders ran to the end (wrote their seen.<pid>)
  find "$1" -maxdepth 1 -name 'seen.*' | wc -l
}

# Two readers at once: each waits to see the other.
mkdir "$work/shared"
for _ in 1 2; do "$dlock" run "$uri" "rw-$name" --shared --wait 20s -- bash "$work/inside.sh" "$work/shared" 1 2 & done
wait
[[ $(seen_count "$work/shared") -eq 2 ]] || fail "--shared: not both commands ran"
if [[ $(round "$work/shared") -eq 2 && -e $work/shared/reached ]]; then
  echo "ok: two run --shared overlap"
else
  fail "two run --shared never held the read side together (most seen: $(round "$work/shared"))"
fi

# Two writers and a reader: never two inside at once (each holds ~5 s waiting for a 2 that must not come).
mkdir "$work/write"
"$dlock" run "$uri" "rw-$name" --write --wait 60s -- bash "$work/inside.sh" "$work/write" 1 2 &
"$dlock" run "$uri" "rw-$name" --write --wait 60s -- bash "$work/inside.sh" "$work/write" 1 2 &
"$dlock" run "$uri" "rw-$name" --shared --wait 60s -- bash "$work/inside.sh" "$work/write" 1 2 &
wait
[[ $(seen_count "$work/write") -eq 3 ]] || fail "--write: not all three commands ran"
if [[ $(round "$work/write") -eq 1 && ! -e $work/write/reached ]]; then
  echo "ok: run --write excludes writers and readers"
else
  fail "run --write overlapped another holder (most seen: $(round "$work/write"))"
fi

# Permits: two holders of 2 and two of 1 on a semaphore of 3: never more than 3 held, 3 reached.
mkdir "$work/permits"
# The holders of 2 go first: were both holders of 1 in first, they could leave before either
# holder of 2 found 2 free, and 3 would never be reached though nothing is wrong.
permits_holder() {
  "$dlock" run "$uri" "sem-$name" --permits "$1" --of 3 --wait 60s -- bash "$work/inside.sh" "$work/permits" "$1" 3 &
}
permits_holder 2
permits_holder 2
for _ in $(seq 200); do compgen -G "$work/permits/in.*" >/dev/null && break; sleep 0.05; done
permits_holder 1
permits_holder 1
wait
[[ $(seen_count "$work/permits") -eq 4 ]] || fail "--permits: not all four commands ran"
most=$(round "$work/permits")
((most <= 3)) || fail "--permits N --of 3 let $most permits in at once"
if [[ $most -eq 3 && -e $work/permits/reached ]]; then
  echo "ok: --permits 2 --of 3 holders never exceed 3 permits and reach 3"
else
  fail "--of 3 never reached 3 permits at once (most seen: $most)"
fi

# Holders in other processes (`dlock hold`, stdin from a fifo: closing our end releases them).
hold_in_background() {  # hold_in_background TAG ARGS...: starts `dlock hold ARGS`, waits for "acquired"
  local tag=$1; shift
  mkfifo "$work/$tag.in"
  "$dlock" hold "$@" <"$work/$tag.in" >"$work/$tag.out" 2>&1 &
  exec {fd}>"$work/$tag.in"
  eval "fd_$tag=$fd"
  for _ in $(seq 300); do grep -q '^acquired' "$work/$tag.out" && return 0; sleep 0.05; done
  fail "dlock hold $* did not acquire: $(cat "$work/$tag.out")"
}
release_background() { local fd; eval "fd=\$fd_$1"; exec {fd}>&-; }

# Two readers held by `dlock hold --shared`: a writer gives up with 75 naming the side, a reader gets in.
hold_in_background r1 "$uri" "rw-$name" --shared --wait 10s
hold_in_background r2 "$uri" "rw-$name" --shared --wait 10s && echo "ok: two hold --shared at once"
expect 75 "run --write while two readers hold" -- "$dlock" run "$uri" "rw-$name" --write --wait 300ms -- true
says "the write side of rw lock 'rw-$name' is not free"
expect 0 "run --shared beside them" -- "$dlock" run "$uri" "rw-$name" --shared --wait 5s -- true
release_background r1
release_background r2
wait
expect 0 "run --write once the readers left" -- "$dlock" run "$uri" "rw-$name" --write --wait 10s -- true

# 2 of 3 permits held by `dlock hold`: 2 more are not free (75), 1 is.
hold_in_background s1 "$uri" "sem-$name" --permits 2 --of 3 --wait 10s
expect 75 "run --permits 2 --of 3 while 2 of 3 are held" -- "$dlock" run "$uri" "sem-$name" --permits 2 --of 3 --wait 300ms -- true
says "fewer than 2 of the 3 permits of semaphore 'sem-$name' are free"
expect 0 "run --permits 1 --of 3 beside them" -- "$dlock" run "$uri" "sem-$name" --permits 1 --of 3 --wait 5s -- true
release_background s1
wait

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
