"""Routes only: read the body, check it, call a handler, serialise the review; health and metrics.

Two error channels: a broken call (not JSON, no request, wrong content type, body over 7 MiB, body too
slow, a review that would take more memory than the webhook allows or holds more than 50,000 JSON objects
and arrays) is an HTTP error (400/415/413/408)
with a JSON body, and so is load shed (429 with Retry-After: admissions or memory at their limit) and an
admission without the client certificate the webhook asks for (403); anything the handlers decide is
200 with an AdmissionReview, and so is a pod spec beyond the webhook's limits (`webhook.limits`: a denial
that names the field), and an unexpected exception becomes an Errored review that keeps the uid (and is
logged and counted).

An admission reads its body first, holding memory for what has arrived but no admission slot; only then
does it take a slot to be decided (`webhook.limits`).
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

from webhook.body import (
    BodyTooLarge,
    OverBudget,
    containers,
    leading_uid,
    parsed_size_estimate,
    read_body,
)
from webhook.cache import LeaderSource
from webhook.handlers import Admission, Handled
from webhook.limits import (
    MAX_REVIEW_CONTAINERS,
    AdmissionLimits,
    InflightGate,
    MemoryBudget,
    Reservation,
    Shedding,
)
from webhook.metrics import Metrics
from webhook.review import AdmissionRequest, BadReview, ReviewOverLimit, denied, errored, parse_review
from webhook.settings import MAX_BODY_BYTES

log = logging.getLogger(__name__)

Handler = Callable[[AdmissionRequest], Awaitable[Handled]]
Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]
MIB = 1024 * 1024


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
    require_client_certificate: bool = False,
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
    budget = MemoryBudget(limits.memory_bytes)
    shedding = Shedding()
    metrics.admission_memory.set_function(lambda: budget.reserved)

    def shed(endpoint: str, message: str) -> JSONResponse:
        shedding.refused()
        metrics.admissions_by(endpoint, "shed").inc()
        return JSONResponse(
            {"error": f"webhook overloaded: {message}, retry shortly"},
            status_code=429,
            headers={"Retry-After": str(limits.retry_after_seconds)},
        )

    def bad_request(endpoint: str, status: int, message: str) -> JSONResponse:
        metrics.admissions_by(endpoint, "bad_request").inc()
        return _error(status, message)

    def too_many_containers(endpoint: str, body: bytes, counted: int) -> JSONResponse:
        """Refused unparsed: a denial of the review's uid (the user reads why), else a 413."""
        message = (
            f"the review holds about {counted} JSON objects and arrays, more than the "
            f"{MAX_REVIEW_CONTAINERS} the exclusive-placement webhook parses "
            "(far more than any real pod or Job)"
        )
        uid = leading_uid(body)
        if uid is None:
            return bad_request(endpoint, 413, message)
        metrics.admissions_by(endpoint, "over_limit").inc()
        return JSONResponse(denied(uid, message, code=413))

    async def admit(request: Request, endpoint: str, handler: Handler, mutating: bool) -> Response:
        started = time.perf_counter()
        reservation = Reservation(budget)
        try:
            if not _is_json(request.headers.get("content-type", "")):
                return bad_request(endpoint, 415, "Content-Type must be application/json")
            if require_client_certificate and getattr(request.state, "client_certificate", None) is None:
                return bad_request(
                    endpoint, 403, "a client certificate signed by the webhook's client CA is required"
                )
            try:
                async with asyncio.timeout(limits.body_timeout):
                    body = await read_body(request, MAX_BODY_BYTES, reservation)
            except BodyTooLarge:
                return bad_request(endpoint, 413, f"body larger than {MAX_BODY_BYTES} bytes")
            except TimeoutError:
                response = bad_request(
                    endpoint, 408, f"request body not received within {limits.body_timeout:g}s"
                )
                response.headers["Connection"] = "close"
                return response
            except OverBudget:
                return shed(endpoint, f"{budget.limit // MIB} MiB of admission memory in use")
            counted = containers(body)
            estimate = parsed_size_estimate(body, counted=counted)
            if estimate > budget.limit:
                return bad_request(
                    endpoint,
                    413,
                    f"review would take about {estimate // MIB} MiB of memory once parsed, more than the "
                    f"{budget.limit // MIB} MiB the webhook allows (a body of {len(body)} bytes)",
                )
            if counted > MAX_REVIEW_CONTAINERS:
                return too_many_containers(endpoint, body, counted)
            if not reservation.grow_to(estimate):
                return shed(endpoint, f"{budget.limit // MIB} MiB of admission memory in use")
            if not gate.try_enter():
                return shed(endpoint, f"{gate.limit} admissions in flight")
            try:
                return await _decide(body, counted, endpoint, handler, mutating)
            finally:
                gate.leave()
        finally:
            reservation.release()
            metrics.latency_by(endpoint).observe(time.perf_counter() - started)

    async def _decide(body: bytes, counted: int, endpoint: str, handler: Handler, mutating: bool) -> Response:
        try:
            review = parse_review(body, counted=counted)
        except ReviewOverLimit as err:
            metrics.admissions_by(endpoint, "over_limit").inc()
            return JSONResponse(denied(err.uid, str(err), code=400))
        except BadReview as err:
            return bad_request(endpoint, 400, str(err))
        admission_request = review["request"]
        try:
            handled = await handler(admission_request)
        except BadReview as err:
            return bad_request(endpoint, 400, str(err))
        except Exception as err:
            uid = admission_request["uid"]
            log.exception("admission failed", extra={"uid": uid, "endpoint": endpoint})
            metrics.errors.labels(endpoint).inc()
            metrics.admissions_by(endpoint, "errored").inc()
            return JSONResponse(errored(uid, f"internal error in {endpoint}: {err}"))
        metrics.admissions_by(endpoint, _result(handled, mutating)).inc()
        return JSONResponse(handled.review)

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
        # Unready while admissions are shed: the Service then routes the API server to other replicas.
        admitting = not gate.full and not shedding.recently()
        checks: dict[str, Any] = {"certs": tls_loaded(), "caches": leaders.ready(), "admissions": admitting}
        ready = all(checks.values())
        return JSONResponse({"ready": ready, **checks}, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app
