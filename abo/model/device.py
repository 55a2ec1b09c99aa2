"""Where the GP and the acquisition search run: a study's ``device`` setting resolved in this
process (``"auto"``: the first CUDA device when torch sees one, else the CPU).

The proposer moves the model's data, the busy points and the bounds to the device, and
everything a fit or a strategy makes follows its inputs' device (as BoTorch's own code
does), so nothing is set globally and CPU proposals stay exactly what they were. Draws
from a study's seeded generator are made on the CPU and moved: a seed means the same
numbers on either device (a GPU's arithmetic still differs from a CPU's in the last bits).
"""

from __future__ import annotations

import torch

from abo.core.exceptions import AboError
from abo.model.options import DEVICE_FORM, DEVICES


def resolve_device(name: str) -> torch.device:
    """The ``torch.device`` a study's ``device`` setting means in this process; a CUDA device
    torch cannot use is an ``AboError`` naming ``device``."""
    if not isinstance(name, str) or not DEVICE_FORM.match(name):
        raise AboError(f"device: expected {DEVICES}, got {name!r}", field="device")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise AboError(
                f"device: {name!r} was asked for, but torch sees no CUDA device here "
                "(use 'auto' to take one only when present)",
                field="device",
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise AboError(
                f"device: {name!r} does not exist here (torch sees "
                f"{torch.cuda.device_count()} CUDA device(s))",
                field="device",
            )
    return device
