"""Proposal rounds on a real Dask cluster (worker processes): the same points as in this
process, made on the worker the study's rounds go to."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

import abo
from abo.executors import DaskExecutor
from abo.propose.remote import ClusterProposals
from abo.study.study import Study

SPACE = abo.Space({"x": abo.Float(0.0, 1.0), "y": abo.Float(-1.0, 1.0)})


def _told(storage: str, name: str) -> abo.Study:
    study = abo.create_study(
        SPACE, name=name, storage=storage, strategy="thompson", seed=3, n_initial=3, refit="sync"
    )
    for trial in study.ask_batch(3):
        study.tell(trial.id, (trial.params["x"] - 0.3) ** 2 + trial.params["y"] ** 2)
    return study


def test_a_study_proposes_on_a_worker_what_it_would_propose_here(tmp_path: Path) -> None:
    here = _told(f"sqlite:///{tmp_path / 'here.db'}", "same")
    there = _told(f"sqlite:///{tmp_path / 'there.db'}", "same")
    with DaskExecutor(n_workers=2) as ex:
        workers = set(ex.client.scheduler_info()["workers"])
        cluster = ClusterProposals(ex.client)
        remote = Study(there.storage, there.record, proposals=cluster)
        first, again = remote.ask_batch(2), remote.ask_batch(1)
        cluster.close()  # not its client: the executor's stays open
        assert ex.client.status == "running"
    local = here.ask_batch(2) + here.ask_batch(1)
    assert [t.params for t in first + again] == [t.params for t in local]
    where = {t.proposal.details["proposed_on"] for t in first + again}
    assert len(where) == 1 and where <= workers  # one worker serves the study's rounds
    assert all("proposed_on" not in t.proposal.details for t in local)
    assert [t.proposal.strategy for t in first] == ["thompson", "thompson"]


def test_a_scheduler_that_cannot_be_reached_is_named() -> None:
    with pytest.raises(abo.AboError, match="dask_scheduler"):
        ClusterProposals("tcp://127.0.0.1:1", timeout=2)
    with pytest.raises(abo.AboError, match="dask_scheduler"):
        ClusterProposals("")


def _ask(api: httpx.Client, log: Path) -> dict:
    """One trial from the service, retrying its 503s as abo's client does (they say "ask
    again"); any other answer fails with its status, body and the server's log."""
    for _ in range(5):
        response = api.post("/studies/far/ask", json={})
        if response.status_code != 503:
            break
        time.sleep(float(response.headers.get("Retry-After", "1")))
    assert response.status_code == 200, (response.status_code, response.text, log.read_text())
    return response.json()["trials"][0]


def test_abo_serve_runs_its_proposal_rounds_on_the_cluster(tmp_path: Path) -> None:
    from distributed import LocalCluster

    from tests.service.conftest import Server

    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        worker = next(iter(cluster.scheduler_info["workers"]))
        args = ("--dask-scheduler", cluster.scheduler_address)
        server = Server(f"sqlite:///{tmp_path / 'abo.db'}", tmp_path / "log", args=args).start()
        try:
            api = httpx.Client(base_url=server.url + "/api/v1", timeout=120)
            body = {"name": "far", "space": SPACE.to_json(), "strategy": "thompson", "seed": 1}
            assert api.post("/studies", json={**body, "n_initial": 2}).status_code == 201
            for _ in range(3):
                trial = _ask(api, tmp_path / "log")
                value = (trial["params"]["x"] - 0.3) ** 2
                told = api.post(f"/studies/far/trials/{trial['id']}/tell", json={"value": value})
                assert told.status_code == 200, told.text
            records = [t["proposal"] for t in api.get("/studies/far/trials").json()["trials"]]
        finally:
            server.stop()
    assert [r["strategy"] for r in records] == ["sobol", "sobol", "thompson"]
    assert records[2]["details"]["proposed_on"] == worker


def test_optimize_makes_its_proposals_on_the_cluster_it_is_given(tmp_path: Path) -> None:
    from distributed import LocalCluster

    from abo.executors import ThreadExecutor

    def objective(p: dict) -> float:
        return (p["x"] - 0.3) ** 2 + p["y"] ** 2

    study = abo.create_study(SPACE, storage=f"sqlite:///{tmp_path / 'o.db'}", seed=1,
                             strategy="thompson", n_initial=3)  # fmt: skip
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster:  # fmt: skip
        worker = next(iter(cluster.scheduler_info["workers"]))
        with ThreadExecutor(2) as evaluations:
            result = study.optimize(objective, n_trials=8, executor=evaluations,
                                    proposals=cluster.scheduler_address)  # fmt: skip
    assert result.n_done == 8
    modelled = [t for t in study.trials if t.proposal and t.proposal.strategy == "thompson"]
    assert len(modelled) >= 4
    assert {t.proposal.details.get("proposed_on") for t in modelled} == {worker}
    assert study.proposals is None  # the study proposes here again after the run


def test_optimize_names_proposals_when_its_cluster_is_wrong() -> None:
    study = abo.create_study(SPACE, seed=1)
    with pytest.raises(abo.AboError, match="^proposals: expected a Dask scheduler's address"):
        study.optimize(lambda p: 0.0, n_trials=1, n_workers=1, proposals=7)
    assert study.trials == []  # nothing started


@pytest.mark.slow
def test_a_study_file_sends_its_proposals_to_the_cluster_it_names(tmp_path: Path) -> None:
    from distributed import LocalCluster

    from tests.cli.test_config import run_file

    (tmp_path / "objective.py").write_text("def f(p):\n    return (p['x'] - 0.3) ** 2\n")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster:  # fmt: skip
        worker = next(iter(cluster.scheduler_info["workers"]))
        (tmp_path / "study.toml").write_text(
            '[study]\nname = "far"\nstorage = "sqlite:///far.db"\nstrategy = "thompson"\n'
            "seed = 2\nn_initial = 2\nn_trials = 5\n\n"
            '[space]\nx = {type = "float", low = 0, high = 1}\n\n'
            '[objective]\nfunction = "objective:f"\n\n'
            '[executor]\nkind = "threads"\nn_workers = 1\n'
            f'proposals = "{cluster.scheduler_address}"\n'
        )
        run_file(tmp_path / "study.toml")
    study = abo.load_study("far", storage=f"sqlite:///{tmp_path / 'far.db'}")
    where = {t.proposal.details.get("proposed_on") for t in study.trials if t.proposal}
    assert len(study.trials) == 5 and where == {worker}
