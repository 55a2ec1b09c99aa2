"""Strategies that propose new points while other evaluations are still running.

Importing this package registers the built-in strategies by name (see ``abo.strategies()``).
"""

from abo.acquisitions import (  # noqa: F401 - registration side effects
    aegis,
    auto,
    believer,
    local_penalization,
    multifidelity,
    parego,
    portfolio,
    qlognehvi,
    qlognei,
    random,
    thompson,
    trust_region,
    ucb,
)
from abo.acquisitions.base import Proposal, ProposalContext, Strategy

__all__ = ["Proposal", "ProposalContext", "Strategy"]
