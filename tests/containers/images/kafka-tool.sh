#!/usr/bin/env bash
# Kafka's command-line tools by the names its distribution gives their scripts.
set -euo pipefail
case "$(basename "$0")" in
  kafka-topics.sh) main=org.apache.kafka.tools.TopicCommand ;;
  kafka-broker-api-versions.sh) main=org.apache.kafka.tools.BrokerApiVersionsCommand ;;
  kafka-acls.sh) main=org.apache.kafka.tools.AclCommand ;;
  kafka-storage.sh) main=kafka.tools.StorageTool ;;
  *) echo "kafka-tool.sh: no tool named $(basename "$0")" >&2; exit 2 ;;
esac
exec java -Xmx256m -cp '/opt/kafka/libs/*' \
  -Dlog4j2.configurationFile=/etc/kafka/docker/tools-log4j2.yaml "$main" "$@"
