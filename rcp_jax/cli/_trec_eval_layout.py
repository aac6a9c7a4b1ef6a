"""Per-query values in trec_eval's ``-q`` layout, one ``<system>.eval`` file per system (``rcp-jax evaluate --trec-q``).

Each line is ``measure <TAB> query_id <TAB> value`` (the measure name left-aligned in 22 characters, as
trec_eval prints it): first every query's values, query by query, then per measure an ``all`` line with the mean
over the queries listed for it, and a ``runid all <system>`` line, as ``trec_eval -q`` ends its output. Values
are written in full precision (shortest repr of the float64, not trec_eval's 4 decimals). A query without a value
for a measure (no qrels, no positive qrel) has no line for it, as trec_eval leaves unjudged queries out.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

from rcp_jax.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

_NDCG_NAMES = {"rcp_ndcg": "rcp_ndcg_cut", "count_ndcg": "count_ndcg_cut", "qrel_ndcg": "ndcg_cut"}


def ndcg_measure_name(column: str, first_k: int) -> str | None:
    """trec_eval-style name of an nDCG column of the per-query table: ``rcp_ndcg`` at the first cut-off 10 ->
    ``rcp_ndcg_cut_10``, ``qrel_ndcg@20`` -> ``ndcg_cut_20``; None for other columns."""
    base, _, k = column.partition("@")
    if base not in _NDCG_NAMES or (k and not k.isdigit()):
        return None
    return f"{_NDCG_NAMES[base]}_{k or first_k}"


def trec_q_text(per_query: pd.DataFrame, names: dict[str, str], system: str) -> str:
    """One system's block: ``names`` maps per-query columns to measure names (in output order)."""
    part = per_query.loc[per_query["system"].astype(str) == system]
    if "dataset" in part.columns and part["dataset"].nunique() > 1:  # query ids may repeat across datasets
        qids = part["dataset"].astype(str) + ":" + part["query_id"].astype(str)
    else:
        qids = part["query_id"].astype(str)
    lines, sums = [], {c: [0.0, 0] for c in names}
    for qid, (_, row) in zip(qids, part.iterrows()):
        for column, measure in names.items():
            value = float(row[column])
            if math.isnan(value):
                continue
            lines.append(f"{measure:<22}\t{qid}\t{value!r}")
            sums[column][0] += value
            sums[column][1] += 1
    lines.append(f"{'runid':<22}\tall\t{system}")
    for column, measure in names.items():
        total, n = sums[column]
        if n:
            lines.append(f"{measure:<22}\tall\t{total / n!r}")
    return "\n".join(lines) + "\n"


def write_trec_q(per_query: pd.DataFrame, names: dict[str, str], folder: Path) -> list[Path]:
    """``<system>.eval`` per system into ``folder`` (created); a system name's characters other than letters,
    digits, ``.``, ``_`` and ``-`` become ``_``. Returns the paths written."""
    from rcp_jax.data.atomic import atomic_write_text

    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for system in sorted(per_query["system"].astype(str).unique()):
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", system).lstrip(".") or "system"
        if stem in files:
            raise DataError(f"--trec-q: systems {files[stem]!r} and {system!r} both map to the file name "
                            f"{stem}.eval; rename one (--runs NAME=PATH)")
        files[stem] = system
    paths = []
    for stem, system in files.items():
        paths.append(atomic_write_text(folder / f"{stem}.eval", trec_q_text(per_query, names, system)))
    return paths
