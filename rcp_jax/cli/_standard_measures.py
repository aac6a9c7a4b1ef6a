"""Standard qrel measures (P@k, RR, AP, R@k, any ``ir_measures`` name) per (system, query), for ``rcp-jax evaluate``.

ir_measures (the optional ``[ir]`` extra) computes them with trec_eval's conventions: every document of the run
is ranked (no pool restriction), ties go by score then doc id descending, grades of at least 1 are relevant.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from rcp_jax.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

#: Measures computed when --qrels is given without --measures (and ir_measures is installed).
DEFAULT_MEASURES = "P@10,RR,AP,R@100"
#: trec_eval's names of the ir_measures families whose only parameter is a cut-off (or none).
_TREC_NAMES = {"P": "P", "R": "recall", "RR": "recip_rank", "AP": "map", "nDCG": "ndcg_cut", "Rprec": "Rprec",
               "Bpref": "bpref", "SetP": "set_P", "SetR": "set_recall", "SetF": "set_F", "Success": "success"}
INSTALL_HINT = 'pip install "rcp-jax[ir]"'


def import_ir_measures():
    """The ir_measures module, or a DataError naming the extra that installs it."""
    try:
        import ir_measures
    except ImportError:
        raise DataError(f"--measures needs ir_measures, which is not installed: {INSTALL_HINT}") from None
    return ir_measures


def parse_measures(text: str) -> list:
    """ir_measures measure objects of a comma-separated list such as ``P@10,RR,AP,R@100`` (order kept, repeats
    dropped); a DataError names a measure ir_measures does not know."""
    ir_measures = import_ir_measures()
    out = {}
    for name in (part.strip() for part in text.split(",")):
        if not name:
            continue
        try:
            with warnings.catch_warnings():  # ir_measures 0.4 parses with ast.Num (deprecated since Python 3.12)
                warnings.simplefilter("ignore", DeprecationWarning)
                measure = ir_measures.parse_measure(name)
        except Exception as err:  # ir_measures raises NameError, ValueError or SyntaxError by case
            raise DataError(f"--measures: {name!r} is not an ir_measures measure ({err}); write them as "
                            f"ir_measures does, e.g. {DEFAULT_MEASURES}") from None
        out.setdefault(str(measure), measure)
    if not out:
        raise DataError(f"--measures is empty; give e.g. {DEFAULT_MEASURES}, or leave it out")
    return list(out.values())


def trec_name(measure) -> str:
    """trec_eval's name of an ir_measures measure (``P@10`` -> ``P_10``, ``RR`` -> ``recip_rank``, ``AP`` ->
    ``map``, ``R@100`` -> ``recall_100``); its ir_measures name when trec_eval has no plain equivalent."""
    params = dict(measure.params)
    cutoff = params.pop("cutoff", None)
    base = _TREC_NAMES.get(measure.NAME)
    if base is None or params or (cutoff is not None and base in ("recip_rank", "map", "Rprec", "bpref")):
        return str(measure)
    return base if cutoff is None else f"{base}_{cutoff}"


def measure_table(run: pd.DataFrame, qrels: pd.DataFrame, measures: list) -> pd.DataFrame:
    """Each measure per (system, query) of ``run``, one ir_measures pass per system.

    Args:
        run: ``system, query_id, doc_id, score`` (every row is ranked).
        qrels: ``query_id, doc_id, grade`` (integral grades; relevance as trec_eval reads it).
        measures: from :func:`parse_measures`.

    Returns:
        DataFrame ``system, query_id`` and one float column per measure named ``str(measure)``; NaN where the
        query has no qrels (trec_eval leaves such a query out).
    """
    import numpy as np
    import pandas as pd

    ir_measures = import_ir_measures()
    grades = qrels["grade"].to_numpy(dtype=np.float64)
    if not np.all(grades == np.round(grades)):
        raise DataError(f"--measures: qrels {qrels.attrs.get('source', '')} hold non-integral grades; trec_eval's "
                        "measures read whole-number relevance levels (round the grades, or leave --measures out)")
    q = pd.DataFrame({"query_id": qrels["query_id"].astype(str), "doc_id": qrels["doc_id"].astype(str),
                      "relevance": grades.astype(np.int64)})
    names = [str(m) for m in measures]
    rows = []
    for system, part in run.groupby("system", sort=True):
        r = pd.DataFrame({"query_id": part["query_id"].astype(str), "doc_id": part["doc_id"].astype(str),
                          "score": part["score"].astype(np.float64)})
        values: dict[str, dict[str, float]] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            for metric in ir_measures.iter_calc(measures, q, r):
                values.setdefault(str(metric.query_id), {})[str(metric.measure)] = float(metric.value)
        for query_id in pd.unique(r["query_id"]):
            got = values.get(query_id, {})
            rows.append({"system": str(system), "query_id": query_id, **{n: got.get(n, np.nan) for n in names}})
    return pd.DataFrame(rows, columns=["system", "query_id", *names])
