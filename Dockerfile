# syntax=docker/dockerfile:1
# exclusive-placement images: one multi-stage build, one target per component.
#
#   docker build --target webhook -t ghcr.io/exclusive-placement/webhook:0.1.0 .
#   docker build --target resizer -t ghcr.io/exclusive-placement/resizer:0.1.0 .
#
# The product images (webhook, resizer, certs) carry the product only: its packages and requirements.txt.
# `devtools` adds devstack, the chart and requirements-tools.txt to register the chart's webhooks for
# docker-compose.yml, and serves it only. No Docker engine runs on the project's development machines: this file is
# reviewed and checked by tests/compose, not built there.

# Pin by digest for reproducible releases: --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: a virtualenv with the product's pinned runtime wheels (binary wheels only: no compiler) --------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
COPY requirements.txt /tmp/requirements.txt
RUN python -m venv --without-pip /opt/venv \
 && pip --python /opt/venv/bin/python install --only-binary=:all: -r /tmp/requirements.txt

# --- build-tools: the same plus devstack's requirements (Helm) for the compose registration ---------------
FROM build AS build-tools
COPY requirements-tools.txt /tmp/requirements-tools.txt
RUN pip --python /opt/venv/bin/python install --only-binary=:all: -r /tmp/requirements-tools.txt

# --- base: interpreter, non-root user, state directories, no package tools --------------------------------
FROM ${PYTHON_IMAGE} AS base
RUN python -m pip uninstall --yes --quiet pip setuptools wheel \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot \
 && mkdir -p /var/lib/exclusive-placement/certs \
 && chown -R 65532:65532 /var/lib/exclusive-placement
WORKDIR /app
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/app \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532

# --- runtime: the product (placement, kubekit, certs, webhook, resizer) and its runtime venv ---------------
FROM base AS runtime
COPY --from=build /opt/venv /opt/venv
COPY placement/ placement/
COPY kubekit/ kubekit/
COPY certs/ certs/
COPY webhook/ webhook/
COPY resizer/ resizer/

# --- tools: the product plus devstack, with the tools' venv (compose only) ----------------------------------
FROM runtime AS tools
COPY --from=build-tools /opt/venv /opt/venv
COPY devstack/ devstack/

FROM runtime AS certs
ENTRYPOINT ["python", "-m", "certs"]

FROM tools AS devtools
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
