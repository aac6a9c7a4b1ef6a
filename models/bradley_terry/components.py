"""Connected components of each query's comparison graph (documents linked when they shared a window)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _components(linked: jax.Array, mask: jax.Array, degree: jax.Array | None = None):
    """Label propagation (smallest index wins) over ``linked: bool[Q, N, N]``; see :func:`connected_components`.

    Shortcut: a graph in which every vertex is linked to at least half of the others is connected
    (any two vertices share a neighbour or are adjacent), which a tournament's dense comparison graphs
    almost always satisfy; then one degree count replaces the propagation passes. ``degree`` (int[Q, N],
    links to other real documents) may be passed in when it was counted elsewhere.
    """
    adj = linked & mask[:, :, None] & mask[:, None, :]
    n = mask.shape[1]
    big = jnp.int32(n)
    arange = jnp.arange(n, dtype=jnp.int32)[None, :]
    labels0 = jnp.where(mask, arange, big)
    size = mask.sum(axis=1)
    if degree is None:
        degree = (adj & ~jnp.eye(n, dtype=bool)).sum(axis=2)
    dense = jnp.all(jnp.where(mask, 2 * degree >= size[:, None] - 1, True), axis=1) | (size <= 1)

    def body(state):
        labels, _ = state
        neigh = jnp.where(adj, labels[:, None, :], big).min(axis=2)
        new = jnp.minimum(labels, neigh)
        return new, jnp.any(new != labels)

    def propagate(_):
        return jax.lax.while_loop(lambda s: s[1], body, (labels0, jnp.bool_(True)))[0]

    def shortcut(_):
        first = jnp.argmax(mask, axis=1).astype(jnp.int32)
        return jnp.where(mask, first[:, None], big)

    labels = jax.lax.cond(jnp.all(dense), shortcut, propagate, None)
    # queries that are not all dense still get exact labels from the propagation
    roots = mask & (labels == arange)
    return jnp.where(mask, labels, -1), roots.sum(axis=1)


@jax.jit
def connected_components(wins: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Connected components of each query's comparison graph.

    Args:
        wins: float[Q, N, N]; documents a and b are linked when they shared a window.
        mask: bool[Q, N] real documents.

    Returns:
        (labels int[Q, N]: smallest document index of the component, -1 on padding;
        n_components int[Q]).
    """
    return _components((wins + jnp.swapaxes(wins, 1, 2)) > 0, mask)
