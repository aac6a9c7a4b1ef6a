"""Per-query arrays spread over devices: a 1-D mesh over a ``"queries"`` axis, padding, placement, and maps.

A model whose queries are independent given a few shared parameters (the block Laplace's query blocks) puts the
leading (query) axis of its per-query arrays on a mesh of the devices it is given, one contiguous slice of
queries per device. The query count is padded to a multiple of the device count; what a padding row holds is
the caller's choice (a dummy query that adds nothing to the shared parameters). Nothing here changes
process-wide state: the mesh is an ordinary value passed along, and with one device every function is the
identity (no mesh, no padding, no copies).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

#: The mesh axis the query axis is split over.
AXIS = "queries"


def query_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh | None:
    """A 1-D mesh over ``devices`` (default: ``jax.devices()``), or None for a single device (nothing to spread)."""
    devices = list(jax.devices() if devices is None else devices)
    if len(devices) < 2:
        return None
    return Mesh(np.asarray(devices), (AXIS,))


def padded_count(n_queries: int, mesh: Mesh | None) -> int:
    """``n_queries`` rounded up to a multiple of the mesh's devices (itself without a mesh)."""
    if mesh is None:
        return n_queries
    d = mesh.devices.size
    return -(-n_queries // d) * d


def pad_rows(a, total: int, fill=0):
    """``a`` float/int[Q, ...] with rows ``Q..total-1`` set to ``fill`` (a JAX array; ``a`` itself when no rows
    are added)."""
    extra = total - a.shape[0]
    if extra == 0:
        return a
    a = jnp.asarray(a)
    return jnp.concatenate([a, jnp.full((extra,) + a.shape[1:], fill, a.dtype)])


def put_rows(tree, mesh: Mesh | None):
    """Every array of ``tree`` placed with its leading axis split over the mesh (unchanged without a mesh); each
    leading axis must be a multiple of the device count (:func:`padded_count`)."""
    if mesh is None:
        return tree
    rows = NamedSharding(mesh, PartitionSpec(AXIS))
    return jax.tree_util.tree_map(lambda a: jax.device_put(a, rows), tree)


def over_queries(fn: Callable, mesh: Mesh | None, per_query: Sequence[bool]) -> Callable:
    """``fn`` run on each device's own queries: ``fn``'s positional arguments are per-query (split over the mesh,
    ``per_query[i]`` True) or shared (replicated, False), and its outputs are all per-query. Without a mesh,
    ``fn`` itself. Use it inside ``jax.jit`` around a sequential per-query loop (``lax.map``), which would
    otherwise run over the whole split axis on every device."""
    if mesh is None:
        return fn
    specs = tuple(PartitionSpec(AXIS) if p else PartitionSpec() for p in per_query)
    return jax.shard_map(fn, mesh=mesh, in_specs=specs, out_specs=PartitionSpec(AXIS), check_vma=False)
