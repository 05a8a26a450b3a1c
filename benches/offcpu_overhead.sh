#!/usr/bin/env bash
# Cost of tracing time off the CPU on a context-switch-heavy load: two threads ping-ponging one
# byte over a pair of pipes (each blocks in read every round trip), run for SECONDS alone and
# under each tracer, ROUNDS rounds, the order rotating each round:
#
#   none     the load alone
#   tacho    tacho profile --off-cpu --json (whole system), started before the load
#   top      tacho top --json --waits (the same tracer loaded without stack walks, read each
#            second, with top's block tracer), started before the load
#   perf     perf sched record (every sched event to a file), started before the load
#   bcc      offcputime-bpfcc, when installed and able to start (it says why when not)
#
# Printed per run: round trips per second, context switches per second (from /proc/stat, the
# whole machine), throughput lost against the same round's `none`, and the tool's own CPU
# (utime+stime of its process over the load's window) as a share of one core. The in-kernel
# cost of a tracer runs in the load's threads: it shows as throughput lost, not as tool CPU;
# for tacho it is also printed directly, as the mean time of one run of its sched_switch
# program (kernel.bpf_stats_enabled is on during the run, and restored after).
#
#   sudo benches/offcpu_overhead.sh [ROUNDS] [SECONDS]       (default 3 rounds of 5 s)
#
# Uses target/release/tacho (cargo build --release first). Nothing here is a pass/fail test:
# this VM's CPU swings 2x between runs.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-3}
secs=${2:-5}
if [[ ! $rounds =~ ^[1-9][0-9]*$ || ! $secs =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: benches/offcpu_overhead.sh [ROUNDS] [SECONDS]: whole numbers >= 1" >&2
  exit 2
fi
tacho=${TACHO:-$here/target/release/tacho}
[[ -x $tacho ]] || { echo "no $tacho: cargo build --release first" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "run as root (tracing needs it)" >&2; exit 2; }

work=$(mktemp -d)
stats_was=$(cat /proc/sys/kernel/bpf_stats_enabled)
trap 'rm -rf "$work"; echo "$stats_was" > /proc/sys/kernel/bpf_stats_enabled' EXIT
echo 1 >/proc/sys/kernel/bpf_stats_enabled
cat >"$work/pingpong.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static int ab[2], ba[2];
static volatile int stop;
static void *echo(void *arg) {
    char c;
    while (read(ab[0], &c, 1) == 1 && !stop)
        if (write(ba[1], &c, 1) != 1) break;
    return arg;
}
int main(int argc, char **argv) {
    double secs = atof(argv[1]);
    if (pipe(ab) || pipe(ba)) return 1;
    pthread_t t;
    pthread_create(&t, 0, echo, 0);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    long n = 0;
    char c = 'x';
    long work = argc > 2 ? atol(argv[2]) : 0;
    volatile long sink = 0;
    for (;;) {
        for (long i = 0; i < work; i++) sink += i;
        if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1) return 1;
        if (++n % 1024 == 0) {
            clock_gettime(CLOCK_MONOTONIC, &b);
            if (b.tv_sec - a.tv_sec + (b.tv_nsec - a.tv_nsec) / 1e9 >= secs) break;
        }
    }
    double took = b.tv_sec - a.tv_sec + (b.tv_nsec - a.tv_nsec) / 1e9;
    printf("%.0f\n", n / took);
    return 0;
}
EOF
cc -O2 -pthread -o "$work/pingpong" "$work/pingpong.c"

# WORK=N adds N loop iterations of computing before each round trip, to bring the untraced
# rate down to a chosen one (WORK=4000 gives about 100k switches/s on the project VM).
# LOAD_PRIO=fifo runs the load SCHED_FIFO (chrt -f 10) so other work on a shared machine does
# not take its CPUs in the middle of a run (the tools stay at normal priority).
run_load=
[[ ${LOAD_PRIO:-} == fifo ]] && run_load="chrt -f 10"
ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
ctxt() { awk '/^ctxt/ {print $2}' /proc/stat; }

bcc=$(command -v offcputime-bpfcc || true)
if [[ -n $bcc ]]; then
  if ! timeout 20 "$bcc" -f 1 >"$work/bcc.out" 2>"$work/bcc.err"; then
    echo "offcputime-bpfcc cannot start here: $(grep -v '^$' "$work/bcc.err" | tail -1)"
    bcc=
  fi
else
  echo "offcputime-bpfcc is not installed (Debian: bpfcc-tools): left out"
fi
modes=(none tacho top)
command -v perf >/dev/null && modes+=(perf)
[[ -n $bcc ]] && modes+=(bcc)

# Starts tool $1 in the background (for the load plus a margin); prints its pid.
start_tool() {
  local run=$((secs + 3))
  case $1 in
    tacho) "$tacho" profile --off-cpu --json --duration "${run}s" >"$work/tacho.json" 2>"$work/tacho.err" &
      echo $!
      # Tracing starts once it says so on stderr.
      for _ in $(seq 100); do grep -q "tracing" "$work/tacho.err" 2>/dev/null && break; sleep 0.1; done ;;
    top) "$tacho" top --json --waits --interval 1s --count "$run" >"$work/top.json" 2>"$work/top.err" &
      echo $!
      # The tracers are loaded before the first line (one interval in).
      for _ in $(seq 100); do [[ -s $work/top.json ]] && break; sleep 0.1; done ;;
    perf) perf sched record -o "$work/perf.data" -- sleep "$run" >/dev/null 2>&1 &
      echo $!
      sleep 1.5 ;;
    bcc) "$bcc" -f "$run" >/dev/null 2>&1 &
      echo $!
      sleep 5 ;;
  esac
}

declare -A base
printf '%-6s %5s %12s %12s %8s %9s\n' tool round trips/s switches/s lost% tool-CPU%
for ((r = 1; r <= rounds; r++)); do
  order=("${modes[@]:$(((r - 1) % ${#modes[@]}))}" "${modes[@]:0:$(((r - 1) % ${#modes[@]}))}")
  declare -A rate=() sw=() cpu=()
  for mode in "${order[@]}"; do
    pid=
    [[ $mode != none ]] && pid=$(start_tool "$mode")
    c0=$(ctxt)
    t0=0; [[ -n $pid ]] && t0=$(cpu_ticks "$pid")
    s0=$(date +%s.%N)
    rate[$mode]=$($run_load "$work/pingpong" "$secs" "${WORK:-0}")
    s1=$(date +%s.%N)
    t1=0; [[ -n $pid ]] && t1=$(cpu_ticks "$pid")
    c1=$(ctxt)
    if [[ $mode == tacho || $mode == top ]]; then
      for fd in /proc/"$pid"/fdinfo/*; do
        grep -qs run_cnt "$fd" && awk '/run_time_ns/ {t = $2} /run_cnt/ {c = $2}
          END {if (c) printf "  (%s round %d: %d program runs, %.0f ns each)\n", m, r, c, t / c}' m="$mode" r="$r" "$fd"
      done >>"$work/bpf_runs"
    fi
    sw[$mode]=$(echo "($c1 - $c0) / ($s1 - $s0)" | bc -l)
    cpu[$mode]=$(echo "100 * ($t1 - $t0) / $ticks / ($s1 - $s0)" | bc -l)
    if [[ -n $pid ]]; then
      # Started in a subshell: not this shell's child, so waited for by its /proc entry.
      kill -INT "$pid" 2>/dev/null || true
      while [[ -e /proc/$pid ]]; do sleep 0.1; done
    fi
    rm -f "$work/perf.data"*
  done
  for mode in "${modes[@]}"; do
    lost=$(echo "100 * (1 - ${rate[$mode]} / ${rate[none]})" | bc -l)
    printf '%-6s %5d %12.0f %12.0f %8.1f %9.2f\n' "$mode" "$r" "${rate[$mode]}" "${sw[$mode]}" \
      "$lost" "${cpu[$mode]}"
  done
done
cat "$work/bpf_runs" 2>/dev/null || true
