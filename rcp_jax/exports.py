"""A fitted calibration in formats other tools read: float gains, integer-scaled TREC qrels, the MTEB float-gain
qrels layout, and the posterior draws of the gains.

Every ``*_table`` function returns a DataFrame; every ``write_*`` function writes one file atomically (the
file appears whole or not at all) and returns its path.

Why an integer-scaled qrels file: trec_eval, pytrec_eval and ir_measures read integer relevance only
(pytrec_eval raises ``Expected relevance to be integer`` on a float), and ranx 0.3 rounds a float grade to an
integer, so RCP gains in (0, 1) become 0. Grades ``round(gain * TREC_SCALE)`` keep six decimals; nDCG is a
ratio of gain sums, so the scale cancels and a tool's nDCG on the scaled grades equals RCP-nDCG (up to
the rounding, at most ``0.5 / TREC_SCALE`` per gain).

Why 10**6 and not more: trec_eval's nDCG (hence pytrec_eval's and ir_measures') allocates an array of one
entry per relevance level up to the largest grade, for every query: grades up to 10**9 cost ~7 GB and ~5 s
per query, 10**7 ~0.1 GB and ~25 ms, 10**6 ~1 ms (pytrec_eval 0.5, measured).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rcp_jax.calibration import Calibration
from rcp_jax.errors import DataError

#: Integer-scaled qrels: grade = round(gain * TREC_SCALE) (gains lie in (0, 1)); see the module docstring
#: for why not more decimals.
TREC_SCALE = 10**6
#: Formats of :func:`write_export` (``rcp-jax export --format``).
EXPORT_FORMATS = ("gains", "trec", "mteb", "draws")
_TABLE_EXTENSIONS = (".csv", ".tsv", ".parquet")


def uncalibrated_queries(calibration: Calibration) -> list[str]:
    """Ids of the queries of ``calibration`` with no calibrated gain (no rubric answers: gains NaN)."""
    d = calibration.documents
    have = set(d.loc[d["gain"].notna(), "query_id"].astype(str))
    return sorted(set(d["query_id"].astype(str)) - have)


def gains_table(calibration: Calibration, posterior=None) -> pd.DataFrame:
    """Float gains of every calibrated document.

    Columns ``query_id, doc_id, gain, count_gain`` (``gain``: the calibrated RCP gain in (0, 1) that
    ``rcp-jax evaluate`` scores with; ``count_gain``: the share of passed rubric criteria, NaN without
    rubric placements). With a :class:`rcp_jax.bayes.posterior.Posterior` also ``gain_mean, gain_lo, gain_hi,
    interval``: the posterior mean and the equal-tailed interval of each gain at probability ``interval``
    (e.g. 0.95; NaN for a document the posterior lacks). Documents of uncalibrated queries are left out
    (:func:`uncalibrated_queries` names them).
    """
    d = calibration.documents
    out = d.loc[d["gain"].notna(), ["query_id", "doc_id", "gain", "count_gain"]].copy()
    out["query_id"], out["doc_id"] = out["query_id"].astype(str), out["doc_id"].astype(str)
    if posterior is not None:
        post = posterior.documents[["query_id", "doc_id", "gain_mean", "gain_lo", "gain_hi"]].copy()
        post["query_id"], post["doc_id"] = post["query_id"].astype(str), post["doc_id"].astype(str)
        out = out.merge(post, on=["query_id", "doc_id"], how="left")
        out["interval"] = float(posterior.ci_prob)
    return out.reset_index(drop=True)


def trec_qrels_table(calibration: Calibration, *, scale: int = TREC_SCALE) -> pd.DataFrame:
    """Integer-scaled qrels ``query_id, iteration, doc_id, grade``: ``grade = round(gain * scale)``, at least 1.

    A calibrated gain is positive, so its document stays relevant: a gain below ``0.5 / scale`` (which would
    round to grade 0, and grade 0 means non-relevant to trec_eval: left out of the ideal list and of
    recall-type measures) gets grade 1. ``iteration`` is always 0. Uncalibrated queries are left out.
    """
    if not isinstance(scale, (int, np.integer)) or not 1 <= scale <= 2**31 - 1:
        raise DataError(f"scale must be an integer in [1, 2**31 - 1] (grades fit an int32), got {scale!r}")
    g = gains_table(calibration)
    grade = np.maximum(np.rint(g["gain"].to_numpy(np.float64) * scale), 1).astype(np.int64)
    return pd.DataFrame({"query_id": g["query_id"], "iteration": 0, "doc_id": g["doc_id"], "grade": grade})


def mteb_qrels_table(calibration: Calibration) -> pd.DataFrame:
    """The MTEB float-gain layout ``query-id, corpus-id, gain``: BEIR's qrels columns, the float gain in the third."""
    g = gains_table(calibration)
    return pd.DataFrame({"query-id": g["query_id"], "corpus-id": g["doc_id"], "gain": g["gain"]})


def draws_table(posterior, *, draws: int | None = None) -> pd.DataFrame:
    """Posterior draws of the gains, long: ``draw, query_id, doc_id, gain`` (float32 gains as stored).

    ``draw`` numbers the posterior's draws 0..S-1 (chains flattened); ``draws=N`` keeps N of them evenly
    spaced over the S (thinning; all S when N >= S or None). Documents of uncalibrated queries are left out.
    """
    g = np.asarray(posterior.gain_draws)
    n_total = g.shape[0]
    if draws is not None and draws < 1:
        raise DataError(f"--draws must be a positive number of draws, got {draws}")
    keep = np.arange(n_total) if draws is None or draws >= n_total else \
        np.unique(np.round(np.linspace(0, n_total - 1, draws)).astype(int))
    inputs = posterior.inputs
    calibrated = posterior.documents.loc[posterior.documents["gain_mean"].notna(), ["query_id", "doc_id"]]
    wanted = set(zip(calibrated["query_id"].astype(str), calibrated["doc_id"].astype(str)))
    frames = []
    for qi, q in enumerate(inputs.query_ids):
        docs = [str(d) for d in inputs.doc_ids[qi, : int(inputs.n_docs[qi])]]
        cols = [i for i, d in enumerate(docs) if (str(q), d) in wanted]
        if not cols:
            continue
        block = g[np.ix_(keep, [qi], cols)][:, 0, :]  # [draws, docs]
        frames.append(pd.DataFrame({
            "draw": np.repeat(keep, len(cols)), "query_id": str(q),
            "doc_id": np.tile(np.asarray([docs[i] for i in cols], dtype=object), len(keep)),
            "gain": block.reshape(-1),
        }))
    if not frames:
        return pd.DataFrame({"draw": pd.Series(dtype=int), "query_id": pd.Series(dtype=str),
                             "doc_id": pd.Series(dtype=str), "gain": pd.Series(dtype=np.float32)})
    return pd.concat(frames, ignore_index=True).sort_values(["draw", "query_id", "doc_id"], kind="stable",
                                                            ignore_index=True)


def trec_header(scale: int = TREC_SCALE) -> str:
    """The optional comment line of an integer-scaled qrels file (most readers refuse it: see the README)."""
    return f"# rcp-jax integer-scaled qrels: grade = round(gain * {scale}); gain = grade / {scale}\n"


def write_trec_qrels(table: pd.DataFrame, path, *, header: bool = False, scale: int = TREC_SCALE) -> Path:
    """Write :func:`trec_qrels_table` as ``query_id 0 doc_id grade`` lines (``.gz``: gzipped), atomically.

    ``header=True`` adds :func:`trec_header` as a first line; pytrec_eval, ir_measures and ranx refuse it,
    and trec_eval expects four fields a line, so it is off by default.
    """
    from rcp_jax.data.formats import _write_text

    _check_ids(table, "query_id", "doc_id")
    lines = (f"{q} 0 {d} {int(g)}\n" for q, d, g in zip(table["query_id"], table["doc_id"], table["grade"]))
    path = Path(path)
    _write_text(path, (trec_header(scale) if header else "") + "".join(lines))
    return path


def write_table(table: pd.DataFrame, path) -> Path:
    """Write a table as CSV, TSV or Parquet by ``path``'s extension (``.csv.gz``, ``.tsv.gz`` too), atomically."""
    from rcp_jax.data.formats import _write_table, detect_format

    path = Path(path)
    fmt = detect_format(path) if _table_suffix(path) else None
    if fmt not in ("csv", "tsv", "parquet"):
        raise DataError(f"{path}: write a table as .csv, .tsv or .parquet (optionally .csv.gz / .tsv.gz); "
                        f"got {''.join(path.suffixes) or 'no extension'}")
    _write_table(table, path, fmt)
    return path


def write_mteb_qrels(table: pd.DataFrame, path) -> Path:
    """Write :func:`mteb_qrels_table` as a tab-separated file with the header ``query-id corpus-id gain``."""
    from rcp_jax.data.formats import _write_table

    _check_ids(table, "query-id", "corpus-id")
    path = Path(path)
    _write_table(table, path, "tsv")
    return path


def _table_suffix(path: Path) -> bool:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in _TABLE_EXTENSIONS


def _check_ids(table: pd.DataFrame, *columns: str) -> None:
    """Whitespace-separated and tab-separated files cannot hold an id with whitespace: refuse it by name."""
    for col in columns:
        bad = table.loc[table[col].astype(str).str.contains(r"\s", regex=True), col]
        if len(bad):
            raise DataError(f"{col} {bad.iloc[0]!r} holds whitespace, which the qrels format cannot hold; export "
                            "--format gains (CSV/Parquet) instead")


__all__ = [
    "EXPORT_FORMATS",
    "TREC_SCALE",
    "draws_table",
    "gains_table",
    "mteb_qrels_table",
    "trec_header",
    "trec_qrels_table",
    "uncalibrated_queries",
    "write_mteb_qrels",
    "write_table",
    "write_trec_qrels",
]
