"""Routes only: read the body, check it, call a handler, serialise the review; health and metrics.

Two error channels: a broken call (not JSON, no request, wrong content type, body over 7 MiB, body too
slow) is an HTTP error (400/415/413/408) with a JSON body, and so is load shed in a flood (429 with
Retry-After); anything the handlers decide is 200 with an AdmissionReview, and an unexpected exception
becomes an Errored review that keeps the uid (and is logged and counted).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook.cache import LeaderSource
from webhook.handlers import Admission, Handled
from webhook.limits import AdmissionLimits, InflightGate
from webhook.metrics import Metrics
from webhook.review import AdmissionRequest, BadReview, errored, parse_review
from webhook.settings import MAX_BODY_BYTES

log = logging.getLogger(__name__)

Handler = Callable[[AdmissionRequest], Awaitable[Handled]]
Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


class BodyTooLarge(Exception):
    pass


async def read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _is_json(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def _result(handled: Handled, mutating: bool) -> str:
    if not handled.verdict.allowed:
        return "denied"
    return "patched" if mutating and handled.verdict.patch else "allowed"


def create_app(
    admission: Admission,
    leaders: LeaderSource,
    metrics: Metrics,
    tls_loaded: Callable[[], bool],
    lifespan: Lifespan | None = None,
    *,
    limits: AdmissionLimits | None = None,
) -> FastAPI:
    app = FastAPI(
        title="exclusive-placement webhook",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
    )

    limits = limits or AdmissionLimits()
    gate = InflightGate(limits.max_inflight)

    async def admit(request: Request, endpoint: str, handler: Handler, mutating: bool) -> Response:
        if not gate.try_enter():
            metrics.admissions.labels(endpoint, "shed").inc()
            return JSONResponse(
                {"error": f"webhook overloaded: {gate.limit} admissions in flight, retry shortly"},
                status_code=429,
                headers={"Retry-After": str(limits.retry_after_seconds)},
            )
        try:
            return await _admit(request, endpoint, handler, mutating)
        finally:
            gate.leave()

    async def _admit(request: Request, endpoint: str, handler: Handler, mutating: bool) -> Response:
        started = time.perf_counter()
        try:
            if not _is_json(request.headers.get("content-type", "")):
                metrics.admissions.labels(endpoint, "bad_request").inc()
                return _error(415, "Content-Type must be application/json")
            try:
                async with asyncio.timeout(limits.body_timeout):
                    body = await read_limited(request, MAX_BODY_BYTES)
                review = parse_review(body)
            except BodyTooLarge:
                metrics.admissions.labels(endpoint, "bad_request").inc()
                return _error(413, f"body larger than {MAX_BODY_BYTES} bytes")
            except TimeoutError:
                metrics.admissions.labels(endpoint, "bad_request").inc()
                response = _error(408, f"request body not received within {limits.body_timeout:g}s")
                response.headers["Connection"] = "close"
                return response
            except BadReview as err:
                metrics.admissions.labels(endpoint, "bad_request").inc()
                return _error(400, str(err))
            admission_request = review["request"]
            try:
                handled = await handler(admission_request)
            except BadReview as err:
                metrics.admissions.labels(endpoint, "bad_request").inc()
                return _error(400, str(err))
            except Exception as err:
                uid = admission_request["uid"]
                log.exception("admission failed", extra={"uid": uid, "endpoint": endpoint})
                metrics.errors.labels(endpoint).inc()
                metrics.admissions.labels(endpoint, "errored").inc()
                return JSONResponse(errored(uid, f"internal error in {endpoint}: {err}"))
            metrics.admissions.labels(endpoint, _result(handled, mutating)).inc()
            return JSONResponse(handled.review)
        finally:
            metrics.latency.labels(endpoint).observe(time.perf_counter() - started)

    @app.post("/mutate-pods")
    async def mutate_pods(request: Request) -> Response:
        return await admit(request, "mutate-pods", admission.mutate_pods, True)

    @app.post("/validate-pods")
    async def validate_pods(request: Request) -> Response:
        return await admit(request, "validate-pods", admission.validate_pods, False)

    @app.post("/mutate-jobs")
    async def mutate_jobs(request: Request) -> Response:
        return await admit(request, "mutate-jobs", admission.mutate_jobs, True)

    @app.post("/validate-jobsets")
    async def validate_jobsets(request: Request) -> Response:
        return await admit(request, "validate-jobsets", admission.validate_jobsets, False)

    @app.get("/livez")
    async def livez() -> PlainTextResponse:
        return PlainTextResponse("ok")

    @app.get("/readyz")
    async def readyz() -> Response:
        checks: dict[str, Any] = {"certs": tls_loaded(), "caches": leaders.ready()}
        ready = all(checks.values())
        return JSONResponse({"ready": ready, **checks}, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app
