"""Acquisition optimisation (and fast posterior pieces) shared by the model-based strategies.

Quasi-random raw samples pick the starting points of a few L-BFGS-B searches (BoTorch's
``optimize_acqf``); one extra start sits at the best observed point, where the optimum of an
exploitative acquisition usually is (Optuna's GPSampler does the same, and it matters once the
model is good).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.acquisition.analytic import LogExpectedImprovement, _log_ei_helper
from botorch.models.model import Model
from botorch.models.transforms.outcome import Standardize
from botorch.optim import optimize_acqf
from botorch.optim.initializers import gen_batch_initial_conditions
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.models import ExactGP
from linear_operator.operators import LinearOperator
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor
from torch.quasirandom import SobolEngine

from abo.acquisitions.base import Proposal, ProposalContext
from abo.acquisitions.moments import MaternMoments

if TYPE_CHECKING:
    from abo.acquisitions.feasibility import Feasibility

SIGMA_FLOOR = 1e-8  # the least standardised posterior std (keeps ratios and logs finite)


def kernel(module: Kernel, A: Tensor, B: Tensor | None = None, diag: bool = False) -> Tensor:
    """The dense kernel matrix ``k(A, B)`` (``B`` defaults to ``A``), or its diagonal.

    The kernel's own ``forward`` (its math, and its gradient: the same numbers) without
    ``Kernel.__call__``'s lazily evaluated tensor and checks, an overhead paid on each of an
    acquisition search's many small evaluations. A kernel restricted to ``active_dims`` at
    the top takes the full call, which applies them.
    """
    B = A if B is None else B
    if getattr(module, "active_dims", None) is not None:
        out = module(A, B, diag=diag)
    else:
        out = module.forward(A, B, diag=diag)
    return out.to_dense() if isinstance(out, LinearOperator) else out


class PosteriorMoments(Protocol):
    """The marginal moments abo reads from ``model.posterior``: BoTorch's ``Posterior`` does not
    declare them, but the posteriors of the models abo fits (GPyTorch and transformed ones) have
    them."""

    @property
    def mean(self) -> Tensor: ...

    @property
    def variance(self) -> Tensor: ...


@dataclass(frozen=True)
class OptimizerBudget:
    """How hard to search the acquisition surface (per point)."""

    raw_samples: int = 512
    num_restarts: int = 6
    maxiter: int = 100
    # L-BFGS-B stops when the relative change of the value falls below factr * 2.2e-16 (here
    # about 2e-6, scipy's default 2e-9): the same maxima to four digits on Hartmann-6, in a
    # quarter fewer evaluations
    factr: float = 1e10


def sobol_points(ctx: ProposalContext, n: int, seed: int) -> Tensor:
    """``n x d`` scrambled Sobol points inside ``ctx.bounds``."""
    unit = SobolEngine(ctx.dim, scramble=True, seed=seed).draw(n, dtype=torch.double)
    lo, hi = ctx.bounds.to(torch.double)
    return lo + (hi - lo) * unit


def incumbent(ctx: ProposalContext) -> Tensor:
    """``1 x d``: the observed point with the best utility; of several objectives, the one
    whose worst standardised utility is best (a balanced point of the Pareto front)."""
    Y = ctx.Y
    if Y.shape[-1] > 1:
        Z = (Y - Y.mean(dim=0)) / Y.std(dim=0).nan_to_num(1.0).clamp_min(1e-12)
        return ctx.X[Z.min(dim=-1).values.argmax()].unsqueeze(0)
    return ctx.X[Y.squeeze(-1).argmax()].unsqueeze(0)


def maximize(
    acq: AcquisitionFunction,
    ctx: ProposalContext,
    budget: OptimizerBudget = OptimizerBudget(),
    seed_points: Tensor | None = None,
) -> tuple[Tensor, float]:
    """Maximise a ``q = 1`` acquisition over the cube; return the ``1 x d`` best and its value.

    Args:
        acq: an acquisition taking ``b x 1 x d``.
        ctx: the proposal context (bounds, generator, observations).
        budget: raw samples, restarts and iterations.
        seed_points: ``k x d`` extra starting points (the incumbent is always one).
    """
    starts = gen_batch_initial_conditions(
        acq,
        ctx.bounds,
        q=1,
        num_restarts=budget.num_restarts,
        raw_samples=budget.raw_samples,
        options={"seed": ctx.seed()},
        inequality_constraints=ctx.inequality_constraints,  # None: none
    )
    extra = [incumbent(ctx)] if ctx.X.shape[0] else []
    if seed_points is not None and seed_points.numel():
        extra.append(seed_points)
    if extra:
        more = torch.cat(extra).to(starts)
        more = more[ctx.satisfies(more)]  # a search inside the constraints starts inside
        starts = torch.cat([starts, more.unsqueeze(1)], dim=0)
    options: dict[str, bool | float | int | str] = {"maxiter": budget.maxiter}
    if not ctx.inequality_constraints:
        options["factr"] = budget.factr  # L-BFGS-B's; SLSQP (with constraints) has no factr
    X, value = optimize_acqf(
        acq,
        bounds=ctx.bounds,
        q=1,
        num_restarts=starts.shape[0],
        batch_initial_conditions=starts,
        options=options,
        retry_on_optimization_warning=False,
        inequality_constraints=ctx.inequality_constraints,
    )
    assert value is not None  # optimize_acqf returns the values (return_acq_values=True)
    return X.detach(), float(value.max())


def outcome_scale(model: Model) -> tuple[Tensor | float, Tensor | float]:
    """``(shift, scale)`` that map the model's outputs to its standardised scale."""
    tf = getattr(model, "outcome_transform", None)
    if isinstance(tf, Standardize):
        return tf.means.reshape(-1)[0], tf.stdvs.reshape(-1)[0]
    return 0.0, 1.0


def _plain_exact_gp(model: Model) -> bool:
    """Whether ``model`` is a plain single-output exact GP whose outcome transform is
    ``Standardize`` or none, so that the latent GP is the model on its standardised scale."""
    tf = getattr(model, "outcome_transform", None)
    return (
        isinstance(model, ExactGP)
        and model.num_outputs == 1
        and getattr(model, "batch_shape", None) == torch.Size([])
        and (tf is None or isinstance(tf, Standardize))
        and model.train_inputs[0].dim() == 2
    )


def _exact_gp_ready(model: Model, X: Tensor) -> bool:
    """Whether ``model`` is a ``_plain_exact_gp``, with its prediction caches built."""
    if not _plain_exact_gp(model):
        return False
    gp = cast(ExactGP, model)  # what _plain_exact_gp checked
    if gp.training or gp.prediction_strategy is None:
        with torch.no_grad():
            model.posterior(X[:1].detach())  # evaluation mode and the prediction caches
    return gp.prediction_strategy.mean_cache.dim() == 1


@dataclass(frozen=True)
class Solves:
    """An exact GP's training solves on its standardised scale: the lower Cholesky factor ``L``
    of ``K + noise`` over the training points, and ``alpha = (K + noise)^-1 (y - m)``.

    A posterior variance ``k(x, x) - ||L^-1 k(X, x)||^2`` is then one triangular solve per
    point, half the flops of the product with GPyTorch's dense inverse root (which costs
    another cubic inversion to build on every new model), and no ``model.posterior`` call is
    needed to get here.
    """

    L: Tensor
    alpha: Tensor

    def project(self, cross: Tensor) -> Tensor:
        """``L^-1 k(X, x)`` for ``k x n`` kernel rows: ``n x k``, differentiable in them."""
        return torch.linalg.solve_triangular(self.L, cross.transpose(-1, -2), upper=False)

    @cached_property
    def Linv(self) -> Tensor:
        """``L^-1``, explicit (once per model): ``MaternMoments``' products."""
        eye = torch.eye(self.L.shape[0], dtype=self.L.dtype, device=self.L.device)
        return torch.linalg.solve_triangular(self.L, eye, upper=False)

    def moments(self, gp: ExactGP) -> MaternMoments | None:
        """``gp``'s ``MaternMoments`` on its training points (once per model), or ``None``
        where its kernel is not abo's."""
        if "_moments" not in self.__dict__:  # a frozen dataclass: cache beside the fields
            train = gp.train_inputs[0]
            found = MaternMoments.of(gp, train, self.Linv.to(train), self.alpha.to(train))
            self.__dict__["_moments"] = found
        return cast("MaternMoments | None", self.__dict__["_moments"])


def _key(gp: ExactGP) -> tuple[tuple[int, ...], Tensor]:
    """What a model's solves depend on: its training tensors (by identity and in-place
    version) and its parameters' values (a refit may write them through ``.data``, which no
    version counter sees)."""
    data = tuple(v for t in (gp.train_inputs[0], gp.train_targets) for v in (id(t), t._version))
    params = [p.detach().reshape(-1) for p in gp.parameters()]
    return data, torch.cat(params) if params else torch.zeros(0)


def solves(model: Model) -> Solves | None:
    """The model's ``Solves`` (computed once per model and data), or ``None`` where the model
    is not a ``_plain_exact_gp`` with a Gaussian likelihood."""
    if not _plain_exact_gp(model):
        return None
    gp = cast(ExactGP, model)  # what _plain_exact_gp checked
    if not isinstance(gp.likelihood, GaussianLikelihood | FixedNoiseGaussianLikelihood):
        return None
    if gp.training:
        gp.eval()  # BoTorch stores the transformed training inputs in evaluation mode
    key = _key(gp)
    cached = getattr(gp, "_abo_solves", None)
    if cached is not None and cached[0][0] == key[0] and torch.equal(cached[0][1], key[1]):
        return cast(Solves, cached[1])
    with torch.no_grad():
        train = gp.train_inputs[0]
        n = train.shape[0]
        noise = gp.likelihood.noise.detach().reshape(-1).to(train)
        if noise.numel() not in (1, n):
            return None
        K = kernel(gp.covar_module, train) + torch.diag(noise.expand(n))
        L = psd_safe_cholesky(K)
        resid = (gp.train_targets - gp.mean_module(train)).unsqueeze(-1)
        alpha = torch.cholesky_solve(resid, L).squeeze(-1)
    out = Solves(L=L.detach(), alpha=alpha.detach())
    gp._abo_solves = (key, out)  # one model's cache (a torch Module takes attributes)
    return out


def latent_mean(model: Model, X: Tensor) -> Tensor | None:
    """Standardised posterior mean at ``k x d`` points, without any posterior variance.

    For a single-output exact GP (``Standardize`` or no outcome transform) it is the latent
    mean ``m(x) + k(x, X_train) K^-1 (y - m)``: one kernel row per point against the solved
    ``K^-1 (y - m)`` (``solves``), differentiable in ``X``. ``model.posterior`` would also
    solve for every point's variance (``O(n^2)`` each). ``None`` for any other model: use
    ``model.posterior``.
    """
    sol = solves(model)
    if sol is None:
        return None
    gp = cast(ExactGP, model)  # what solves checked
    Xt = gp.transform_inputs(X)
    cross = kernel(gp.covar_module, Xt, gp.train_inputs[0])  # k x n
    return gp.mean_module(Xt) + cross @ sol.alpha.to(cross)


def posterior_mean(model: Model, X: Tensor) -> Tensor:
    """The posterior mean at ``k x d`` points on the model's original scale (``k``), without
    gradients: ``latent_mean``'s one kernel row per point where it applies (no variances, no
    per-point posterior objects), else ``model.posterior`` point by point."""
    with torch.no_grad():
        fast = latent_mean(model, X)
        if fast is not None:
            tf = getattr(model, "outcome_transform", None)
            if tf is not None:
                fast = tf.means.reshape(()) + tf.stdvs.reshape(()) * fast
            return fast.reshape(-1)
        return cast(PosteriorMoments, model.posterior(X.unsqueeze(-2))).mean.reshape(-1)


def latent_mean_std(model: Model, X: Tensor, grad: bool = False) -> tuple[Tensor, Tensor] | None:
    """Marginal latent mean and std at ``k x d`` points, from the model's ``solves``.

    The standardised-scale posterior of ``latent_mean``'s models: ``var = k(x, x) - ||L^-1
    k(X_train, x)||^2``, the same numbers as ``model.posterior`` without its per-point batch
    overhead (which dominates an acquisition search's many small evaluations). ``grad=True``
    keeps the graph to ``X`` (the solves are constants), for gradient-based acquisition
    search: abo's own GPs then take ``MaternMoments``' closed-form gradient. ``None`` for
    other models.
    """
    with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
        sol = solves(model)
        if sol is None:
            return None
        gp = cast(ExactGP, model)  # what solves checked
        fast = sol.moments(gp) if grad else None
        if fast is not None:
            return fast(X)
        Xt = gp.transform_inputs(X)
        cross = kernel(gp.covar_module, Xt, gp.train_inputs[0])
        mean = gp.mean_module(Xt) + cross @ sol.alpha.to(cross)
        prior = kernel(gp.covar_module, Xt, diag=True)
        var = prior - sol.project(cross).pow(2).sum(-2)
        # with gradients, a floor keeps d sqrt(var) finite where the variance vanishes
        return mean, var.clamp_min(1e-16 if grad else 0.0).sqrt()


class Believed:
    """An exact GP's posterior as if ``m x d`` busy points had been observed at their posterior
    mean (the kriging believer's model), without building that model.

    Believing a point at its mean leaves the posterior mean unchanged everywhere; the variance
    loses what the busy points would explain: ``var(x) - c(x)^T S^-1 c(x)``, with ``c(x)`` the
    posterior covariance between ``x`` and the busy points and ``S`` theirs plus the
    observation noise (what ``condition_on_observations`` gives their fantasies). Everything
    comes from the GP's ``solves`` (``latent_mean_std``'s pieces), so an
    evaluation is one kernel row against the data and one against the busy points, and no
    fantasy model (a low-rank update of every cache) is made per proposal.
    """

    def __init__(self, model: Model, X_busy: Tensor) -> None:
        sol = solves(model)
        if sol is None or not isinstance(model.likelihood, GaussianLikelihood):
            raise TypeError(
                f"Believed: needs a single-output exact GP with one noise level, got "
                f"{type(model).__name__}"
            )
        self.gp = cast(ExactGP, model)
        self.solves = sol
        with torch.no_grad():
            self.busy = self.gp.transform_inputs(X_busy.to(sol.alpha))
            cross = kernel(self.gp.covar_module, self.busy, self.gp.train_inputs[0])
            self.busy_proj = sol.project(cross)  # n x m: L^-1 k(X, b)
            prior = kernel(self.gp.covar_module, self.busy)
            noise = self.gp.likelihood.noise.detach().reshape(())  # standardised scale
            S = prior - self.busy_proj.T @ self.busy_proj
            S = S + noise * torch.eye(S.shape[0], dtype=S.dtype)
            self.chol = psd_safe_cholesky(0.5 * (S + S.T))
        self.moments = self._moments()

    def _moments(self) -> MaternMoments | None:
        """``MaternMoments`` on the data and the busy points together (``None`` where the
        kernel is not abo's): the inverse Cholesky factor of both is the data's ``L^-1``
        bordered by ``C^-1 [-B L^-1, I]``, with ``B = (L^-1 k(X, b))^T`` and ``C`` the busy
        points' factor, ``chol``."""
        train = self.gp.train_inputs[0]
        if self.busy.shape[0] == 0:
            return self.solves.moments(self.gp)
        with torch.no_grad():
            Linv = self.solves.Linv.to(train)
            m = self.busy.shape[0]
            eye = torch.eye(m, dtype=train.dtype, device=train.device)
            Cinv = torch.linalg.solve_triangular(self.chol, eye, upper=False)
            lower = torch.cat([-Cinv @ (self.busy_proj.T @ Linv), Cinv], dim=1)
            upper = torch.cat([Linv, Linv.new_zeros(Linv.shape[0], m)], dim=1)
            both = torch.cat([train, self.busy.to(train)])
            return MaternMoments.of(
                self.gp, both, torch.cat([upper, lower]), self.solves.alpha.to(train)
            )

    @staticmethod
    def supported(model: Model, X: Tensor) -> bool:
        """Whether ``model`` is a GP ``Believed`` takes (else build the fantasy model)."""
        return (
            isinstance(model, ExactGP)
            and isinstance(model.likelihood, GaussianLikelihood)
            and (solves(model) is not None)
        )

    def mean_std(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """Standardised latent mean and std at ``k x d`` points, differentiable in ``X``."""
        if self.moments is not None:
            return self.moments(X)
        gp = self.gp
        Xt = gp.transform_inputs(X)
        train = gp.train_inputs[0]
        n = train.shape[0]
        # one kernel call against the data and the busy points together
        both = kernel(gp.covar_module, Xt, torch.cat([train, self.busy.to(train)]))
        cross = both[..., :n]  # k x n
        proj = self.solves.project(cross)  # n x k
        mean = gp.mean_module(Xt) + cross @ self.solves.alpha.to(Xt)
        var = kernel(gp.covar_module, Xt, diag=True) - proj.pow(2).sum(-2)
        if self.busy.shape[0]:
            c = both[..., n:] - proj.transpose(-1, -2) @ self.busy_proj
            v = torch.linalg.solve_triangular(self.chol, c.transpose(-1, -2), upper=False)
            var = var - v.pow(2).sum(-2)  # v: m x k
        return mean, var.clamp_min(1e-16).sqrt()

    def covariance(self, X: Tensor) -> Tensor:
        """The standardised latent posterior covariance among ``k x d`` points (``k x k``),
        the busy points believed (what the multi-fidelity strategy weighs fidelities by)."""
        gp = self.gp
        with torch.no_grad():
            Xt = gp.transform_inputs(X.to(self.solves.alpha))
            train = gp.train_inputs[0]
            n = train.shape[0]
            both = kernel(gp.covar_module, Xt, torch.cat([train, self.busy.to(train)]))
            proj = self.solves.project(both[..., :n])  # n x k
            cov = kernel(gp.covar_module, Xt) - proj.T @ proj
            if self.busy.shape[0]:
                c = both[..., n:] - proj.T @ self.busy_proj
                v = torch.linalg.solve_triangular(self.chol, c.T, upper=False)  # m x k
                cov = cov - v.T @ v
        return cov


Maximizer = Callable[[AcquisitionFunction, ProposalContext, OptimizerBudget], tuple[Tensor, float]]


def greedy_batch(
    ctx: ProposalContext,
    n: int,
    name: str,
    make_acq: Callable[[Tensor], AcquisitionFunction],
    maximizer: Maximizer,
    budget: OptimizerBudget,
) -> Proposal:
    """``n`` points chosen one at a time, each joining the busy set before the next.

    Args:
        make_acq: builds the acquisition for the current ``m x d`` busy points.
        maximizer: ``maximize`` or a seeded variant of it.
    """
    busy = ctx.X_pending.to(torch.double)
    chosen = []
    for _ in range(n):
        x, _ = maximizer(make_acq(busy), ctx, budget)
        x = ctx.round(x)
        chosen.append(x)
        busy = torch.cat([busy, x])
    return Proposal(torch.cat(chosen), [{"strategy": name} for _ in range(n)])


MAX_INCUMBENTS = 256
"""The most observed points a noisy incumbent is looked for among (the best by observed value)."""


def best_observed(X: Tensor, Y: Tensor, k: int = MAX_INCUMBENTS) -> Tensor:
    """The observed points a noisy incumbent may be: all of them up to ``k``, then the ``k``
    best observed (in their original order).

    qLogNEI's joint posterior over its baseline costs ``O(n^2)`` per sample and the believer's
    plug-in incumbent a posterior at every point: seconds an ask at thousands of results. The
    point with the best posterior mean is, short of extreme noise, among the best observed
    ones; studies with at most ``k`` results are unchanged.
    """
    if X.shape[0] <= k:
        return X
    return X[Y.reshape(-1).topk(k).indices.sort().values]


class FastLogEI(AcquisitionFunction):
    """BoTorch's analytic ``LogExpectedImprovement``, on ``latent_mean_std``'s one matrix product.

    The same value as ``LogExpectedImprovement(model, best_f)`` (BoTorch's numerically stable
    ``log h(u)`` on the same ``u = (mu - best_f) / sigma``), but an evaluation is one kernel
    row per point against the GP's cached solves instead of a GPyTorch posterior, whose
    per-call overhead (about 4 ms on 2 cores, whatever the batch) is most of an acquisition
    search's time. With ``believed`` the moments are those of the model with its busy points
    believed (``Believed``): the kriging believer's LogEI without its fantasy model. Models
    other than a plain exact GP take ``LogExpectedImprovement`` itself.

    With ``feasibility`` (a study's outcome constraints) it is BoTorch's constrained LogEI:
    the log probability that every constraint holds is added (Gardner et al. 2014).
    """

    def __init__(
        self,
        model: Model,
        best_f: float | Tensor,
        believed: Believed | None = None,
        feasibility: Feasibility | None = None,
    ) -> None:
        super().__init__(model=model)
        self.best_f: Tensor = torch.as_tensor(best_f, dtype=torch.double)
        self.believed = believed  # busy points believed at their mean (``believer``)
        self.feasibility = feasibility
        self._fallback: AcquisitionFunction | None = None

    def forward(self, X: Tensor) -> Tensor:  # b x 1 x d -> b
        value = self._log_ei(X)
        if self.feasibility is not None:
            flat = X.reshape(-1, X.shape[-1])
            value = value + self.feasibility.log_prob(flat).reshape(value.shape)
        return value

    def _log_ei(self, X: Tensor) -> Tensor:
        if self._fallback is None:
            flat = X.reshape(-1, X.shape[-1])
            if self.believed is not None:
                fast: tuple[Tensor, Tensor] | None = self.believed.mean_std(flat)
            else:
                fast = latent_mean_std(self.model, flat, grad=True)
            if fast is not None:
                mean, std = fast
                tf = getattr(self.model, "outcome_transform", None)
                if tf is not None:  # standardised -> original scale (what best_f is on)
                    loc, scale = tf.means.reshape(()), tf.stdvs.reshape(())
                    mean, std = loc + scale * mean, scale * std
                u = (mean - self.best_f.to(mean)) / std
                log_h = cast(Tensor, LogH.apply(u))
                return (log_h + std.log()).reshape(X.shape[:-2])
            self._fallback = LogExpectedImprovement(self.model, best_f=self.best_f)
        return self._fallback(X)


class LogH(torch.autograd.Function):
    """BoTorch's ``_log_ei_helper``, ``log h(u)`` with ``h(u) = phi(u) + u Phi(u)``, and its
    derivative in closed form: ``h'(u) = Phi(u)``, so ``d log h / du = exp(log Phi(u) - log
    h(u))``, stable in logs wherever the helper is. The helper's two dozen elementwise
    operations are then not recorded for autograd on every evaluation of a search."""

    @staticmethod
    def forward(ctx: Any, u: Tensor) -> Tensor:
        with torch.no_grad():
            log_h = _log_ei_helper(u)
        ctx.save_for_backward(u, log_h)
        return log_h

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        u, log_h = ctx.saved_tensors
        return grad * torch.exp(torch.special.log_ndtr(u) - log_h)


def log_softplus(a: Tensor) -> Tensor:
    """``log(log(1 + exp(a)))`` without underflow for very negative ``a``."""
    sp = torch.nn.functional.softplus(a)
    return torch.where(a < -30.0, a, sp.clamp_min(1e-300).log())


# -- the standardised posterior ---------------------------------------------------------------
def standardized_posterior(model: Model, X: Tensor) -> tuple[Tensor, Tensor]:
    """Marginal posterior mean and std at ``... x d`` points, on the standardised scale.

    Exact GPs take ``latent_mean_std``'s one matrix product (differentiable), several times
    faster per call than ``model.posterior`` over a batch of single points.
    """
    if X.dim() == 2:
        fast = latent_mean_std(model, X, grad=True)
        if fast is not None:
            mean, std = fast
            return mean, std.clamp_min(SIGMA_FLOOR)
    shift, scale = outcome_scale(model)
    post = cast(PosteriorMoments, model.posterior(X.unsqueeze(-2)))  # one point per batch
    mean = (post.mean.squeeze(-1).squeeze(-1) - shift) / scale
    std = post.variance.squeeze(-1).squeeze(-1).clamp_min(SIGMA_FLOOR**2).sqrt() / scale
    return mean, std
