"""One log format for both binaries: text for people, JSON lines for collectors, always in UTC.

A JSON line: `{"time": "2026-01-02T03:04:05.678Z", "level": "INFO", "logger": "resizer.controller",
"msg": "...", <context>..., "exception": "<traceback>"}`. Context is whatever the call passed as
`extra=` (`job`, `pod`, `uid`, `reason`, ...); the text format appends it as `key=value`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Literal

LogFormat = Literal["text", "json"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]

# Attributes every LogRecord has; anything else came in through `extra=` and is context to print.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's ANSI duplicate of msg
}
QUIET_LIBRARIES = ("urllib3", "kubernetes")
"""Their DEBUG/INFO lines are per request: kept at WARNING whatever the level."""


def context_of(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


def _utc(seconds: float | None) -> time.struct_time:
    return time.gmtime(seconds)


def timestamp(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    """RFC 3339 in UTC with milliseconds: `2026-01-02T03:04:05.678Z`."""
    return formatter.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": timestamp(self, record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **context_of(record),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = f"{timestamp(self, record)} {record.levelname} {record.name}: {record.getMessage()}"
        context = context_of(record)
        if context:
            text += " " + " ".join(f"{k}={v}" for k, v in context.items())
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


JsonFormatter.converter = staticmethod(_utc)
TextFormatter.converter = staticmethod(_utc)


def configure_logging(log_format: LogFormat, level: LogLevel) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
