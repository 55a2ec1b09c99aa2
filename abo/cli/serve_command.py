"""``abo serve``: the ask/tell API, its OpenAPI schema and the dashboard over HTTP (FastAPI and
uvicorn are imported only when it runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from abo.cli.console import DEFAULT_STORAGE, _run, err, print_error, storage_label
from abo.core.exceptions import AboError

DEVICE_HELP = (
    "Where the GPs and acquisition searches run for every study: 'auto', 'cpu', 'cuda' or "
    "'cuda:N' (default: each study's own setting, 'auto' unless set)."
)


ForwardedAllowIps = Annotated[
    str | None,
    typer.Option(
        help="Addresses of the reverse proxy whose X-Forwarded-For/-Proto to trust "
        "(comma-separated, or '*'). Default: none, so clients are known by the address "
        "their packets come from.",
    ),
]
AdvertiseUrl = Annotated[
    str | None,
    typer.Option(
        help="This replica's URL as other `abo serve` replicas on the same database reach "
        "it (asks for studies it proposes for are forwarded there). Default: "
        "http://HOST:PORT, with this machine's name when bound to all addresses.",
    ),
]
ProposerLease = Annotated[
    float,
    typer.Option(
        help="Seconds a replica's proposer lease of a study lasts unrenewed: a "
        "dead replica's studies move to another within it."
    ),
]

LogFormat = Annotated[
    str,
    typer.Option(
        help="'text' (uvicorn's lines) or 'json': one JSON object a line on stderr for every "
        "record, with an access record per request (route, status, duration_ms)."
    ),
]

DaskScheduler = Annotated[
    str | None,
    typer.Option(
        help="Run proposal rounds and GP fits on the workers of the Dask cluster at this "
        "scheduler address (tcp://host:8786) instead of in this process."
    ),
]


def serve(
    storage: Annotated[str, typer.Option(help="Storage URL (PostgreSQL for many hosts).")] = (
        DEFAULT_STORAGE
    ),
    host: Annotated[str, typer.Option(help="Address to bind (loopback unless told).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="TCP port.")] = 8765,
    token_file: Annotated[
        Path | None, typer.Option(help="File of bearer tokens, one a line (or set ABO_TOKEN).")
    ] = None,
    max_body_bytes: Annotated[int, typer.Option(help="Larger request bodies get 413.")] = 1 << 20,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    log_format: LogFormat = "text",
    body_timeout: Annotated[
        float | None,
        typer.Option(help="Seconds a request body may take to arrive (408 after; default 30)."),
    ] = None,
    max_waiting_asks: Annotated[
        int | None,
        typer.Option(help="Asks that may wait for proposals at once (503 busy after; 256)."),
    ] = None,
    forwarded_allow_ips: ForwardedAllowIps = None,
    device: Annotated[str | None, typer.Option(help=DEVICE_HELP)] = None,
    advertise_url: AdvertiseUrl = None,
    proposer_lease: ProposerLease = 10.0,
    dask_scheduler: DaskScheduler = None,
) -> None:
    """Serve the ask/tell API, its OpenAPI schema (/docs) and the dashboard (/).

    The token file is followed while serving: a token removed from it stops working at the
    next request (and its browser sessions end); SIGHUP reads the file at once."""
    tokens, bind_host, log_setup = _checked(token_file, host, log_level, log_format)

    import uvicorn

    limits = (max_body_bytes, body_timeout, max_waiting_asks)
    replica = {
        "advertise_url": advertise_url or default_address(bind_host, port),
        "proposer_lease": proposer_lease,
        "dask_scheduler": dask_scheduler,
    }
    app = _app(storage, tokens, token_file, *limits, device, replica)
    _announce(bind_host, port, tokens, storage, log_setup)
    uvicorn.run(
        app,
        host=bind_host,
        port=port,
        log_level=log_level,
        log_config=log_setup or uvicorn.config.LOGGING_CONFIG,
        access_log=log_setup is None,  # JSON logs write abo.access records instead
        proxy_headers=bool(forwarded_allow_ips),  # else uvicorn trusts 127.0.0.1's headers
        forwarded_allow_ips=forwarded_allow_ips or None,
    )


def _checked(
    token_file: Path | None, host: str, log_level: str, log_format: str
) -> tuple[list[str], str, dict[str, Any] | None]:
    """The tokens, the address to bind (no IPv6 brackets) and uvicorn's log configuration;
    exit code 2 naming what is wrong."""
    from abo.service.auth import TokenSet, check_bind, read_tokens
    from abo.service.logs import log_config

    try:
        tokens = read_tokens(token_file)
        return tokens, check_bind(host, TokenSet(tokens)), log_config(log_level, log_format)
    except (AboError, ValueError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None


def _app(
    storage: str,
    tokens: list[str],
    token_file: Path | None,
    max_body_bytes: int,
    body_timeout: float | None,
    max_waiting_asks: int | None,
    device: str | None = None,
    replica: dict[str, Any] | None = None,
) -> Any:
    """The service's app on ``storage`` with the limits given (the app's defaults for those
    not); with a token file, its tokens are followed while serving and only ``ABO_TOKEN``'s
    stay fixed. Exit code 1 when the storage fails."""
    from abo.service.app import create_app
    from abo.service.auth import read_tokens

    options: dict[str, Any] = {"max_body_bytes": max_body_bytes, **(replica or {})}
    if body_timeout is not None:
        options["body_timeout"] = body_timeout
    if max_waiting_asks is not None:
        options["max_waiting_asks"] = max_waiting_asks
    if device is not None:
        options["device"] = device
    if token_file is not None:  # followed while serving; ABO_TOKEN stays fixed
        options["token_file"] = token_file
    fixed = read_tokens(None) if token_file is not None else tokens
    return _run(lambda: create_app(storage, token=fixed, **options))


def default_address(bind_host: str, port: int) -> str:
    """How other replicas reach this one when not told: the bound address, or this
    machine's name when bound to every address."""
    import socket

    host = socket.getfqdn() if bind_host in ("0.0.0.0", "::", "") else bind_host
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _announce(
    bind_host: str, port: int, tokens: list[str], storage: str, log_setup: dict | None = None
) -> None:
    """Say on stderr where the service listens, how it checks clients, and on what storage
    (as a JSON record when the logs are JSON)."""
    auth = f"{len(tokens)} token(s)" if tokens else "no auth (loopback only)"
    shown = f"[{bind_host}]" if ":" in bind_host else bind_host
    line = (
        f"abo service on http://{shown}:{port} ({auth}) for {storage_label(storage)}; "
        "dashboard at /, API at /docs"
    )
    if log_setup is None:
        err.print(line, highlight=False)
        return
    import logging.config

    logging.config.dictConfig(log_setup)
    logging.getLogger("abo").info(line, extra={"url": f"http://{shown}:{port}"})
