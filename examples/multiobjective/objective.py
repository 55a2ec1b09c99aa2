"""The objective of ``study.toml``: one asynchronous SGD training run (``../async_sgd``),
scored twice, by its validation loss and by the seconds it took.

The two pull apart: more epochs, smaller batches and fewer worker threads (less staleness)
buy a lower loss with more time. A run that diverges raises ``Diverged``, and its trial is
failed with the reason; accuracy and the number of updates are kept as the trial's metadata.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "async_sgd"))

import torch  # noqa: E402
from trainer import train  # noqa: E402


def loss_and_time(params: dict[str, Any]) -> dict[str, float]:
    """``{"val_loss", "seconds"}`` (the study's two objectives) and metadata."""
    torch.set_num_threads(1)  # the parallelism is the trainer's worker threads
    out = train(params)
    return {
        "val_loss": out["value"],
        "seconds": out["seconds"],
        "accuracy": out["accuracy"],
        "updates": out["updates"],
    }
