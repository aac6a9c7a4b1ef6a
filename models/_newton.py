"""Batched Levenberg-Marquardt Newton for many small independent smooth problems.

Used where every problem has a few dozen to a few hundred parameters (Rasch per query, the rubric-only
2PL): exact Hessians from autodiff, a per-problem damping ``mu`` that shrinks after an accepted step
and grows after a rejected one, so the iteration is a descent method far from the optimum and plain
Newton near it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp


@partial(jax.jit, static_argnames=("fun", "max_iter", "derivs"))
def lm_newton(
    fun: Callable, y0: jax.Array, args, *, max_iter: int = 100, tol: float = 1e-6, derivs: Callable | None = None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Minimise ``fun(y, *args_b)`` independently for every batch element b.

    Args:
        fun: scalar objective of one problem, ``fun(y: float[P], *args) -> float``.
        y0: float[B, P] starting points.
        args: tuple of arrays with leading batch axis B.
        max_iter: iteration cap.
        tol: stop once every problem's last accepted step has max-norm below ``tol``.
        derivs: optional ``derivs(y, *args) -> (grad float[P], hess float[P, P])`` of one problem, for
            objectives whose exact derivatives are cheaper in closed form than by autodiff (default:
            ``jax.grad`` and ``jax.hessian`` of ``fun``). Pass a module-level function: it is a static
            argument, so a new object per call would recompile.

    Returns:
        (y float[B, P], iterations int, converged bool[B]).
    """
    value = jax.vmap(fun)
    if derivs is None:
        grad = jax.vmap(jax.grad(fun))
        hess = jax.vmap(jax.hessian(fun))

        def grad_hess(y, *a):
            return grad(y, *a), hess(y, *a)
    else:
        grad_hess = jax.vmap(derivs)
    p = y0.shape[1]
    eye = jnp.eye(p, dtype=y0.dtype)
    eps = jnp.finfo(y0.dtype).eps

    def body(state):
        y, mu, f, it, step_norm = state
        g, h = grad_hess(y, *args)
        scale = jnp.maximum(jnp.abs(jnp.diagonal(h, axis1=1, axis2=2)).max(axis=1), 1e-12)
        damped = h + (mu * scale)[:, None, None] * eye
        delta = jnp.linalg.solve(damped, g[..., None])[..., 0]
        delta = jnp.where(jnp.isfinite(delta), delta, 0.0)
        y_new = y - delta
        f_new = value(y_new, *args)
        accept = jnp.isfinite(f_new) & (f_new <= f + 16 * eps * (jnp.abs(f) + 1.0))
        y = jnp.where(accept[:, None], y_new, y)
        f = jnp.where(accept, f_new, f)
        mu = jnp.where(accept, jnp.maximum(mu / 4.0, 1e-10), jnp.minimum(mu * 8.0, 1e10))
        step_norm = jnp.where(accept, jnp.abs(delta).max(axis=1), jnp.where(mu >= 1e10, 0.0, jnp.inf))
        return y, mu, f, it + 1, step_norm

    def cond(state):
        *_, it, step_norm = state
        return (it < max_iter) & jnp.any(step_norm > tol)

    b = y0.shape[0]
    state = (y0, jnp.full(b, 1e-3, y0.dtype), value(y0, *args), 0, jnp.full(b, jnp.inf, y0.dtype))
    y, _, _, iters, step_norm = jax.lax.while_loop(cond, body, state)
    return y, iters, step_norm <= tol
