"""``Client`` and ``RemoteStudy``: the HTTP service with the shape of ``abo.Study``.

A ``RemoteStudy`` has the same methods and properties as a local study and returns
``abo.Trial`` objects, so ``abo.run.loop.run`` (and ``study.optimize``) drive it unchanged. HTTP
errors come back as the same abo exceptions. Connection errors and 503s are retried with
exponential backoff, or after the server's ``Retry-After`` when it sends one (a busy service);
that never double-tells (a repeated tell with the same value is a no-op on the server) and
never double-asks (each ask carries a ``client_id``, and a retried ask gets the trials the lost
answer held). A ``RemoteStudy`` sends the ``created_at`` of the study it loaded with every
request (header ``X-Abo-Study-Created``): if the study was deleted and created again since,
the service answers ``StudyNotFoundError`` instead of letting it ask or tell into the new one.

Example:
    >>> from abo.service import Client
    >>> client = Client("http://127.0.0.1:8765")  # doctest: +SKIP
    >>> study = client.load_study("tune")          # doctest: +SKIP
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

import httpx

from abo.core.exceptions import (
    AboError,
    DuplicatedStudyError,
    StudyNotFoundError,
    TrialStateError,
)
from abo.core.space import Space
from abo.core.trial import ProposalRecord, Report, Trial, TrialState
from abo.service.codes import CODES
from abo.spec.options_check import check_load_if_exists
from abo.spec.study_spec import StudySpec
from abo.study.api import StudyAPI
from abo.study.checks import MAX_REASON

API = "/api/v1"
CREATED_HEADER = "X-Abo-Study-Created"
MAX_RETRY_AFTER = 60.0  # seconds: the longest a server's Retry-After makes the client wait
# error code of the service -> the exception a local Study raises
_RETRY = (httpx.TransportError,)


def _trial(data: Mapping[str, Any]) -> Trial:
    return Trial(
        id=data["id"],
        study=data["study"],
        params=dict(data["params"]),
        state=TrialState(data["state"]),
        value=data.get("value"),
        reason=data.get("reason"),
        retry_of=data.get("retry_of"),
        attempt=data.get("attempt", 0),
        values=dict(data.get("values") or {}),
        proposal=ProposalRecord.from_json(data.get("proposal")),
        info=dict(data.get("info") or {}),
        user=dict(data.get("user") or {}),
        created_at=data.get("created_at", 0.0),
        finished_at=data.get("finished_at"),
        lease_expires_at=data.get("lease_expires_at"),
    )


class Client:
    """A connection to an abo service.

    Args:
        url: the service, e.g. ``http://127.0.0.1:8765``.
        token: the bearer token, if the service needs one.
        timeout: seconds per request.
        retries: attempts after a connection error or a 503, with exponential backoff.
        backoff: the first wait in seconds (doubled each time, at most 10 s).
        transport: an ``httpx`` transport (TLS settings, proxies, fault injection in tests).
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout: float = 60.0,
        retries: int = 6,
        backoff: float = 0.1,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff = backoff
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        **params: Any,
    ) -> Any:
        """One API call with retries; the JSON answer, or the abo exception of the error."""
        return self._answer(self._send(method, path, body, params, headers)[0])

    def wait_before_retry(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds to wait before retry ``attempt + 1``: the server's ``Retry-After`` (in
        seconds, at most ``MAX_RETRY_AFTER``) when a 503 carries one, else the backoff."""
        backoff = min(10.0, self.backoff * 2**attempt)
        header = response.headers.get("retry-after", "") if response is not None else ""
        if header.strip().isdigit():
            return min(MAX_RETRY_AFTER, max(backoff, float(header.strip())))
        return backoff

    def _send(
        self,
        method: str,
        path: str,
        body: Any,
        params: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
    ) -> tuple[httpx.Response, int]:
        """The response, and how many attempts before it were lost (connection error, 503)."""
        query = {k: v for k, v in params.items() if v is not None}
        for attempt in range(self.retries + 1):
            response: httpx.Response | None = None
            try:
                response = self._http.request(
                    method, API + path, json=body, params=query, headers=headers
                )
            except _RETRY:
                if attempt == self.retries:
                    raise
            else:
                if response.status_code != 503 or attempt == self.retries:
                    return response, attempt
            time.sleep(self.wait_before_retry(attempt, response))
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _answer(response: httpx.Response) -> Any:
        if response.status_code == 204:
            return None
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.is_success:
            return data
        error = (data or {}).get("error") if isinstance(data, dict) else None
        if not isinstance(error, dict):
            raise AboError(f"service: HTTP {response.status_code}: {response.text[:200]}")
        kind = CODES.get(error.get("code", ""), AboError)
        raise kind(error.get("message") or f"HTTP {response.status_code}")

    def health(self) -> bool:
        """True when the service answers ``/readyz``."""
        try:
            return self._http.get("/readyz").status_code == 200
        except httpx.TransportError:
            return False

    def studies(self) -> list[dict[str, Any]]:
        """Every study's definition and summary, as the API returns them."""
        return self.request("GET", "/studies")["studies"]

    def create_study(
        self,
        space: Space | Mapping[str, Any],
        name: str,
        direction: str | None = None,
        strategy: str | None = None,
        seed: int | None = None,
        *,
        load_if_exists: bool | str = False,
        outcomes: Any = None,
        **options: Any,
    ) -> RemoteStudy:
        """Create a study on the service (or load it with ``load_if_exists=True``, or
        ``"keep"``: as for ``abo.create_study``); the options are those of
        ``abo.create_study``, checked here and again by the service, and only those given are
        sent (the service compares them with a stored study's: ``OptionsConflictError``).
        ``warm_start_from`` may name studies on the service (resolved there) or hold studies
        of any storage (snapshotted here)."""
        load_if_exists = check_load_if_exists(load_if_exists)
        if strategy is not None:
            options["strategy"] = strategy
        warm = options.pop("warm_start_from", None)
        spec = StudySpec.create(space, outcomes=outcomes, direction=direction, seed=seed, **options)
        if warm:
            from abo.spec.warm_start import resolve

            sources = resolve(warm, lambda name: name, spec.space, spec.objectives[0].name)
            spec = StudySpec.create(
                spec.space, outcomes=outcomes, direction=direction, seed=spec.seed,
                warm_start_from=sources, **options,
            )  # fmt: skip
            options["warm_start_from"] = sources
        checked = spec.to_json()  # each option given, in the form the service takes
        sent = {k: checked[k] for k in [*options, *(["seed"] if seed is not None else [])]}
        body = {
            "name": name,
            "load_if_exists": load_if_exists,
            "space": checked["space"],
            "outcomes": checked["outcomes"],
            **sent,
        }
        response, retried = self._send("POST", "/studies", body, {})
        try:
            return RemoteStudy(self, self._answer(response))
        except DuplicatedStudyError:
            if not retried:
                raise
            # our own first attempt created it and its answer was lost
            study = self.load_study(name)
            if study.space != spec.space or study.spec.outcomes != spec.outcomes:
                raise
            return study

    def delete_study(self, name: str, created_at: float | None = None) -> None:
        """Delete a study with its trials (``StudyNotFoundError`` if there is none, or, with
        ``created_at``, if the study of that name is not the one created then)."""
        headers = {CREATED_HEADER: repr(created_at)} if created_at is not None else None
        response, retried = self._send("DELETE", f"/studies/{name}", None, {}, headers)
        try:
            self._answer(response)
        except StudyNotFoundError:
            if not retried:
                raise  # (after a retry: our first attempt deleted it and its answer was lost)

    def load_study(self, name: str) -> RemoteStudy:
        """An existing study by name (``StudyNotFoundError`` if none)."""
        return RemoteStudy(self, self.request("GET", f"/studies/{name}"))


class RemoteStudy(StudyAPI):
    """A study on the service, with the methods and properties of ``abo.Study``: the public
    methods and their checks are ``abo.study.api.StudyAPI``'s (a bad argument is refused
    here, before any request); this class sends the checked calls to the service.

    An ask carries a fresh ``client_id``, so a retry after a lost answer gets the trials that
    answer held instead of starting more; an ask with one ``info`` per trial asks one by one.
    ``importance`` and ``trials_dataframe`` are computed here, from the study's trials.
    """

    def __init__(self, client: Client, data: Mapping[str, Any]) -> None:
        self._client = client
        self._name = data["name"]
        self._spec = StudySpec.from_json(data["spec"])
        self._created_at = float(data["created_at"])
        self._headers = {CREATED_HEADER: repr(self._created_at)}

    def __repr__(self) -> str:
        return f"RemoteStudy(name={self.name!r}, url={self._client.url!r})"

    def _call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        return self._client.request(
            method, f"/studies/{self._name}{path}", body, self._headers, **params
        )

    # -- identity ---------------------------------------------------------------------------
    @property
    def created_at(self) -> float:
        """When the study was created (it tells it apart from a later one of the same name)."""
        return self._created_at

    # -- reading ----------------------------------------------------------------------------
    def _trials(self, state: TrialState | None) -> list[Trial]:
        out: list[Trial] = []
        offset: int | None = 0
        while offset is not None:
            page = self._call(
                "GET", "/trials", state=state and state.value, offset=offset, limit=10_000
            )
            out += [_trial(t) for t in page["trials"]]
            offset = page["next_offset"]
        return out

    def _get_trial(self, trial_id: int) -> Trial:
        return _trial(self._call("GET", f"/trials/{trial_id}"))

    def _count(self) -> int:
        return int(self._call("GET", "/trials", limit=1)["total"])

    def _best(self) -> Trial | None:
        data = self._call("GET", "/best")["trial"]
        return _trial(data) if data is not None else None

    def _best_trials(self) -> list[Trial]:
        return [_trial(t) for t in self._call("GET", "/best_trials")["trials"]]

    def _reference_point(self) -> dict[str, float]:
        return dict(self._call("GET", "/reference_point")["reference_point"])

    def _hypervolume(self, reference_point: dict[str, float] | None) -> float:
        body = {"reference_point": reference_point}
        return float(self._call("POST", "/hypervolume", body)["hypervolume"])

    def _reports(self, trial_id: int | None) -> dict[int, list[Report]]:
        data = self._call("GET", "/reports", trial_id=trial_id)
        out: dict[int, list[Report]] = {}
        for item in data["reports"]:
            out.setdefault(int(item["trial_id"]), []).append(
                Report(float(item["step"]), float(item["value"]), float(item["at"]))
            )
        return out

    # -- writing ----------------------------------------------------------------------------
    def _delete(self) -> None:
        self._client.delete_study(self._name, self._created_at)

    def _heartbeat(self, trial_id: int) -> Trial:
        return _trial(self._call("POST", f"/trials/{trial_id}/heartbeat"))

    def _tell(
        self, trial_id: int, values: dict[str, float], user: dict[str, Any], info: dict[str, Any]
    ) -> Trial:
        body = {"value": values, "metadata": user, "info": info}
        return _trial(self._call("POST", f"/trials/{trial_id}/tell", body))

    def _report(self, trial_id: int, step: float, value: float) -> bool:
        body = {"step": step, "value": value}
        return bool(self._call("POST", f"/trials/{trial_id}/report", body)["stop"])

    def _fail(
        self, trial_id: int, reason: str, user: dict[str, Any], info: dict[str, Any]
    ) -> Trial:
        body = {"reason": reason, "metadata": user, "info": info}
        return _trial(self._call("POST", f"/trials/{trial_id}/fail", body))

    def _lose(self, trial_id: int, reason: str) -> Trial:
        body = {"reason": str(reason)[:MAX_REASON] or "lost"}
        try:
            return _trial(self._call("POST", f"/trials/{trial_id}/lose", body))
        except TrialStateError:
            trial = self._get_trial(trial_id)
            if trial.state is TrialState.LOST:  # a retried request whose first answer was lost
                return trial
            raise

    def _enqueue(self, params: dict[str, Any], unique: bool) -> bool:
        body = {"params": params, "allow_duplicate": not unique}
        return bool(self._call("POST", "/enqueue", body)["queued"])

    def _add(
        self, params: dict[str, Any], values: dict[str, float], user: dict[str, Any], unique: bool
    ) -> Trial:
        body = {"params": params, "value": values, "metadata": user, "allow_duplicate": not unique}
        return _trial(self._call("POST", "/add", body))

    # -- asking -----------------------------------------------------------------------------
    def _start(
        self,
        n: int,
        n_workers: int | None,
        infos: dict[str, Any] | list[dict[str, Any]],
        pace: float | None,
    ) -> list[Trial]:
        """One request (the service caps ``n`` per call), or one per trial for a list of infos."""
        if isinstance(infos, list):
            return [t for i in infos for t in self._start(1, n_workers, i, pace)]
        body: dict[str, Any] = {
            "count": n,
            "n_workers": n_workers,
            "client_id": uuid.uuid4().hex,
            "info": infos,
        }
        if pace is not None:
            body["pace"] = pace
        return [_trial(t) for t in self._call("POST", "/ask", body)["trials"]]
