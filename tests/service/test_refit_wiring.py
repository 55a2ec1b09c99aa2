"""The service opens studies with background refits, so asks never wait for a GP fit."""

from __future__ import annotations

from pathlib import Path

import abo
from abo.service.state import ServiceState as _State


def test_service_studies_refit_in_the_background(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'abo.db'}"
    created = abo.create_study(abo.Space({"x": abo.Float(0, 1)}), name="s", storage=url)
    assert created.config.refit == "auto"  # the stored policy is untouched...
    state = _State(created.storage)
    assert state.study("s")._models.mode == "background"  # ...the service overrides it
    assert state.remember(created)._models.mode == "background"
    assert abo.load_study("s", storage=url)._models.mode == "auto"
