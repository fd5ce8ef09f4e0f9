"""Fault injection for EXTERNAL HTTP requests (never for in-process controllers or /debug/*).

SPEC is comma-separated `key=value`:
  error-rate=0.1           fraction of API requests answered with an error instead of being served
  error-codes=429+500      codes drawn uniformly (429 carries Retry-After; all carry Status bodies)
  latency-ms=20            added latency per request; `5-50` draws uniformly from a range
  drop-watch-after=5-30    every watch stream ends after a uniform random number of seconds in the range
  retry-after=1            seconds in the Retry-After header of injected 429s
Reproducible: one `random.Random(seed)` draws every decision in request order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kubesim.errors import ApiError, internal, too_many_requests
from kubesim.stats import Stats

SUPPORTED_CODES = frozenset({429, 500, 502, 503, 504})


def _range(text: str, key: str) -> tuple[float, float]:
    low, sep, high = text.partition("-")
    try:
        bounds = (float(low), float(high) if sep else float(low))
    except ValueError:
        raise ValueError(f"fault {key}: expected a number or a range like 5-30, got {text!r}") from None
    if bounds[0] < 0 or bounds[1] < bounds[0]:
        raise ValueError(f"fault {key}: invalid range {text!r}")
    return bounds


@dataclass(frozen=True)
class FaultSpec:
    error_rate: float = 0.0
    error_codes: tuple[int, ...] = (500,)
    latency_ms: tuple[float, float] = (0.0, 0.0)
    drop_watch_after: tuple[float, float] | None = None
    retry_after: int = 1

    @property
    def active(self) -> bool:
        return self.error_rate > 0 or self.latency_ms[1] > 0 or self.drop_watch_after is not None


def parse_faults(spec: str | None) -> FaultSpec:
    """Parse `--faults`; an unknown key or a bad value is a ValueError naming it."""
    if not spec or not spec.strip():
        return FaultSpec()
    values: dict[str, str] = {}
    for part in spec.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or not value:
            raise ValueError(f"fault spec entry {part!r} is not key=value")
        values[key.strip()] = value.strip()
    unknown = set(values) - {"error-rate", "error-codes", "latency-ms", "drop-watch-after", "retry-after"}
    if unknown:
        raise ValueError(f"unknown fault kind(s): {', '.join(sorted(unknown))}")
    rate = float(values.get("error-rate", "0"))
    if not 0 <= rate <= 1:
        raise ValueError(f"fault error-rate must be within [0, 1], got {rate}")
    codes = tuple(int(c) for c in values.get("error-codes", "500").split("+") if c)
    bad = [c for c in codes if c not in SUPPORTED_CODES]
    if bad or not codes:
        raise ValueError(
            f"fault error-codes must be among {sorted(SUPPORTED_CODES)}, got {values['error-codes']!r}"
        )
    return FaultSpec(
        error_rate=rate,
        error_codes=codes,
        latency_ms=_range(values.get("latency-ms", "0"), "latency-ms"),
        drop_watch_after=_range(values["drop-watch-after"], "drop-watch-after")
        if "drop-watch-after" in values
        else None,
        retry_after=int(values.get("retry-after", "1")),
    )


class FaultInjector:
    def __init__(self, spec: FaultSpec, stats: Stats, seed: int | None = None) -> None:
        self.spec = spec
        self.stats = stats
        self._rng = random.Random(seed)

    def latency_seconds(self) -> float:
        low, high = self.spec.latency_ms
        if high <= 0:
            return 0.0
        self.stats.faults_injected["latency"] += 1
        return self._rng.uniform(low, high) / 1000

    def error(self) -> ApiError | None:
        """The error to answer this request with, or None to serve it."""
        if self.spec.error_rate <= 0 or self._rng.random() >= self.spec.error_rate:
            return None
        code = self._rng.choice(self.spec.error_codes)
        self.stats.faults_injected[str(code)] += 1
        if code == 429:
            return too_many_requests(self.spec.retry_after)
        if code == 500:
            return internal("injected fault (kubesim --faults)")
        reason = {502: "BadGateway", 503: "ServiceUnavailable", 504: "Timeout"}[code]
        return ApiError(code, reason, f"injected fault (kubesim --faults): {reason}")

    def watch_lifetime(self) -> float | None:
        """Seconds after which this watch stream is cut, or None."""
        if self.spec.drop_watch_after is None:
            return None
        return self._rng.uniform(*self.spec.drop_watch_after)
