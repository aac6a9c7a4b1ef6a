"""Per-query lookups of document texts (or latent relevances) given in either of two shapes.

- a corpus shared by every query: ``{doc_id: value}`` (a BEIR corpus), or
- per query: ``{query_id: {doc_id: value}}`` (document ids only meaningful within their query).

The shape is read from the values: mappings mean per query. An empty mapping is a corpus.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypeVar

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
