"""Blind comparison of two ideal lists by LLM judges (METHOD section 5; the paper's check that the
tournament adds resolution beyond Count-nDCG).

For each query, the ideal top-k under two gain tables (by default the calibrated RCP gains and the Count
gains of one :class:`~rcp_jax.calibration.Calibration`) are shown to one or more judges as two anonymous
lists, **in both orders** (X as List A then Y as List A). A judge *decides* a query only when it picks
the same list both times; a judge that always picks the list shown first decides nothing. Per judge, and
for the majority of the judges, the report gives the decided queries and the share won by each list.

Rules, in words:

- **Ideal list**: a query's documents sorted by gain, highest first, cut at k. Ties (frequent under
  Count gains, which are shares of passed criteria) are broken by a seeded random order per query, never
  by the other table's gains, so a coarse gain cannot borrow the finer one's resolution.
- Queries whose two lists are **identical** (same documents in the same order) are not asked; they are
  counted as ``identical``. Queries missing from either table are counted as ``missing``.
- **Majority**: in each order, the list named by more than half of the judges that answered (an even
  split names none); the majority decides a query when both orders' majority picks name the same list.
  **Unanimous**: every judge decided the query for the same list. Both need at least two judges.
- The share of each list is over decided queries; ``p_binomial`` is the two-sided exact binomial test of
  a 50/50 split among them.

The judging goes through :func:`rcp_jax.judging.judge_windows` (stage ``"lists"``, windows of list A then list B
with ``split`` = len(A)), so answers are stored, resumed and re-used like every other judgement; any
:mod:`judging` judge works (``SimulatedJudge`` offline, ``LiteLLMJudge`` for a real model).

Example (offline)::

    from rcp_jax.judging import SimulatedJudge
    from rcp_jax.list_compare import compare_ideal_lists_sync
    result = compare_ideal_lists_sync(calibration, judges=[SimulatedJudge(latent, seed=s) for s in (0, 1, 2)],
                                      store="store/", documents=texts, queries=queries, k=10)
    print(result.to_text())
    result.summary        # one row per judge (+ majority, unanimous)
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from rcp_jax.errors import DataError
from rcp_jax.judging import JudgementStore, judge_windows
from rcp_jax.judging.store.records import Judgement, Window

__all__ = [
    "ListComparison",
    "compare_ideal_lists",
    "compare_ideal_lists_sync",
    "ideal_lists",
    "list_decisions",
    "list_pairs",
    "list_windows",
    "summarize_decisions",
]

DEFAULT_NAMES = ("rcp", "count")
MAJORITY, UNANIMOUS = "majority", "unanimous"


# ---------------------------------------------------------------------------------------- the lists
def _tie_key(seed: int, query_id: str, doc_id: str) -> int:
    digest = hashlib.sha256(f"{seed}\x1f{query_id}\x1f{doc_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def ideal_lists(gains: pd.DataFrame, *, k: int = 10, seed: int = 0) -> dict[str, tuple[str, ...]]:
    """The ideal top-``k`` of every query of a gains table.

    Args:
        gains: ``query_id, doc_id, gain`` (one row per document; NaN gains are dropped).
        k: list length (a query with fewer documents gets all of them).
        seed: seed of the tie-break (a per-query random order of the documents, from a hash of
            (seed, query id, doc id), so it does not depend on row order).

    Returns:
        ``{query_id: (doc_id, ...)}``, best first.

    Example:
        >>> g = pd.DataFrame({"query_id": ["q"] * 3, "doc_id": ["a", "b", "c"], "gain": [0.2, 0.9, 0.5]})
        >>> ideal_lists(g, k=2)
        {'q': ('b', 'c')}
    """
    if k < 1:
        raise DataError(f"k must be >= 1, got {k}")
    missing = [c for c in ("query_id", "doc_id", "gain") if c not in gains.columns]
    if missing:
        raise DataError(f"gains table lacks column(s) {missing}; expected query_id, doc_id, gain")
    g = gains.loc[gains["gain"].notna(), ["query_id", "doc_id", "gain"]].copy()
    g["query_id"] = g["query_id"].astype(str)
    g["doc_id"] = g["doc_id"].astype(str)
    dup = g.duplicated(["query_id", "doc_id"])
    if dup.any():
        row = g[dup].iloc[0]
        raise DataError(f"gains table lists document {row.doc_id!r} of query {row.query_id!r} twice; one gain per document")
    g["_tie"] = [_tie_key(seed, q, d) for q, d in zip(g["query_id"], g["doc_id"])]
    g = g.sort_values(["query_id", "gain", "_tie"], ascending=[True, False, True], kind="stable")
    return {q: tuple(part["doc_id"].head(k)) for q, part in g.groupby("query_id", sort=True)}


def list_pairs(
    first: Mapping[str, Sequence[str]],
    second: Mapping[str, Sequence[str]],
    *,
    names: tuple[str, str] = DEFAULT_NAMES,
) -> pd.DataFrame:
    """Pair the two lists of every query and say which queries are compared.

    Returns:
        One row per query in either mapping: ``query_id, list_<x>, list_<y>`` (tuples; empty when
        missing), ``overlap`` (documents in both lists), ``status``: ``compared``, ``identical`` or
        ``missing`` (the query has no list in one of the mappings).
    """
    x, y = _check_names(names)
    rows = []
    for q in sorted(set(first) | set(second)):
        a, b = tuple(first.get(q, ())), tuple(second.get(q, ()))
        status = "missing" if not a or not b else ("identical" if a == b else "compared")
        rows.append({"query_id": q, f"list_{x}": a, f"list_{y}": b, "overlap": len(set(a) & set(b)), "status": status})
    return pd.DataFrame(rows, columns=["query_id", f"list_{x}", f"list_{y}", "overlap", "status"])


def _check_names(names: Sequence[str]) -> tuple[str, str]:
    if len(names) != 2 or names[0] == names[1] or not all(isinstance(n, str) and n for n in names):
        raise DataError(f"names must be two different non-empty strings, got {names!r}")
    return names[0], names[1]


def list_windows(pairs: pd.DataFrame, *, names: tuple[str, str] = DEFAULT_NAMES) -> list[Window]:
    """Two ``"lists"`` windows per compared query: phase ``<x>_first`` (x's list as List A) and
    ``<y>_first`` (y's list as List A)."""
    x, y = _check_names(names)
    out = []
    for row in pairs[pairs["status"] == "compared"].itertuples(index=False):
        lx, ly = tuple(getattr(row, f"list_{x}")), tuple(getattr(row, f"list_{y}"))
        out.append(Window(row.query_id, "lists", f"{x}_first", 0, lx + ly, split=len(lx)))
        out.append(Window(row.query_id, "lists", f"{y}_first", 0, ly + lx, split=len(ly)))
    return out


# -------------------------------------------------------------------------------------- decisions
def list_decisions(
    judgements_by_judge: Mapping[str, Sequence[Judgement]],
    query_ids: Sequence[str],
    *,
    names: tuple[str, str] = DEFAULT_NAMES,
) -> pd.DataFrame:
    """Per (judge, query): the list picked in each order and whether the judge decided.

    Args:
        judgements_by_judge: judge name -> its valid ``"lists"`` judgements of :func:`list_windows`'s windows.
        query_ids: the compared queries (a query without a valid answer in an order is undecided).
        names: the two list names, as given to :func:`list_windows`.

    Returns:
        Columns ``judge, query_id, pick_<x>_first, pick_<y>_first`` (the winning list's name, or None
        without a valid answer), ``first_shown`` (how many of the two answers named List A), ``decided``,
        ``winner`` (name or None).
    """
    x, y = _check_names(names)
    rows = []
    for judge, judgements in judgements_by_judge.items():
        picks: dict[tuple[str, str], str] = {}
        first_shown: dict[str, int] = {}
        for j in judgements:
            w = j.window
            if w.stage != "lists" or not j.valid or j.better not in ("A", "B"):
                continue
            shown_first = w.phase.removesuffix("_first")
            if shown_first not in (x, y):
                continue
            other = y if shown_first == x else x
            picks[(w.query_id, shown_first)] = shown_first if j.better == "A" else other
            first_shown[w.query_id] = first_shown.get(w.query_id, 0) + (j.better == "A")
        for q in query_ids:
            px, py = picks.get((q, x)), picks.get((q, y))
            decided = px is not None and px == py
            rows.append({"judge": judge, "query_id": q, f"pick_{x}_first": px, f"pick_{y}_first": py,
                         "first_shown": first_shown.get(q, 0), "decided": decided, "winner": px if decided else None})
    cols = ["judge", "query_id", f"pick_{x}_first", f"pick_{y}_first", "first_shown", "decided", "winner"]
    return pd.DataFrame(rows, columns=cols)


def _majority_pick(values: pd.Series) -> str | None:
    votes = values.dropna()
    if votes.empty:
        return None
    counts = votes.value_counts()
    return str(counts.index[0]) if counts.iloc[0] * 2 > len(votes) else None


def _group_decisions(decisions: pd.DataFrame, names: tuple[str, str]) -> pd.DataFrame:
    """Majority and unanimous rows (same columns as :func:`list_decisions`) from per-judge rows."""
    x, y = names
    rows = []
    for q, part in decisions.groupby("query_id", sort=True):
        mx, my = _majority_pick(part[f"pick_{x}_first"]), _majority_pick(part[f"pick_{y}_first"])
        decided = mx is not None and mx == my
        rows.append({"judge": MAJORITY, "query_id": q, f"pick_{x}_first": mx, f"pick_{y}_first": my,
                     "first_shown": np.nan, "decided": decided, "winner": mx if decided else None})
        winners = part["winner"]
        unanimous = bool(part["decided"].all()) and winners.nunique() == 1
        rows.append({"judge": UNANIMOUS, "query_id": q, f"pick_{x}_first": None, f"pick_{y}_first": None,
                     "first_shown": np.nan, "decided": unanimous, "winner": winners.iloc[0] if unanimous else None})
    return pd.DataFrame(rows, columns=decisions.columns)


def summarize_decisions(decisions: pd.DataFrame, *, names: tuple[str, str] = DEFAULT_NAMES) -> pd.DataFrame:
    """One row per judge (and majority / unanimous when present) of a decisions table.

    Returns:
        Columns ``judge, n_queries, n_answered`` (both orders validly answered), ``n_decided,
        n_undecided, wins_<x>, wins_<y>, share_<x>, share_<y>`` (over decided queries; NaN when none),
        ``p_binomial`` (two-sided exact test of a 50/50 split), ``first_shown_rate`` (share of answers
        naming the list shown first; 0.5 = no position preference; NaN for the group rows).
    """
    x, y = _check_names(names)
    rows = []
    for judge, part in decisions.groupby("judge", sort=False):
        n = len(part)
        answered = part[f"pick_{x}_first"].notna() & part[f"pick_{y}_first"].notna()
        n_dec = int(part["decided"].sum())
        wx, wy = int((part["winner"] == x).sum()), int((part["winner"] == y).sum())
        group = judge in (MAJORITY, UNANIMOUS)
        n_answers = int(part[f"pick_{x}_first"].notna().sum() + part[f"pick_{y}_first"].notna().sum())
        rows.append({
            "judge": judge, "n_queries": n, "n_answered": int(answered.sum()) if not group or judge == MAJORITY else np.nan,
            "n_decided": n_dec, "n_undecided": n - n_dec, f"wins_{x}": wx, f"wins_{y}": wy,
            f"share_{x}": wx / n_dec if n_dec else math.nan, f"share_{y}": wy / n_dec if n_dec else math.nan,
            "p_binomial": float(stats.binomtest(wx, n_dec, 0.5).pvalue) if n_dec else math.nan,
            "first_shown_rate": (float(part["first_shown"].sum()) / n_answers) if (not group and n_answers) else math.nan,
        })
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------- result
@dataclass
class ListComparison:
    """Everything :func:`compare_ideal_lists` produced.

    Attributes:
        names: the two list names (x, y), e.g. ``("rcp", "count")``.
        k: list length.
        pairs: :func:`list_pairs` (every query, with its status).
        decisions: :func:`list_decisions` rows of every judge, then majority / unanimous rows.
        summary: :func:`summarize_decisions`.
        judges: judge name -> model string.
        calls: judge calls made by this run (0 when every answer came from the store).
        notes: what was skipped and why.
    """

    names: tuple[str, str]
    k: int
    pairs: pd.DataFrame
    decisions: pd.DataFrame
    summary: pd.DataFrame
    judges: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    notes: list[str] = field(default_factory=list)

    def to_text(self) -> str:
        """The report in words: queries compared / skipped, then one line per judge."""
        x, y = self.names
        counts = self.pairs["status"].value_counts()
        lines = [
            f"blind comparison of the ideal top-{self.k} lists, {x} vs {y}, each query shown in both orders: "
            f"{int(counts.get('compared', 0))} queries compared, {int(counts.get('identical', 0))} skipped "
            f"(identical lists), {int(counts.get('missing', 0))} skipped (no list in one table)"
        ]
        if self.summary.empty:
            return "\n".join([*lines, "no query to compare: nothing was asked", *self.notes])
        width = max([len("judge")] + [len(str(j)) for j in self.summary["judge"]])
        head = (f"{'judge':<{width}}  decided  undecided  {x + ' wins':>10}  {y + ' wins':>10}  "
                f"{x + ' share':>11}  first-shown")
        lines += [head, "-" * len(head)]
        for r in self.summary.itertuples(index=False):
            share = getattr(r, f"share_{x}")
            fs = r.first_shown_rate
            lines.append(
                f"{str(r.judge):<{width}}  {r.n_decided:>4}/{r.n_queries:<3} {r.n_undecided:>9}  "
                f"{getattr(r, f'wins_{x}'):>10}  {getattr(r, f'wins_{y}'):>10}  "
                f"{'-' if math.isnan(share) else f'{100 * share:.1f}%':>11}  "
                f"{'-' if math.isnan(fs) else f'{100 * fs:.0f}%':>11}"
            )
        lines.append("decided = the judge picked the same list in both orders; share over decided queries; "
                     "first-shown = share of answers naming List A (50% = no position preference)")
        lines += self.notes
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------ driver
def _named_judges(judges) -> dict[str, object]:
    if isinstance(judges, Mapping):
        out = {str(n): j for n, j in judges.items()}
    else:
        seq = [judges] if hasattr(judges, "family") else list(judges)
        out = {}
        for j in seq:
            base = str(getattr(j, "model", type(j).__name__))
            name, i = base, 2
            while name in out:
                name, i = f"{base}#{i}", i + 1
            out[name] = j
    if not out:
        raise DataError("no judges: give one judge, a list of judges or {name: judge}")
    if any(n in (MAJORITY, UNANIMOUS) for n in out):
        raise DataError(f"judge names {MAJORITY!r} and {UNANIMOUS!r} are reserved for the group rows")
    return out


def _gain_tables(calibration, gains, names) -> dict[str, pd.DataFrame]:
    if gains is not None:
        if len(gains) != 2:
            raise DataError(f"gains must map exactly two names to gains tables, got {list(gains)}")
        return {str(n): g for n, g in gains.items()}
    if calibration is None:
        raise DataError("give a calibration (RCP vs Count gains) or gains={name: table, name: table}")
    x, y = _check_names(names)
    return {x: calibration.gains(), y: calibration.count_gains()}


async def compare_ideal_lists(
    calibration=None,
    *,
    judges,
    store: str | Path | JudgementStore,
    documents: Mapping[str, str] | Mapping[str, Mapping[str, str]],
    queries: Mapping[str, str],
    gains: Mapping[str, pd.DataFrame] | None = None,
    names: tuple[str, str] = DEFAULT_NAMES,
    k: int = 10,
    seed: int = 0,
    concurrency: int = 16,
    max_attempts: int = 3,
) -> ListComparison:
    """Judge the ideal lists of two gain tables blind, in both orders, and report who wins (async).

    Args:
        calibration: a :class:`~rcp_jax.calibration.Calibration`; its RCP gains (``gains()``) are list x
            and its Count gains (``count_gains()``) list y. Not needed when ``gains`` is given.
        judges: one judge, a sequence (named by their model strings, repeats numbered) or ``{name: judge}``.
        store: judgement store folder (or an open :class:`judging.JudgementStore`); answers go to its
            ``lists.jsonl`` and are re-used by a later run.
        documents, queries: texts, as :func:`rcp_jax.judging.judge_windows` takes them.
        gains: ``{name_x: table, name_y: table}`` of ``query_id, doc_id, gain`` instead of a calibration.
        names: the list names when built from a calibration (default ``("rcp", "count")``).
        k: list length (the paper: 10). seed: tie-break seed. concurrency, max_attempts: as for
            :func:`rcp_jax.judging.judge_windows` (per judge; the judges run concurrently).

    Returns:
        :class:`ListComparison`.

    In Jupyter, ``await compare_ideal_lists(...)``; elsewhere :func:`compare_ideal_lists_sync`.
    """
    tables = _gain_tables(calibration, gains, names)
    names = tuple(tables)  # type: ignore[assignment]
    x, y = _check_names(names)
    named = _named_judges(judges)
    pairs = list_pairs(ideal_lists(tables[x], k=k, seed=seed), ideal_lists(tables[y], k=k, seed=seed), names=(x, y))
    windows = list_windows(pairs, names=(x, y))
    compared = pairs.loc[pairs["status"] == "compared", "query_id"].tolist()
    notes = []
    identical = pairs.loc[pairs["status"] == "identical", "query_id"].tolist()
    if identical:
        notes.append(f"not asked: {len(identical)} quer{'y' if len(identical) == 1 else 'ies'} whose two lists are "
                     f"identical ({', '.join(identical[:8])}{', ...' if len(identical) > 8 else ''})")
    missing = pairs.loc[pairs["status"] == "missing", "query_id"].tolist()
    if missing:
        notes.append(f"not asked: {len(missing)} quer{'y' if len(missing) == 1 else 'ies'} without gains in one of the "
                     f"tables ({', '.join(missing[:8])}{', ...' if len(missing) > 8 else ''})")
    if len(named) < 2:
        notes.append("majority and unanimous rows need at least two judges; only the judge's own row is reported")

    by_judge: dict[str, list[Judgement]] = {n: [] for n in named}
    before = {n: j.ledger.calls for n, j in named.items()}
    if windows:
        owned = not isinstance(store, JudgementStore)
        st = JudgementStore(store) if owned else store
        opened_here = not st.is_open
        st.open()
        try:
            results = await asyncio.gather(*(
                judge_windows(windows, judge=j, store=st, documents=documents, queries=queries,
                              concurrency=concurrency, max_attempts=max_attempts)
                for j in named.values()))
        finally:
            if opened_here:
                st.close()
        by_judge = dict(zip(named, results))
        for n, got in by_judge.items():
            if len(got) < len(windows):
                notes.append(f"judge {n}: {len(windows) - len(got)} of {len(windows)} windows have no valid answer "
                             f"after {max_attempts} attempts (those queries count as undecided; run again to re-ask)")
    decisions = list_decisions(by_judge, compared, names=(x, y))
    if len(named) >= 2 and len(decisions):
        decisions = pd.concat([decisions, _group_decisions(decisions, (x, y))], ignore_index=True)
    summary = summarize_decisions(decisions, names=(x, y)) if len(decisions) else pd.DataFrame()
    calls = sum(j.ledger.calls - before[n] for n, j in named.items())
    return ListComparison(names=(x, y), k=k, pairs=pairs, decisions=decisions, summary=summary,
                          judges={n: str(getattr(j, "model", "")) for n, j in named.items()}, calls=calls, notes=notes)


def compare_ideal_lists_sync(calibration=None, **kwargs) -> ListComparison:
    """:func:`compare_ideal_lists` for synchronous code (same arguments)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        from rcp_jax.judging.transport.loop import run as run_interruptible  # no coroutine left un-awaited on Ctrl-C

        return run_interruptible(compare_ideal_lists(calibration, **kwargs))
    raise DataError("compare_ideal_lists_sync was called inside a running event loop (e.g. Jupyter); use "
                    "'await compare_ideal_lists(...)' there instead")
