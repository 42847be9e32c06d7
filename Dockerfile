# Sentinel as a container: `sentinel run` as a non-root user (uid 10001), the project mounted
# read-only at /etc/sentinel, state in the volume /var/lib/sentinel. docs/deploy.md explains it;
# docker-compose.yml runs it with Redis. No secret is baked in: pass SENTINEL_API_TOKEN and the
# other ${env:…} values of the config at run time.
#
# No `# syntax=` line: it would make BuildKit fetch a frontend image from Docker Hub on every
# build, which fails offline and behind a mirror. Everything it needs is given here:
#   PYTHON_IMAGE          the base image (pinned by version and digest; any Debian-like image
#                         with python3, venv and pip will do, e.g. one from your own registry)
#   PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST, PIP_FIND_LINKS
#                         the package index (a mirror, a proxy, a local directory server);
#                         build-time only, never kept in the image

ARG PYTHON_IMAGE=python:3.12.14-slim-bookworm@sha256:0f5b26b9518d002b6173fd61daad821fa340635ebfec5bba471013f9ca114579

# --- build: the locked dependencies, then the wheel of this project, in a virtualenv without pip ---
FROM ${PYTHON_IMAGE} AS build
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ARG PIP_FIND_LINKS
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /build
# Dependencies first, from the locks alone (every file checked against its hash): this layer is
# rebuilt only when a lock changes, not on every change to the source.
COPY deploy/requirements.lock deploy/build-requirements.lock ./
RUN python -m venv /opt/build-tools \
 && /opt/build-tools/bin/python -m pip install --quiet --require-hashes -r build-requirements.lock \
 && python -m venv --without-pip /opt/sentinel \
 && /opt/build-tools/bin/python -m pip --python /opt/sentinel/bin/python install --quiet \
        --require-hashes --no-deps -r requirements.lock
# Then the project itself, without dependencies (they are all in the layer above).
COPY pyproject.toml README.md ./
COPY src ./src
RUN /opt/build-tools/bin/python -m pip wheel --quiet --no-build-isolation --no-deps --wheel-dir /dist . \
 && /opt/build-tools/bin/python -m pip --python /opt/sentinel/bin/python install --quiet --no-deps /dist/*.whl \
 && test ! -e /opt/sentinel/bin/pip \
 && /opt/sentinel/bin/sentinel --version

# --- runtime: the virtualenv only; no pip, no setuptools, no compiler, no build files ---
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
# The service answers within a second of its start: the first check comes after 5 s. (Docker
# 25's --start-interval would allow faster checks during the start only; older engines refuse it.)
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=3).status == 200 else 1)"]
ENTRYPOINT ["sentinel"]
CMD ["run", "-c", "/etc/sentinel/sentinel.yaml"]
