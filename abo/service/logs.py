"""The service's logs: uvicorn's plain text by default, one JSON object a line on request.

``abo serve --log-format json`` writes every record (uvicorn's, abo's own, and one access
record per request from ``abo.access``, with its route, status and duration) as a JSON object
on one line of stderr, ready for a log shipper (Loki, Elasticsearch, CloudWatch): the time in
UTC ISO 8601, the level, the logger, the message, and each structured field of the record.

Example:
    >>> import logging
    >>> record = logging.LogRecord("abo.access", logging.INFO, "", 0, "GET /healthz 200",
    ...                            None, None)
    >>> record.status = 200
    >>> import json; json.loads(JsonFormatter().format(record))["status"]
    200
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

LOG_FORMATS = ("text", "json")
ACCESS = "abo.access"  # one record per request answered (written only by the JSON format)
_STANDARD = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)
_UVICORN_NOISE = frozenset({"color_message"})  # uvicorn's colourised copy of the message


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON: ts, level, logger, message, its extra fields, and the
    exception's traceback when it carries one."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in _UVICORN_NOISE and key not in out:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def log_config(level: str, fmt: str) -> dict[str, Any] | None:
    """uvicorn's ``log_config`` for ``fmt``: ``None`` keeps uvicorn's own text logging;
    ``"json"`` sends uvicorn's, abo's and the access records as JSON lines to stderr."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log_format: expected one of {', '.join(LOG_FORMATS)}, got {fmt!r}")
    if fmt == "text":
        return None
    level = level.upper()
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    logger = {"handlers": ["json"], "level": level, "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"json": handler},
        "loggers": {
            "uvicorn": logger,
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "abo": logger,
        },
    }


__all__ = ["ACCESS", "LOG_FORMATS", "JsonFormatter", "log_config"]
