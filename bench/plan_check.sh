#!/usr/bin/env bash
# `kafka-chaos plan check` of every shipped plan (plans/*.yaml), offline as it runs by default:
# each must pass in at most 2 s, whole process (issue 51). Kafka's jar cache is an empty
# folder here (XDG_CACHE_HOME), so a check that downloaded would show, in its time and in that
# folder. Prints one row per plan: the median wall time of `runs` runs (default 5) with its
# min-max, and the peak memory, from `farm-bench` when it is installed, else wall times of a
# loop. Exit 1 when a plan fails, is slower than the bound, or leaves a file in the cache.
#
#   bench/plan_check.sh [runs]        (KC=path/to/kafka-chaos: another install)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
bound=2.0
kc=${KC:-.venv/bin/kafka-chaos}
[ -x "$kc" ] || kc=$(command -v kafka-chaos)
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export XDG_CACHE_HOME=$cache
status=0
printf '%-36s %8s %15s %9s\n' plan "wall s" "min-max" "peak MiB"
for plan in plans/*.yaml; do
  if ! last=$("$kc" plan check "$plan" | tail -1) || [[ $last != "ok: $plan — "* ]]; then
    echo "$plan: plan check failed: $last" >&2; status=1; continue
  fi
  if command -v farm-bench >/dev/null; then
    out=$(farm-bench -n "$runs" -- "$kc" plan check "$plan" 2>&1)
    read -r min med max < <(echo "$out" | awk '/ wall s /{print $4, $5, $6}')
    peak=$(echo "$out" | awk '/ peak MiB /{print $5}')
  else  # wall times of a plain loop, sorted: the middle one is the median
    times=$(for _ in $(seq "$runs"); do
      start=$(date +%s%N); "$kc" plan check "$plan" >/dev/null
      awk -v s="$start" -v e="$(date +%s%N)" 'BEGIN{printf "%.3f\n", (e - s) / 1e9}'
    done | sort -n)
    min=$(echo "$times" | head -1); max=$(echo "$times" | tail -1)
    med=$(echo "$times" | sed -n "$(( (runs + 1) / 2 ))p"); peak=-
  fi
  printf '%-36s %8s %15s %9s\n' "${plan#plans/}" "$med" "$min-$max" "$peak"
  if awk -v m="$med" -v b="$bound" 'BEGIN{exit !(m > b)}'; then
    echo "$plan: median $med s is over the $bound s bound" >&2; status=1
  fi
done
if [ -n "$(ls -A "$cache")" ]; then
  echo "plan check wrote into the Kafka cache: $(ls -A "$cache")" >&2; status=1
fi
exit $status
