"""A small admission webhook over real TLS for kubesim's admission tests.

POST /mutate adds the label `mutated=<n>` (n counts calls for that pod name, so reinvocation is visible);
POST /deny denies pods labelled `deny=yes` (HTTP-level 200, `allowed: false`, code 403).
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from kubernetes import client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from certs.generate import create_ca, create_serving_cert
from tests.support.kube import as_body
from tests.support.waiting import eventually


@dataclass
class FakeWebhook:
    url: str
    ca_bundle: str
    calls: Counter[str] = field(default_factory=Counter)
    reviews: list[dict[str, Any]] = field(default_factory=list)


def _response(review: dict[str, Any], **fields: Any) -> JSONResponse:
    return JSONResponse(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], **fields},
        }
    )


def _app(hook: FakeWebhook) -> Starlette:
    async def mutate(request: Request) -> JSONResponse:
        review = await request.json()
        hook.reviews.append(review)
        obj = review["request"]["object"]
        key = obj["metadata"].get("name") or obj["metadata"].get("generateName", "")
        hook.calls[f"mutate:{key}"] += 1
        ops: list[dict[str, Any]] = []
        if "labels" not in obj["metadata"]:
            ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
        ops.append(
            {"op": "add", "path": "/metadata/labels/mutated", "value": str(hook.calls[f"mutate:{key}"])}
        )
        patch = base64.b64encode(json.dumps(ops).encode()).decode()
        return _response(
            review, allowed=True, patchType="JSONPatch", patch=patch, warnings=["mutated by test"]
        )

    async def deny(request: Request) -> JSONResponse:
        review = await request.json()
        hook.calls["deny"] += 1
        labels = review["request"]["object"]["metadata"].get("labels") or {}
        if labels.get("deny") == "yes":
            return _response(
                review,
                allowed=False,
                status={"code": 403, "reason": "Forbidden", "message": "denied by test"},
            )
        return _response(review, allowed=True)

    return Starlette(
        routes=[Route("/mutate", mutate, methods=["POST"]), Route("/deny", deny, methods=["POST"])]
    )


@contextmanager
def running_webhook(tmp_path: Path) -> Iterator[FakeWebhook]:
    ca = create_ca("kubesim-test-ca")
    serving = create_serving_cert(ca, ["localhost"], ["127.0.0.1"])
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(serving.cert_pem)
    key.write_bytes(serving.key_pem)
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # else ~40 ms per call (delayed ACK)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    hook = FakeWebhook(f"https://127.0.0.1:{port}", base64.b64encode(ca.cert_pem).decode())
    config = uvicorn.Config(
        _app(hook), log_level="warning", ssl_certfile=str(cert), ssl_keyfile=str(key), lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        eventually(lambda: server.started, "the fake webhook serving", 5, interval=0.01)
        yield hook
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def webhook_entry(name: str, url: str, ca_bundle: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [
            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
        **extra,
    }


def register(kube: client.ApiClient, kind: str, name: str, *webhooks: dict[str, Any]) -> None:
    admission = client.AdmissionregistrationV1Api(kube)
    body = {"metadata": {"name": name}, "webhooks": list(webhooks)}
    if kind == "mutating":
        admission.create_mutating_webhook_configuration(as_body(body))
    else:
        admission.create_validating_webhook_configuration(as_body(body))
