# syntax=docker/dockerfile:1
# exclusive-placement images: one multi-stage build, one target per component.
#
#   docker build --target webhook -t ghcr.io/exclusive-placement/webhook:0.1.0 .
#   docker build --target resizer -t ghcr.io/exclusive-placement/resizer:0.1.0 .
#
# `kubesim`, `certs` and `devtools` serve docker-compose.yml only. No Docker engine runs on the project's
# development machines: this file is reviewed and checked by tests/compose, not built there.

# Pin by digest for reproducible releases: --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: a virtualenv with the pinned runtime wheels (binary wheels only: no compiler anywhere) -----------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
COPY requirements.txt /tmp/requirements.txt
RUN python -m venv --without-pip /opt/venv \
 && pip --python /opt/venv/bin/python install --only-binary=:all: -r /tmp/requirements.txt

# --- build-dev: the same plus Helm (helm-python-sdk), to render the chart in the compose setup ---------------
FROM build AS build-dev
COPY requirements-dev.txt /tmp/requirements-dev.txt
RUN grep -E '^helm-python-sdk==' /tmp/requirements-dev.txt > /tmp/helm.txt \
 && pip --python /opt/venv/bin/python install --only-binary=:all: -r /tmp/helm.txt

# --- runtime: interpreter + venv + sources, non-root, no package tools ----------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
RUN python -m pip uninstall --yes --quiet pip setuptools wheel \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot \
 && mkdir -p /var/lib/exclusive-placement/certs /var/lib/exclusive-placement/kubesim \
 && chown -R 65532:65532 /var/lib/exclusive-placement
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY placement/ placement/
COPY certs/ certs/
COPY kubesim/ kubesim/
COPY webhook/ webhook/
COPY resizer/ resizer/
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/app \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532

FROM runtime AS certs
ENTRYPOINT ["python", "-m", "certs"]

FROM runtime AS kubesim
EXPOSE 6443
ENTRYPOINT ["python", "-m", "kubesim"]

FROM runtime AS devtools
COPY --from=build-dev /opt/venv /opt/venv
COPY devstack/ devstack/
COPY charts/ charts/
COPY images/register_webhooks.py images/register_webhooks.py
ENTRYPOINT ["python", "images/register_webhooks.py"]

FROM runtime AS resizer
EXPOSE 8080
ENTRYPOINT ["python", "-m", "resizer"]

# Last, so a plain `docker build .` produces the webhook.
FROM runtime AS webhook
EXPOSE 9443
ENTRYPOINT ["python", "-m", "webhook"]
