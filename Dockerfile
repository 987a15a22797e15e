# One image for every Squall service (api, spout / acker / bolts workers) and for the
# Spark master and worker, so the executors have exactly the driver's Python packages.
# The steps are docs/operations.md, "Install by hand": Java 17, then `pip install .`.
# BASE: a Debian bookworm image with Python 3.11 (the public one by default; any image of
# that shape, such as one made locally with debootstrap, where no registry is reachable).
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jdk-headless procps curl \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")" /usr/lib/jvm/squall-java
WORKDIR /opt/squall
COPY pyproject.toml README.md ./
COPY squall ./squall
COPY services ./services
COPY examples ./examples
RUN python -m pip install --no-cache-dir .
# JAVA_HOME: the JDK of this image's architecture (amd64, arm64...), linked above.
# SPARK_WORKER_DIR: a Spark worker's executors' folders, where the squall user may write
# (Spark's default is inside the installed package).
ENV PYSPARK_PYTHON=python \
    JAVA_HOME=/usr/lib/jvm/squall-java \
    SPARK_WORKER_DIR=/var/lib/squall/spark-work
RUN useradd --create-home squall && mkdir -p /var/lib/squall && chown squall /var/lib/squall
USER squall
# The Spark driver's class archive (services/bolts/cds.py: a bolts job's Spark starts in
# about half the time), in the squall user's cache; a build without it still works.
RUN python -m services.bolts.cds >/tmp/squall-cds.log 2>&1 \
 || echo "no class archive (see /tmp/squall-cds.log in the build); bolts jobs start without it"
ENTRYPOINT ["squall"]
CMD ["--help"]
