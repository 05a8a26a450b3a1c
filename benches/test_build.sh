#!/usr/bin/env bash
# How long `cargo test --no-run` takes after a one-line library edit, on this tree and on an
# older revision (e.g. the one before the integration tests became one binary), alternating
# which goes first, in one run; and how much disk the test executables take.
#
#   benches/test_build.sh BASE_REV [ROUNDS]     (default 3 rounds)
#
# Both trees build into one target directory, so dependencies are built once and only the
# tacho crate and its tests are rebuilt; each timed build follows an untimed one that leaves
# that tree fully built, so a round times only the edit's rebuild and relink.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
base=${1:-}
rounds=${2:-3}
if [[ -z $base || ! $rounds =~ ^[1-9][0-9]*$ ]] || ! git -C "$here" rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "usage: benches/test_build.sh BASE_REV [ROUNDS]: BASE_REV must be a commit of this repository, ROUNDS a whole number >= 1" >&2
  exit 2
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/target}
old=$(mktemp -d)
trap 'git -C "$here" worktree remove --force "$old" >/dev/null 2>&1 || true' EXIT
git -C "$here" worktree add -q --detach "$old" "$base"

build() { (cd "$1" && cargo test --no-run --quiet >/dev/null 2>&1); }
timed_edit() {
  # One comment line appended to src/units.rs (which nearly every module uses), then undone.
  local dir=$1 start end
  cp "$dir/src/units.rs" "$dir/src/units.rs.orig"
  echo "// edit $(date +%s%N)" >>"$dir/src/units.rs"
  start=$(date +%s.%N)
  build "$dir"
  end=$(date +%s.%N)
  mv "$dir/src/units.rs.orig" "$dir/src/units.rs"
  build "$dir"
  echo "$end - $start" | bc
}

build "$old"
build "$here"
declare -a t_old t_new
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then
    a=$(timed_edit "$old"); b=$(timed_edit "$here")
  else
    b=$(timed_edit "$here"); a=$(timed_edit "$old")
  fi
  t_old+=("$a"); t_new+=("$b")
  printf 'round %d: %s %6.1f s   this tree %6.1f s\n' "$r" "$base" "$a" "$b"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
mo=$(median "${t_old[@]}"); mn=$(median "${t_new[@]}")
printf 'median: %s %.1f s, this tree %.1f s, ratio %.2f\n' "$base" "$mo" "$mn" "$(echo "$mn / $mo" | bc -l)"

# The newest executable of each integration test target of a tree.
sizes() {
  local dir=$1 total=0 n=0 name bin
  for name in $(cd "$dir" && cargo test --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["kind"] == ["test"] and m.get("executable"):
        print(m["executable"])'); do
    total=$((total + $(stat -c %s "$name"))); n=$((n + 1))
  done
  echo "$n executables, $((total >> 20)) MiB"
}
echo "integration test executables: $base $(sizes "$old"); this tree $(sizes "$here")"
