# One image for every Squall service (api, spout / acker / bolts workers) and for the
# Spark master and worker, so the executors have exactly the driver's Python packages.
# The steps are docs/operations.md, "Install by hand": Java 17, then `pip install .`.
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jdk-headless procps curl \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/squall
COPY pyproject.toml README.md ./
COPY squall ./squall
COPY services ./services
COPY examples ./examples
RUN python -m pip install --no-cache-dir .
ENV PYSPARK_PYTHON=python \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
RUN useradd --create-home squall && mkdir -p /var/lib/squall && chown squall /var/lib/squall
USER squall
# The Spark driver's class archive (services/bolts/cds.py: a bolts job's Spark starts in
# about half the time), in the squall user's cache; a build without it still works.
RUN python -m services.bolts.cds >/tmp/squall-cds.log 2>&1 \
 || echo "no class archive (see /tmp/squall-cds.log in the build); bolts jobs start without it"
ENTRYPOINT ["squall"]
CMD ["--help"]
