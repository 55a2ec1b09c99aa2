"""Kill the server (SIGKILL) mid-study: every acknowledged tell is still there afterwards."""

from __future__ import annotations

import threading

import httpx
import pytest

import abo
from abo.service import Client

from .conftest import SPACE, Server, objective


@pytest.mark.slow
def test_every_acknowledged_tell_survives_a_crash(tmp_path) -> None:
    srv = Server(f"sqlite:///{tmp_path / 'crash.db'}", tmp_path / "crash.log").start()
    acked: dict[int, float] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def worker() -> None:
        with Client(srv.url, retries=0) as client:
            study = client.load_study("crash")
            while not stop.is_set():
                try:
                    trial = study.ask()
                    value = objective(trial.params)
                    stored = study.tell(trial.id, value)
                except (httpx.TransportError, abo.AboError):
                    return  # the server died under us: this tell was never acknowledged
                with lock:
                    acked[stored.id] = stored.value

    try:
        with Client(srv.url) as client:
            client.create_study(SPACE, name="crash", strategy="random", seed=0)
        threads = [threading.Thread(target=worker) for _ in range(8)]
        for th in threads:
            th.start()
        while len(acked) < 40:
            threads[0].join(0.05)
        srv.kill()
        stop.set()
        for th in threads:
            th.join(30)
        assert srv.proc is not None and srv.proc.returncode == -9
        srv.start()  # same storage, a fresh process on the same port
        with Client(srv.url) as client:
            trials = {t.id: t for t in client.load_study("crash").trials}
        assert len(acked) >= 40
        for trial_id, value in acked.items():
            assert trials[trial_id].state is abo.TrialState.DONE
            assert trials[trial_id].value == value
    finally:
        stop.set()
        srv.stop()
