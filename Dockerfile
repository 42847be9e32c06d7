# syntax=docker/dockerfile:1
# Sentinel as a container: `sentinel run` as a non-root user (uid 10001), the project mounted
# read-only at /etc/sentinel, state in the volume /var/lib/sentinel. docs/deploy.md explains it;
# docker-compose.yml runs it with Redis. No secret is baked in: pass SENTINEL_API_TOKEN and the
# other ${env:…} values of the config at run time.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm

# --- build: the wheel of this project and a virtualenv with it and its dependencies ---
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /build
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m pip wheel --no-deps --wheel-dir /dist . \
 && python -m venv /opt/sentinel \
 && /opt/sentinel/bin/pip install /dist/*.whl \
 && /opt/sentinel/bin/sentinel --version

# --- runtime: the virtualenv only; no compiler, no build files, no pip cache ---
FROM ${PYTHON_IMAGE}
ENV PATH=/opt/sentinel/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SENTINEL_CONFIG=/etc/sentinel/sentinel.yaml \
    SENTINEL_STATE_DIR=/var/lib/sentinel
RUN groupadd --system --gid 10001 sentinel \
 && useradd --system --uid 10001 --gid 10001 --home-dir /srv/sentinel --no-create-home \
        --shell /usr/sbin/nologin sentinel \
 && install -d -o 10001 -g 10001 -m 0750 /srv/sentinel /var/lib/sentinel \
 && install -d -m 0755 /etc/sentinel
COPY --from=build /opt/sentinel /opt/sentinel
WORKDIR /srv/sentinel
USER 10001:10001
VOLUME ["/var/lib/sentinel"]
EXPOSE 8765
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=3).status == 200 else 1)"]
ENTRYPOINT ["sentinel"]
CMD ["run", "-c", "/etc/sentinel/sentinel.yaml"]
