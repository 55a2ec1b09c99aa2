"""``Client`` / ``RemoteStudy`` against a real service: the shape of ``abo.Study``."""

from __future__ import annotations

import inspect
import time

import httpx
import pytest

import abo
from abo.executors import DaskExecutor, ThreadExecutor
from abo.service import Client, RemoteStudy

from .conftest import SPACE, Server, objective


@pytest.fixture()
def client(server: Server):
    with Client(server.url) as c:
        yield c


def test_study_and_remote_study_are_both_study_like() -> None:
    """One protocol (``abo.study.protocol.StudyLike``) for the loop, the CLI and the plots: both
    kinds of study have every member, with the same parameters."""
    from abo.study.protocol import StudyLike

    members = [m for m in dir(StudyLike) if not m.startswith("_") or m == "__len__"]
    members = [m for m in members if m not in dir(object) or m == "__len__"]
    assert {"ask_batch", "tell", "best", "spec", "outcomes", "delete"} <= set(members)
    for name in members:
        want = inspect.getattr_static(StudyLike, name)
        for kind in (abo.Study, RemoteStudy):
            got = inspect.getattr_static(kind, name, None)
            assert got is not None, (kind.__name__, name)
            if isinstance(want, property):
                assert isinstance(got, property), (kind.__name__, name)
            else:
                wanted = list(inspect.signature(want).parameters)
                assert list(inspect.signature(got).parameters) == wanted, (kind.__name__, name)
    assert isinstance(abo.create_study(SPACE, strategy="random"), StudyLike)


def test_asks_carry_their_pace_and_a_bad_one_is_refused(client: Client, study_name: str) -> None:
    study = client.create_study(SPACE, name=study_name, strategy="random", seed=0)
    hurried = study.ask_batch(2, n_workers=4, pace=0.5)  # the automatic loop's asks
    assert len({t.id for t in hurried}) == 2
    with pytest.raises(abo.AboError, match="pace") as bad:
        study.ask_batch(1, pace=-1.0)
    assert bad.value.field == "pace" and len(study) == 2


def test_ask_tell_and_errors_map_back(client: Client, study_name: str) -> None:
    study = client.create_study(SPACE, name=study_name, strategy="random", seed=0)
    assert study.name == study_name and study.space == SPACE and study.direction == "minimize"
    assert study.config.max_retries == 1
    trial = study.ask()
    assert isinstance(trial, abo.Trial) and trial.state is abo.TrialState.RUNNING
    batch = study.ask_batch(3, n_workers=4)
    assert len({t.id for t in [trial, *batch]}) == 4
    done = study.tell(trial.id, 0.5, {"note": "hi"}, info={"worker": "w"})
    assert done.value == 0.5 and done.user == {"note": "hi"} and done.info["worker"] == "w"
    assert study.tell(trial.id, 0.5).value == 0.5  # idempotent
    with pytest.raises(abo.TrialStateError, match="value"):
        study.tell(trial.id, 0.7)
    with pytest.raises(abo.InvalidValueError, match="value"):
        study.tell(batch[0].id, float("nan"))
    with pytest.raises(abo.TrialNotFoundError, match="trial_id"):
        study.tell(999, 1.0)
    with pytest.raises(abo.SearchSpaceError, match="x"):
        study.enqueue({"x": 9.0, "lr": 0.01, "n": 1, "opt": "sgd"})
    with pytest.raises(abo.StudyNotFoundError, match="name"):
        client.load_study("never-created")
    with pytest.raises(abo.DuplicatedStudyError):
        client.create_study(SPACE, name=study_name, strategy="random")
    with pytest.raises(abo.SearchSpaceError, match="space"):
        client.create_study({"x": abo.Float(0, 1)}, name=study_name, load_if_exists=True)
    with pytest.raises(abo.UnknownStrategyError):
        client.create_study(SPACE, name=study_name + "-b", strategy="nope")
    assert study.fail(batch[0].id, "diverged").state is abo.TrialState.FAILED
    lost = study.lose(batch[1].id, "node died")
    assert lost.state is abo.TrialState.LOST
    assert study.lose(batch[1].id, "node died").state is abo.TrialState.LOST  # a retried lose
    assert study.heartbeat(batch[2].id).state is abo.TrialState.RUNNING
    pending = study.pending
    assert {t.id for t in pending} == {batch[2].id}
    assert len(study) == 4 and study.best.id == trial.id
    again = client.load_study(study_name)
    assert [t.id for t in again.trials] == [1, 2, 3, 4]


def test_optimize_with_threads_against_the_service(
    client: Client, server: Server, study_name: str
) -> None:
    study = client.create_study(SPACE, name=study_name, strategy="random", seed=1)

    def slow(p: dict) -> float:
        time.sleep(0.02)
        return objective(p)

    with ThreadExecutor(4) as executor:
        result = study.optimize(slow, n_trials=20, n_workers=4, executor=executor)
    assert result.n_done == 20
    trials = client.load_study(study_name).trials
    done = [t for t in trials if t.state is abo.TrialState.DONE]
    assert len(done) == 20
    assert all(t.value == pytest.approx(objective(t.params)) for t in done)
    assert all("worker" in t.info and t.info["finished"] >= t.info["started"] for t in done)
    assert result.best.value == min(t.value for t in done)
    remote = client.load_study(study_name).trials_dataframe()
    local = abo.load_study(study_name, storage=server.storage).trials_dataframe()
    assert remote.equals(local) and len(remote) == 20  # the same table over HTTP
    assert remote["worker"].notna().all() and (remote["eval_seconds"] >= 0.02).all()


@pytest.mark.slow
def test_optimize_with_dask_against_the_service(client: Client, study_name: str) -> None:
    study = client.create_study(SPACE, name=study_name, strategy="random", seed=2)
    with DaskExecutor(n_workers=2) as executor:
        result = study.optimize(objective, n_trials=8, n_workers=2, executor=executor)
    assert result.n_done == 8
    workers = {t.info["worker"] for t in study.trials if t.state is abo.TrialState.DONE}
    assert workers and all(":" in w for w in workers)


@pytest.mark.slow
def test_client_retries_until_the_server_is_back(tmp_path) -> None:
    """A request made while the server is down succeeds once it is up (backoff, no error)."""
    import threading

    srv = Server(f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "r.log")
    client = Client(srv.url, retries=12, backoff=0.2)  # up to ~2 minutes of waiting
    starter = threading.Thread(target=srv.start)
    starter.start()
    try:
        study = client.create_study(SPACE, name="late", strategy="random", seed=0)
        assert study.name == "late"
    finally:
        starter.join()
        srv.stop()
        client.close()


class LosesAnswers(httpx.HTTPTransport):
    """Sends each request to the real server, but loses the answer of the first ``n`` of each
    action (the server did the work; the client sees a connection error and retries)."""

    ACTIONS = ("/ask", "/tell", "/fail", "/lose", "/heartbeat", "/api/v1/studies")

    def __init__(self, n: int = 2) -> None:
        super().__init__()
        self.n = n
        self.lost: dict[str, int] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        action = next((a for a in self.ACTIONS if request.url.path.endswith(a)), None)
        if request.method == "POST" and action and self.lost.get(action, 0) < self.n:
            self.lost[action] = self.lost.get(action, 0) + 1
            response.read()
            response.close()
            raise httpx.ReadError(f"injected: the answer to {request.url.path} was lost")
        return response


def test_lost_answers_never_double_ask_or_double_tell(server: Server, study_name: str) -> None:
    transport = LosesAnswers(n=2)
    with Client(server.url, transport=transport, backoff=0.01) as client:
        study = client.create_study(SPACE, name=study_name, strategy="random", seed=3)
        with ThreadExecutor(2) as executor:
            result = study.optimize(objective, n_trials=6, executor=executor)
        extra = study.ask()
        assert study.heartbeat(extra.id).state is abo.TrialState.RUNNING
        assert study.fail(extra.id, "diverged").state is abo.TrialState.FAILED
        assert study.lose(study.ask().id, "gone").state is abo.TrialState.LOST
    assert all(count == 2 for count in transport.lost.values()), transport.lost
    assert len(transport.lost) == len(LosesAnswers.ACTIONS)
    with Client(server.url) as plain:
        trials = plain.load_study(study_name).trials
    assert result.n_done == 6
    done = [t for t in trials if t.state is abo.TrialState.DONE]
    # every ask whose answer was lost was answered again with the same trial: none orphaned
    assert len(trials) == 8 and len(done) == 6
    assert all(t.value == pytest.approx(objective(t.params)) for t in done)


def test_delete_study_from_the_client(client: Client, study_name: str) -> None:
    study = client.create_study(SPACE, name=study_name, strategy="random", seed=0)
    held = client.load_study(study_name)  # another user of the same study
    t = held.ask()
    study.delete()
    with pytest.raises(abo.StudyNotFoundError):
        client.load_study(study_name)
    with pytest.raises(abo.StudyNotFoundError, match=study_name):
        held.tell(t.id, 1.0)
    with pytest.raises(abo.StudyNotFoundError):
        client.delete_study(study_name)


def test_a_study_of_two_objectives_over_http_has_a_front_and_a_hypervolume(
    client: Client, study_name: str
) -> None:
    outcomes = {"loss": "minimize", "cost": "minimize"}
    study = client.create_study(SPACE, name=study_name, outcomes=outcomes, seed=3)
    assert study.strategy == "auto"
    with pytest.raises(abo.AboError, match="reference_point: no trial is done yet"):
        study.hypervolume()
    running = study.ask_batch(2, n_workers=2)
    for _ in range(10):  # two in flight, the oldest told first
        trial = running.pop(0)
        x = trial.params["x"]
        study.tell(trial.id, {"loss": (x - 0.2) ** 2 + trial.params["lr"], "cost": abs(x + 1)})
        running.append(study.ask(n_workers=2))
    modelled = [t for t in study.trials if t.proposal and t.proposal.arm == "qlognehvi"]
    assert modelled  # the default proposes by hypervolume on the service too
    done = [t for t in study.trials if t.state is abo.TrialState.DONE]

    def beaten(a: abo.Trial) -> bool:
        return any(
            all(o.values[k] <= a.values[k] for k in outcomes)
            and any(o.values[k] < a.values[k] for k in outcomes)
            for o in done
        )

    assert [t.id for t in study.best_trials] == [t.id for t in done if not beaten(t)]
    ref = study.reference_point()
    assert set(ref) == set(outcomes)
    hv = study.hypervolume()
    assert hv > 0 and study.hypervolume(ref) == pytest.approx(hv)
    assert study.hypervolume({"loss": ref["loss"] + 1, "cost": ref["cost"] + 1}) > hv
    given = {"loss": 1.0, "cost": 3.0}  # a declared reference point, known before any result
    declared = client.create_study(
        SPACE, name=f"{study_name}-ref", outcomes=outcomes, seed=3, reference_point=given
    )
    assert declared.reference_point() == given and declared.spec.reference_point == given
    with pytest.raises(abo.AboError) as err:
        client.create_study(
            SPACE, name=f"{study_name}-bad", outcomes=outcomes, reference_point={"loss": 1.0}
        )
    assert err.value.field == "reference_point.cost"
    with pytest.raises(abo.AboError) as err:
        study.hypervolume({"loss": 1.0})
    assert err.value.field == "reference_point.cost"
    with pytest.raises(abo.AboError, match="use best_trials"):
        _ = study.best


def test_parameter_constraints_over_http(server) -> None:
    from abo.service import Client

    space = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(0.0, 1.0), "k": abo.Int(0, 4)})
    rules = ["x + y <= 1", "x - 0.1*k >= 0"]
    study = Client(server.url).create_study(
        space, "linear-http", parameter_constraints=rules, strategy="random", seed=0
    )
    assert study.spec.parameter_constraints == tuple(rules)
    with pytest.raises(abo.AboError, match="parameter_constraints"):
        study.enqueue({"x": 0.9, "y": 0.9, "k": 0})
    assert all(not (t.params["x"] + t.params["y"] > 1 + 1e-9) for t in study.ask_batch(8))


@pytest.mark.slow
def test_a_constrained_study_of_two_objectives_over_http_keeps_its_front_feasible(
    client: Client, study_name: str
) -> None:
    """The default (constrained qLogNEHVI) on the service: the constraint's GP is fitted and
    recorded like the objectives', and the front holds feasible trials only."""
    outcomes = {"loss": "minimize", "cost": "minimize", "width": "<= 1.0"}
    study = client.create_study(SPACE, name=study_name, outcomes=outcomes, seed=3)
    assert study.strategy == "auto" and [c.name for c in study.spec.constraints] == ["width"]
    running = study.ask_batch(2, n_workers=2)
    for _ in range(10):
        trial = running.pop(0)
        x = trial.params["x"]
        values = {"loss": (x - 0.2) ** 2, "cost": abs(x + 1), "width": abs(x) * 2}
        study.tell(trial.id, values)
        running.append(study.ask(n_workers=2))
    modelled = [t for t in study.trials if t.proposal and t.proposal.arm == "qlognehvi"]
    assert modelled and any(
        k.startswith("constraint.width:") for k in modelled[-1].proposal.model.hypers
    )
    front = study.best_trials
    assert front and all(t.values["width"] <= 1.0 for t in front)
    infeasible = [
        t for t in study.trials if t.state is abo.TrialState.DONE and t.values["width"] > 1.0
    ]
    assert not {t.id for t in infeasible} & {t.id for t in front}


def _trainer(params: dict, trial: abo.TrialHandle) -> float:
    loss = 0.0
    for epoch in range(1, 6):
        loss = objective(params) + 1.0 / epoch
        if trial.report(epoch, loss):
            break
    return loss


@pytest.mark.slow
def test_a_remote_study_takes_reports_from_dask_workers_and_stops_trials(
    client: Client, study_name: str
) -> None:
    study = client.create_study(
        SPACE,
        name=study_name,
        strategy="random",
        seed=6,
        stopping={"rule": "median", "min_trials": 2},
    )
    with DaskExecutor(n_workers=2) as executor:
        result = study.optimize(_trainer, n_trials=10, executor=executor)
    assert result.n_done + result.n_stopped == 10 and result.n_stopped > 0
    reports = study.reports()
    for t in study.trials:
        assert reports[t.id][-1].value == pytest.approx(t.value)
        assert len(reports[t.id]) == 5 or t.state is abo.TrialState.STOPPED
    trial = study.ask()
    assert study.report(trial.id, 1, 0.5) is False
    assert [r.step for r in study.reports(trial.id)[trial.id]] == [1.0]
    with pytest.raises(abo.InvalidValueError, match="value: must be finite"):
        study.report(trial.id, 2, float("nan"))
    with pytest.raises(abo.AboError, match="steps must increase"):
        study.report(trial.id, 0.5, 0.4)
