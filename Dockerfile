# streamapp images for docker-compose.yml.
#   target "streamapp": the Faust worker and the demo producer (Python 3.11).
#   target "reconcile": the official apache/spark image plus the reconciliation job.
ARG SPARK_VERSION=4.2.0

FROM python:3.11-slim AS streamapp
# gcc builds the partitioners' C fast path; it is removed again in the same layer.
WORKDIR /app
COPY setup.cfg setup.py pyproject.toml README.md ./
COPY streamapp streamapp
COPY agents agents
COPY spark_batch spark_batch
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && pip install --no-cache-dir . \
 && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*
ENV STREAMAPP_DATA_DIR=/data \
    STREAMAPP_WEB_HOST=0.0.0.0 \
    PYTHONUNBUFFERED=1
VOLUME /data
EXPOSE 6066
CMD ["faust", "-A", "streamapp", "worker", "-l", "info"]

FROM apache/spark:${SPARK_VERSION}-python3 AS reconcile
# The job imports streamapp (settings, errors) from source: the image's Python is
# older than streamapp's packaging floor, so only the job's own imports are installed.
USER root
RUN pip3 install --no-cache-dir rich confluent-kafka pyarrow pandas
COPY streamapp /opt/streamapp/streamapp
COPY spark_batch /opt/streamapp/spark_batch
ENV PYTHONPATH=/opt/streamapp
USER spark
WORKDIR /opt/streamapp
