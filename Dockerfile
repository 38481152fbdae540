# hitl: the Slack approval bot (`hitl serve`). Build: docker build -t hitl . ; run with compose.yaml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# The dependencies first, at the exact versions of the lock (a layer that changes only when the lock does); then
# hitl itself, without resolving anything again.
COPY requirements.lock ./
RUN pip install --no-cache-dir --requirement requirements.lock
COPY pyproject.toml README.md LICENSE ./
COPY engine ./engine
COPY bot ./bot
COPY hitl ./hitl
COPY examples ./examples
RUN pip install --no-cache-dir --no-deps . \
    && useradd --create-home --uid 10001 hitl \
    && mkdir -p /data \
    && chown hitl:hitl /data

USER 10001
# The SQLite store when no HITL_STORE is given: a volume, so it outlives the container.
VOLUME ["/data"]
ENV HITL_STORE=sqlite:////data/hitl.db
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:3000/healthz', timeout=4).status == 200 else 1)"]
CMD ["hitl", "serve", "--host", "0.0.0.0", "--port", "3000"]
