"""Structured logs: every line about a Job carries `job=<namespace/name>` (text) or `"job": ...` (json)."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

CONTEXT_FIELDS = ("job", "pod", "target", "domain", "reason", "identity")


def _context(record: logging.LogRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in CONTEXT_FIELDS if hasattr(record, name)}


def _utc(seconds: float | None) -> time.struct_time:
    return time.gmtime(seconds)


class JsonFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__()
        self.converter = _utc

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_context(record),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.converter = _utc

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        context = " ".join(f"{name}={value}" for name, value in _context(record).items())
        return f"{text} {context}" if context else text


def configure_logging(log_format: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
