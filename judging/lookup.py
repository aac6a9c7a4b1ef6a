"""Per-query lookups of document texts (or latent relevances) given in either of two shapes.

- a corpus shared by every query: ``{doc_id: value}`` (a BEIR corpus), or
- per query: ``{query_id: {doc_id: value}}`` (document ids only meaningful within their query).

The shape is read from the values: mappings mean per query. An empty mapping is a corpus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from rcp_jax.judging.errors import JudgeInputError

if TYPE_CHECKING:
    from rcp_jax.judging.store.records import Window

V = TypeVar("V")


class PerQuery(Generic[V]):
    """``get(query_id, doc_id)`` over either shape; see the module docstring."""

    def __init__(self, data: Mapping[str, V] | Mapping[str, Mapping[str, V]], what: str = "documents") -> None:
        self._data = data
        self.what = what
        first = next(iter(data.values()), None) if len(data) else None
        self.per_query = isinstance(first, Mapping)

    def get(self, query_id: str, doc_id: str) -> V:
        """The value for (query, doc); raises ``KeyError`` when absent."""
        if self.per_query:
            return self._data[query_id][doc_id]  # type: ignore[index]
        return self._data[doc_id]  # type: ignore[return-value]

    def has(self, query_id: str, doc_id: str) -> bool:
        try:
            self.get(query_id, doc_id)
        except KeyError:
            return False
        return True

    def items_for(self, query_id: str) -> Mapping[str, V]:
        """All (doc id -> value) a query can see: its own mapping, or the whole corpus."""
        if self.per_query:
            return self._data.get(query_id, {})  # type: ignore[return-value]
        return self._data  # type: ignore[return-value]


def check_window_inputs(windows: Sequence[Window], docs: PerQuery[str], queries: Mapping[str, str]) -> None:
    """Refuse before any call when a query text or a document text is missing."""
    missing_q = sorted({w.query_id for w in windows if w.query_id not in queries})
    if missing_q:
        raise JudgeInputError(
            f"no query text for {len(missing_q)} quer{'y' if len(missing_q) == 1 else 'ies'} of the windows "
            f"(first: {missing_q[:5]}); pass queries={{query_id: text}} covering every window"
        )
    missing_d = [(w.query_id, d) for w in windows for d in w.doc_ids if not docs.has(w.query_id, d)]
    if missing_d:
        shape = "documents[query_id][doc_id]" if docs.per_query else "documents[doc_id]"
        raise JudgeInputError(
            f"no text for {len(missing_d)} window document(s) (first (query, doc): {missing_d[:5]}); "
            f"every document of every window needs its text in {shape}"
        )
