#!/usr/bin/env bash
# What the apache/kafka image's run script does, on the jars alone: defaults, then
# KafkaDockerWrapper's setup (server.properties from the KAFKA_* variables, the storage
# formatted; a volume formatted before is kept), then the broker.
set -euo pipefail
export CLUSTER_ID=${CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}
if [[ -z "${KAFKA_LISTENERS-}" && -n "${KAFKA_ADVERTISED_LISTENERS-}" \
      && "${KAFKA_PROCESS_ROLES-}" != controller ]]; then
  export KAFKA_LISTENERS
  KAFKA_LISTENERS=$(echo "$KAFKA_ADVERTISED_LISTENERS" | sed -e 's|://[^:]*:|://0.0.0.0:|g')
fi
cp=/opt/kafka/libs/*
if ! out=$(java -cp "$cp" -Dlog4j2.configurationFile=/etc/kafka/docker/tools-log4j2.yaml \
      kafka.docker.KafkaDockerWrapper setup --default-configs-dir /etc/kafka/docker \
      --mounted-configs-dir /mnt/shared/config --final-configs-dir /opt/kafka/config 2>&1); then
  grep -qi "already formatted" <<<"$out" || { echo "$out" >&2; exit 1; }
fi
exec java ${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G} -XX:+UseG1GC -cp "$cp" \
  -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.yaml \
  kafka.Kafka /opt/kafka/config/server.properties
