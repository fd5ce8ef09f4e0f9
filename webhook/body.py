"""A request body: read against the memory budget, then sized before it is parsed.

`read_body(request, limit, reservation)` buffers the body, reserving each chunk from the admission memory
budget as it arrives (a slow body holds only what it has sent) and refusing more than `limit` bytes.

`parsed_size_estimate(body)` is an upper bound of the memory a review takes from parsing to the answer:
the body, the parsed objects and the deep copy a mutation works on. Python's objects cost far more than
their JSON text: 7.3 MB of `[{},{},...]` parse into 470 MB. The bound counts the JSON tokens that create
objects (`{`, `[`, `,`, `:`, found with `bytes.count`, so braces inside strings count too: it errs high)
and the bytes; its coefficients were measured with tracemalloc (tests/webhook/test_webhook_body.py checks
the bound against a measurement of every shape; docs/reliability.md, "Memory per request").

`containers(body)` counts the JSON objects and arrays of a body the same way, before it is decoded: a review
with more than `webhook.limits.MAX_REVIEW_CONTAINERS` is refused unparsed (decoding is most of what such a
review costs), as a denial when `leading_uid(body)` finds its uid.
"""

from __future__ import annotations

import re

from fastapi import Request

from webhook.limits import Reservation

BYTES_PER_BODY_BYTE = 5
"""The body, the strings parsed from it, and a margin. Measured when the deep copy went through JSON text
and copied the strings too; it shares them now, and the coefficient is kept (the bound errs high)."""
BYTES_PER_CONTAINER = 192
"""An object or array and its copy (an empty dict is 64 bytes, one with a key 184; plus a slot in its
parent)."""
BYTES_PER_MEMBER = 128
"""A member or element and its copy (a list or dict slot, a float or large int, a short string)."""


UID_SEARCH_BYTES = 1024
"""kube-apiserver writes `request.uid` first in the request, after the review's kind and apiVersion."""
_UID = re.compile(rb'"uid"\s*:\s*"([0-9A-Za-z-]{1,128})"')


class BodyTooLarge(Exception):
    pass


class OverBudget(Exception):
    """The memory budget has no room now: others hold it (retry)."""


def _declared_length(request: Request) -> int | None:
    declared = request.headers.get("content-length", "")
    if not declared or not declared.isascii() or not declared.isdigit():
        return None
    return int(declared) if len(declared) <= 18 else 10**18


async def read_body(request: Request, limit: int, reservation: Reservation) -> bytes:
    declared = _declared_length(request)
    if declared is not None and declared > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        if not reservation.grow_to(2 * size):  # the chunks, then their join
            raise OverBudget
        chunks.append(chunk)
    return b"".join(chunks)


def containers(body: bytes) -> int:
    """An upper bound of the JSON objects and arrays in `body` (braces inside strings count too)."""
    return body.count(b"{") + body.count(b"[")


def leading_uid(body: bytes) -> str | None:
    """The uid of a review read off its first bytes, without decoding it (None when it is not there): the
    first `uid` of a review kube-apiserver sent is its request's. A client that writes another uid first
    gets a denial of that uid, which the API server would not accept as the answer: only its own requests
    matter."""
    match = _UID.search(body, 0, UID_SEARCH_BYTES)
    return match[1].decode() if match else None


def parsed_size_estimate(body: bytes, *, counted: int | None = None) -> int:
    """`counted`: `containers(body)`, when the caller has counted them already."""
    members = body.count(b",") + body.count(b":")
    if counted is None:
        counted = containers(body)
    return BYTES_PER_BODY_BYTE * len(body) + BYTES_PER_CONTAINER * counted + BYTES_PER_MEMBER * members
