"""Serve ``create_app`` with options ``abo serve`` does not expose (tests only).

Usage: ``python run_app.py '{"storage": URL, "port": N, "options": {...}, "plugins": [FILE]}'``;
each plugin file is imported first (e.g. to register a strategy). Tokens come from
``ABO_TOKEN``. A ``create_app`` error is printed and exits with 1, as ``abo serve`` does.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import uvicorn

from abo.core.exceptions import AboError
from abo.service.app import create_app
from abo.service.auth import read_tokens


def main() -> int:
    spec = json.loads(sys.argv[1])
    for path in spec.get("plugins", []):
        module = importlib.util.spec_from_file_location(Path(path).stem, path)
        assert module is not None and module.loader is not None
        module.loader.exec_module(importlib.util.module_from_spec(module))
    try:
        app = create_app(spec["storage"], token=read_tokens(), **spec.get("options", {}))
    except AboError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    uvicorn.run(app, host="127.0.0.1", port=spec["port"], log_level="info")
    return 0


if __name__ == "__main__":
    sys.exit(main())
