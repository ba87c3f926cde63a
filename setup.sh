#!/usr/bin/env bash
# Installs everything kafka-chaos needs on a Debian machine, idempotently:
# system packages, a virtualenv (.venv) with pinned dependencies, and the default Kafka jars.
# Run as root (the local backend creates network namespaces and iptables rules; the docker
# backend needs a Docker daemon, started here when none runs; set KAFKA_CHAOS_NO_DOCKERD=1 to
# skip that; docker-compose brings up the secured cluster the attach tests attach to).
# openssh-server and sudo are for the ssh backend's tests (an sshd per test host);
# fuse3 for the lose-unfsynced fault (a FUSE filesystem under each broker's data); chromium and
# chromium-driver for the HTML report's browser test; the JDK's compiler for the one-node HDFS
# of the Spark cluster test (tests/integration/MiniHdfs.java, run as a source file); Go for the
# S3 object store of the s3a:// test (SeaweedFS, built from the Go module proxy).
set -euo pipefail
cd "$(dirname "$0")"

need=()
for tool in ip:iproute2 iptables:iptables java:openjdk-17-jre-headless mvn:maven \
            javac:openjdk-17-jdk-headless \
            dockerd:docker.io docker-compose:docker-compose debootstrap:debootstrap \
            nsenter:util-linux \
            sshd:openssh-server sudo:sudo fusermount3:fuse3 \
            chromium:chromium chromedriver:chromium-driver; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool#*:}")
done
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || need+=(golang-go)
# libfaketime, preloaded into broker JVMs for the clock faults
compgen -G "/usr/lib/*/faketime/libfaketime.so.1" >/dev/null || need+=(libfaketime)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# the docker backend needs a daemon; start one by hand where no init system runs it
if ! docker info >/dev/null 2>&1 && [ -z "${KAFKA_CHAOS_NO_DOCKERD:-}" ]; then
  echo "setup: starting dockerd (log: /var/log/kafka-chaos-dockerd.log)"
  nohup dockerd >/var/log/kafka-chaos-dockerd.log 2>&1 &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { echo "setup: dockerd did not start" >&2; exit 1; }
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -r requirements.lock
.venv/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .

# Kafka broker jars from Maven Central, cached in ~/.cache/kafka-chaos
.venv/bin/kafka-chaos fetch-kafka ${KAFKA_CHAOS_VERSIONS:-}
# the analysis JVM's classes, archived once (class data sharing): its sessions start in half the
# time; set KAFKA_CHAOS_CDS=off to do without
if [ "${KAFKA_CHAOS_CDS:-}" != off ]; then
  .venv/bin/kafka-chaos spark-archive --if-missing \
    || echo "setup: no class archive; the analysis starts without one" >&2
fi
echo "setup: done"
