#!/usr/bin/env bash
# The fast test tier (`pytest -m fast tests`) where only Python is: a fresh virtualenv with the
# Python dependencies alone (requirements.lock, the project installed from the checkout), in a
# mount namespace that hides Java (/usr/lib/jvm), the Kafka jars and class archives
# (~/.cache/kafka-chaos), Maven's repository, Chromium and the Docker daemon's socket. Prints
# the tier's test count and its wall time, `runs` times (default 3). Target: <= 60 s on
# 2 cores (the developers' brief, issue 48). Needs root (unshare, mount).
#
#   bench/fast_tier.sh [runs]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
venv=${KC_FAST_VENV:-/tmp/kc-fast-tier-venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r requirements.lock
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -e .
fi
hide() {  # an empty tmpfs over each folder that exists, /dev/null over each file
  for path in "$@"; do
    if [ -d "$path" ]; then mount -t tmpfs none "$path"
    elif [ -e "$path" ]; then mount --bind /dev/null "$path"; fi
  done
}
export -f hide
for i in $(seq "$runs"); do
  unshare --mount --propagation private bash -c '
    hide /usr/lib/jvm "$HOME/.cache/kafka-chaos" "$HOME/.m2" /usr/lib/chromium \
         /run/docker.sock /var/run/docker.sock
    if command -v java >/dev/null && java -version >/dev/null 2>&1; then
      echo "java still runs" >&2; exit 1
    fi
    start=$(date +%s%N)
    out=$("$0/bin/python" -m pytest -q -p no:cacheprovider -m fast tests 2>&1) || {
      echo "$out" | tail -30; exit 1; }
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    echo "run '"$i"': $(echo "$out" | tail -1) | wall $((ms / 1000)).$(printf %03d $((ms % 1000))) s"
  ' "$venv"
done
