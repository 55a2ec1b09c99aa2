"""The model of where evaluations fail: a GP classifier of success against failure.

A failed trial (the objective raised, diverged, returned NaN or timed out) says its
parameters are bad; a lost one (a worker died) says nothing and is not used. The classifier is
the Dirichlet-based GP classification of Milios et al. (2018) reduced to its one quantity that
matters here, the log-odds of success: GPyTorch's ``DirichletClassificationLikelihood``
turns each label into Gaussian pseudo-observations of the two classes' log-concentrations,
and one GP regresses their difference (about +6.6 for a success, -6.6 for a failure) with
their fixed noise (``TARGET_NOISE``) and otherwise the same surrogate, refit schedule and
background fitting as the objective's (``abo.model.refit``), so its hyperparameters are recorded
like the GP's. The probability of success at ``x``
(``abo.acquisitions.feasibility.log_success``) is the logistic function of that latent
difference integrated over its posterior, by the probit approximation
``sigmoid(mu / sqrt(1 + pi sigma^2 / 8))`` (MacKay 1992): smooth and differentiable, so
acquisition searches can weigh by it.

Example:
    >>> import torch
    >>> success_targets(torch.tensor([True, False])).reshape(-1).round(decimals=2).tolist()
    [6.58, -6.58]
"""

from __future__ import annotations

import torch
from gpytorch.likelihoods import DirichletClassificationLikelihood
from torch import Tensor

ALPHA_EPSILON = 0.01  # GPyTorch's default: the Dirichlet prior's concentration per class


def _target_noise() -> float:
    """The variance of a target (the same for either label): the two classes' Dirichlet
    pseudo-observation variances, ``log(1 / alpha + 1)`` each, added."""
    likelihood = DirichletClassificationLikelihood(
        torch.tensor([0, 1]), alpha_epsilon=ALPHA_EPSILON, dtype=torch.double
    )
    return float(likelihood.noise[:, 0].sum())


TARGET_NOISE = _target_noise()
"""The fixed observation noise of the classifier's GP (about 5.3 on targets of about +-6.6):
fixed, as in Dirichlet classification, so the GP cannot interpolate the labels with spikes."""


def success_targets(success: Tensor) -> Tensor:
    """``n x 1`` regression targets for ``n`` labels (``True``: the trial succeeded): the
    difference of the success and failure classes' Dirichlet pseudo-observations."""
    labels = success.to(torch.long).reshape(-1)
    likelihood = DirichletClassificationLikelihood(
        labels, alpha_epsilon=ALPHA_EPSILON, learn_additional_noise=False, dtype=torch.double
    )
    targets = likelihood.transformed_targets  # 2 x n: failure, success
    return (targets[1] - targets[0]).reshape(-1, 1).to(torch.double)
