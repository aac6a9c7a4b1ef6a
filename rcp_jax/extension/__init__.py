"""Extend a judged pool with a new reranker, without re-judging it or refitting anything shared.

- :func:`extend` (and :func:`extend_async`): the whole flow, from a run to an extended calibration.
- :func:`plan_extension`: the new documents, anchors and windows, before any call (``--estimate``).
- :func:`find_new_documents`, :func:`top_documents`: which documents of a run a calibration lacks.
- :func:`anchored_scores`, :func:`place_documents`: the anchored BT fit and the gains it gives.
- :func:`read_extension_log`: what each extension added to a store, and when.

Modules: :mod:`~rcp_jax.extension.new_documents`, :mod:`~rcp_jax.extension.placement`,
:mod:`~rcp_jax.extension.log`, :mod:`~rcp_jax.extension.driver`; the windows are in
:mod:`rcp_jax.schedule.anchors`, the model in :mod:`rcp_jax.models.anchored`.
"""

from rcp_jax.extension.driver import (
    ExtensionPlan,
    ExtensionResult,
    ExtensionWarning,
    check_store,
    extend,
    extend_async,
    plan_extension,
)
from rcp_jax.extension.log import read_extension_log
from rcp_jax.extension.new_documents import find_new_documents, top_documents
from rcp_jax.extension.placement import anchor_agreement, anchored_scores, place_documents, rubric_check

__all__ = [
    "ExtensionPlan",
    "ExtensionResult",
    "ExtensionWarning",
    "anchor_agreement",
    "anchored_scores",
    "check_store",
    "extend",
    "extend_async",
    "find_new_documents",
    "place_documents",
    "plan_extension",
    "read_extension_log",
    "rubric_check",
    "top_documents",
]
