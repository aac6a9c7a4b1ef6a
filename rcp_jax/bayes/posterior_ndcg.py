"""Posterior RCP-nDCG: intervals per system and a decision per system pair.

**What the per-system quantity is.** RCP-nDCG@k of a (system, query) is
``DCG_k(system's list, G) / DCG_k(ideal list, G)`` with ``G`` the calibrated gains and the **ideal list
fixed: the query's pool in the Stage A order** (METHOD section 4: the pool sorted by the Bradley-Terry
MAP scores, which is also the order of the point calibration's gains; for the rubric-only model, which
has no tournament, the order of the posterior-mean gains). Every posterior draw scores the same ideal
list with its own gains. So a system that ranks like the Stage A order scores exactly 1 in every draw,
and the posterior of a system's nDCG is the posterior of one well-defined quantity of the true gains:
"how much of the Stage A ideal's DCG this ranking reaches". With the frozen model (BT scores exact) each
draw's gains are sorted in the Stage A order, so the value is at most 1; with the joint model a draw's
gains can order some documents differently from the Stage A order, and a system that follows the draw
more closely than Stage A does can score slightly above 1 in that draw (the value is not capped: capping
would bias it). Sorting each draw's own gains instead (the ideal of *that* draw) biases the posterior
low - the maximum over noisy draws exceeds the maximum of the truth - and a perfect ranker's interval
would never reach 1 (the comparison of the two ideals is in ``benchmarks/RESULTS.md``). Whenever a posterior mean exceeds
1 the result says why in its ``notes`` (:data:`ABOVE_ONE_NOTE`, printed under the tables and by
``rcp-jax evaluate --posterior``): 1 means "as good as the Stage A order", not a ceiling.

Documents tied in the BT scores are ordered by posterior-mean gain, and a query whose BT scores have no
spread at all (an all-tied tournament, the MAP's flag ``bt_no_spread``) counts as tied throughout: its
ideal list is the posterior-mean gain order rather than the pool order (with the joint model such a query's
gains still differ, by the rubric answers; the frozen model gives its documents one gain per draw, and
every list scores 1). The posterior's degeneracy flags (:mod:`rcp_jax.bayes.degenerate`, the MAP's checks)
are warned again here and kept in the ``notes``: a number computed on such data is not to be read without them.

nDCG@k is linear in the gains once the system's ranking is fixed, and rankings do not change across
posterior draws - only gains do. So every (system, query) list is reduced once to discount weights
``W[system, query, doc]`` (the tie rules of :mod:`rcp_jax.metrics` included: with ``group_mean`` a
document's weight is the mean discount of its tie block), and the DCG of every draw is one product
``DCG[d, s, q] = sum_n W[s, q, n] G[d, q, n]``; the ideal's weights are fixed in the same way.

Three intervals are reported for each system mean and each pair difference:

* **calibration only** (``cal_*``): spread over posterior draws of the mean over *these* queries - the
  uncertainty of the judge's gains (rubric, items and, with the joint model, the tournament). It is the
  interval for "the true RCP-nDCG of these systems on these queries", and the one the coverage
  benchmark (``benchmarks/coverage.py``) checks against the simulator's truth;
* **query sampling** (``boot_*``): percentile bootstrap over queries (within datasets) of the mean of
  per-query posterior-mean nDCG - how much another sample of queries would move the mean, gains taken
  as known;
* **combined** (no prefix): each bootstrap replicate also picks a random posterior draw; the interval
  for the system's RCP-nDCG on the population the queries were sampled from.

**Decision rule** (:func:`decide`, the one rule behind the ``call`` column, the JSON, the CSVs and the
forest plot). With ``delta = A - B`` drawn from the combined posterior (calibration and query sampling)
and ``rope`` the half-width of the region of practical equivalence (default 0.02):

* ``A>B`` when ``P(delta > rope) >= decision_prob`` (default 0.95);
* ``B>A`` when ``P(delta < -rope) >= decision_prob``;
* ``equivalent`` (practically equivalent) when ``P(|delta| < rope) >= decision_prob``;
* ``undecided`` otherwise.

A pair is called only when the difference is practically meaningful, not merely non-zero: a pair
whose whole interval lies inside the ROPE is ``equivalent``, never ``A>B``. With ``decision_prob``
above 0.5 the four outcomes exclude each other. On pairs of systems that are identical in expectation
the rule calls a winner in far fewer than ``1 - decision_prob`` of cases (measured in
``benchmarks/coverage.py``).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rcp_jax.calibration import CalibrationWarning
from rcp_jax.errors import DataError
from rcp_jax.evaluation import _drop_pairs, _excluded_pairs, validate_run
from rcp_jax.metrics import Protocol, discounts, get_protocol
from rcp_jax.stats.paired import paired_t_test

DEFAULT_ROPE = 0.02
#: Why a posterior RCP-nDCG can exceed 1 (``info["notes"]``, printed under the tables and by the CLI).
ABOVE_ONE_NOTE = (
    "RCP-nDCG above 1 ({which}): the ideal list is {ideal}, scored with each posterior draw's gains, so 1 means "
    "'as good as that order', not a ceiling. A posterior draw can order documents differently from it ({why}), and "
    "a list that follows the draw more closely scores above 1 in that draw. The value is not capped; sorting each "
    "draw's own gains instead would put every system 0.005-0.015 below its true value on simulated collections "
    "(the maximum of noisy gains overstates the ideal). The true value of the same quantity "
    "(Posterior.with_gains) can exceed 1 as well; with the frozen model no list exceeds 1"
)
#: The ideal list and why a draw departs from it, per model (:data:`ABOVE_ONE_NOTE`).
_IDEAL_WORDS = {
    "joint": ("the Stage A order (each query's pool in Bradley-Terry MAP order)",
              "the joint model's scores are latent: the tournament is noisy and the rubric answers say more"),
    "frozen": ("the Stage A order (each query's pool in Bradley-Terry MAP order)", "rounding"),
    "rubric_only": ("each query's pool in posterior-mean gain order (the rubric-only model has no tournament)",
                    "each draw's abilities vary about their means"),
}
#: Posterior probability a decision needs (:func:`decide`).
DEFAULT_DECISION_PROB = 0.95
#: The outcomes of :func:`decide`.
DECISIONS = ("A>B", "B>A", "equivalent", "undecided")


def decide(delta_draws: np.ndarray, *, rope: float = DEFAULT_ROPE,
           decision_prob: float = DEFAULT_DECISION_PROB) -> dict:
    """The decision rule of a system pair (module docstring), from draws of ``delta = A - B``.

    Args:
        delta_draws: float[D, P] draws of the difference of P pairs (D draws each).
        rope: half-width of the region of practical equivalence (>= 0).
        decision_prob: posterior probability a call needs (in (0.5, 1)).

    Returns:
        ``p_a_better`` P(delta > 0) (an exact tie counts half), ``p_a_practically_better`` P(delta > rope),
        ``p_b_practically_better`` P(delta < -rope), ``p_rope`` P(|delta| < rope): float[P] each; and
        ``call``: object[P], one of :data:`DECISIONS`.
    """
    d = np.asarray(delta_draws, dtype=np.float64)
    out = {
        "p_a_better": (d > 0).mean(0) + 0.5 * (d == 0).mean(0),
        "p_a_practically_better": (d > rope).mean(0),
        "p_b_practically_better": (d < -rope).mean(0),
        "p_rope": (np.abs(d) < rope).mean(0),
    }
    call = np.full(d.shape[1:], "undecided", dtype=object)
    call[out["p_rope"] >= decision_prob] = "equivalent"
    call[out["p_b_practically_better"] >= decision_prob] = "B>A"
    call[out["p_a_practically_better"] >= decision_prob] = "A>B"
    out["call"] = call
    return out


@dataclass
class PosteriorMetrics:
    """Posterior RCP-nDCG@k of a run.

    Attributes:
        per_query: ``system, query_id, mean, sd, lo, hi`` (posterior of each per-query nDCG).
        systems: ``system, mean, cal_lo, cal_hi, boot_lo, boot_hi, lo, hi, n_queries`` (mean over
            queries; within datasets first, then over datasets, as :func:`rcp_jax.leaderboard`).
        pairs: ``system_a, system_b, delta, cal_lo, cal_hi, cal_p_a_better, cal_p_rope, boot_lo,
            boot_hi, boot_p_a_better, lo, hi, p_a_better, p_a_practically_better, p_b_practically_better,
            p_rope, t_p, call, equivalent`` (delta = A - B; unprefixed intervals and probabilities are
            the combined ones; ``call`` is :func:`decide`'s outcome on them and ``equivalent`` is
            ``call == "equivalent"``; ``t_p`` the paired t-test on per-query posterior means).
        draws: float64[S, n_systems] the system means of every posterior draw (calibration only).
        systems_order: system names in the column order of ``draws``.
        k, rope, ci_prob, decision_prob, n_bootstrap, protocol: settings.
    """

    per_query: pd.DataFrame
    systems: pd.DataFrame
    pairs: pd.DataFrame
    draws: np.ndarray
    systems_order: list
    k: int
    rope: float
    ci_prob: float
    decision_prob: float
    n_bootstrap: int
    protocol: str
    info: dict = field(default_factory=dict)

    def p_better_matrix(self, source: str = "combined") -> pd.DataFrame:
        """P(row system > column system) for every ordered pair, systems in leaderboard order.

        Args:
            source: ``combined`` (calibration and query sampling, the column ``p_a_better``),
                ``calibration`` (``cal_p_a_better``) or ``bootstrap`` (``boot_p_a_better``).

        Returns:
            float64[n_systems, n_systems] DataFrame indexed and labelled by system; the diagonal is NaN.
            ``M[a, b] + M[b, a] = 1`` (an exact tie counts half to each side).
        """
        column = {"combined": "p_a_better", "calibration": "cal_p_a_better", "bootstrap": "boot_p_a_better"}.get(source)
        if column is None:
            raise DataError(f"unknown source {source!r}; choose combined, calibration or bootstrap")
        names = list(self.systems["system"])
        m = pd.DataFrame(np.nan, index=pd.Index(names, name="system"), columns=names)
        for a, b, p in zip(self.pairs["system_a"], self.pairs["system_b"], self.pairs[column]):
            m.loc[a, b], m.loc[b, a] = p, 1.0 - p
        return m

    def to_dict(self) -> dict:
        """JSON-ready dict: settings, ``systems`` and ``pairs`` as lists of records, ``p_better_matrix``
        as ``{row: {column: P(row > column)}}`` (combined; the diagonal left out)."""
        def records(df):
            return json.loads(df.to_json(orient="records"))

        matrix = self.p_better_matrix()
        return {"k": self.k, "protocol": self.protocol, "rope": self.rope, "ci_prob": self.ci_prob,
                "decision_prob": self.decision_prob, "n_bootstrap": self.n_bootstrap, "n_draws": self.info.get("n_draws"),
                "notes": list(self.notes), "systems": records(self.systems), "pairs": records(self.pairs),
                "p_better_matrix": {a: {b: float(p) for b, p in row.items() if a != b} for a, row in matrix.iterrows()}}

    @property
    def notes(self) -> list:
        """What a reader must know to read the numbers: the posterior's degeneracy flags and, when a posterior
        mean exceeds 1, why (:data:`ABOVE_ONE_NOTE`)."""
        return list(self.info.get("notes", []))

    def format(self, fmt: str = "text", digits: int = 3) -> str:
        """The systems table, the P(A > B) matrix and the pairs table (:func:`format_posterior_table`), then
        the :attr:`notes` (text and markdown)."""
        out = "\n".join(format_posterior_table(self, table=t, fmt=fmt, digits=digits)
                        for t in ("systems", "matrix", "pairs"))
        if fmt in ("text", "markdown") and self.notes:
            out += "\n" + "\n".join(f"note: {n}" for n in self.notes) + "\n"
        return out


def discount_weights(
    run: pd.DataFrame,
    doc_index: dict,
    query_index: dict,
    n_docs_max: int,
    *,
    k: int,
    protocol: Protocol,
    pools: pd.DataFrame,
    excluded: set,
) -> tuple[np.ndarray, list, list]:
    """Discount weight of every (system, query, pool document).

    Args:
        run: validated run ``system, query_id, doc_id, score``.
        doc_index: ``(query_id, doc_id) -> position`` of calibrated documents in the gain arrays.
        query_index: ``query_id -> row`` of the gain arrays.
        n_docs_max: N, the padded pool size.
        k, protocol: cut-off and scoring protocol (tie rule, pool restriction).
        pools: ``query_id, doc_id`` in pool order (pool restriction, ``input_order`` ties).
        excluded: ``(query_id, doc_id)`` pairs removed from rankings.

    Returns:
        (W float64[n_systems, n_queries_run, N] with ``DCG = W . gains``, system names, query ids of the
        run in W's order). Documents outside the calibrated pool have gain 0 and get no weight, but
        still take their rank positions.
    """
    r = _drop_pairs(run, excluded)
    pool = pools[["query_id", "doc_id"]].astype(str)
    pool = pool.assign(_pos=pool.groupby("query_id", sort=False).cumcount())
    r = r.merge(pool, on=["query_id", "doc_id"], how="left")
    if protocol.pool_only:
        r = r.loc[r["_pos"].notna()]
    systems = sorted(r["system"].unique())
    queries = sorted(r["query_id"].unique())
    s_codes = pd.Index(systems).get_indexer(r["system"])
    q_codes = pd.Index(queries).get_indexer(r["query_id"])
    group = s_codes * max(len(queries), 1) + q_codes
    if protocol.ties == "doc_id_desc":
        tie_key = -pd.factorize(r["doc_id"], sort=True)[0]
    elif protocol.ties == "input_order":
        tie_key = np.where(r["_pos"].notna(), r["_pos"].fillna(0).to_numpy(), len(pool) + np.arange(len(r)))
    else:
        tie_key = np.zeros(len(r))
    score = r["score"].to_numpy(dtype=np.float64)
    order = np.lexsort((np.asarray(tie_key, dtype=np.int64), -score, group))
    g_sorted, s_sorted = group[order], score[order]
    n = len(order)
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]]) if n else np.zeros(0, np.int64)
    rank = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    disc = discounts(k)
    weight = np.where(rank < k, disc[np.minimum(rank, k - 1)], 0.0)
    if protocol.ties == "group_mean" and n:
        new_tie = np.r_[True, (g_sorted[1:] != g_sorted[:-1]) | (s_sorted[1:] != s_sorted[:-1])]
        tie_id = np.cumsum(new_tie) - 1
        weight = (np.bincount(tie_id, weights=weight) / np.bincount(tie_id))[tie_id]
    keys = list(zip(r["query_id"].to_numpy()[order], r["doc_id"].to_numpy()[order]))
    pos = np.array([doc_index.get(key, -1) for key in keys], dtype=np.int64)
    ok = pos >= 0
    w = np.zeros((len(systems), len(queries), n_docs_max))
    np.add.at(w, (s_codes[order][ok], q_codes[order][ok], pos[ok]), weight[ok])
    return w, systems, queries


def ideal_order_scores(posterior) -> np.ndarray:
    """Scores float64[Q, N] whose descending order is each query's ideal list (the Stage A order).

    The Bradley-Terry MAP scores of the frozen and joint models (``posterior.inputs.theta``), documents
    tied in them ordered by posterior-mean gain; for the rubric-only model (no tournament), or an object
    without BT scores, the posterior-mean gains. A query whose BT scores have no spread (the flag
    ``bt_no_spread``: an all-tied tournament) counts as tied throughout, so its ideal list is the
    posterior-mean gain order rather than an accident of rounding or of pool order. (Ties change nothing
    with the frozen model, whose tied documents share a gain in every draw.) The scores are dense ranks
    (N - 1 for the first document, 0 for the last).
    """
    mean_gain = np.asarray(posterior.gain_draws, dtype=np.float64).mean(0)
    theta = getattr(posterior.inputs, "theta", None)
    if getattr(posterior, "model", None) not in ("frozen", "joint") or theta is None:
        return mean_gain
    theta = np.array(theta, dtype=np.float64)
    flat = {q for f in getattr(posterior, "flags", None) or [] if f["kind"] == "bt_no_spread" for q in f["ids"]}
    theta[[str(q) in flat for q in posterior.inputs.query_ids]] = 0.0
    n = theta.shape[1]
    pos = np.broadcast_to(np.arange(n), theta.shape)
    order = np.lexsort((pos, -mean_gain, -theta), axis=-1)  # theta first, then mean gain, then pool position
    ranks = np.empty(theta.shape)
    np.put_along_axis(ranks, order, np.arange(n - 1, -1, -1, dtype=np.float64)[None, :].repeat(len(theta), 0), axis=-1)
    return ranks


def _ideal_dcg(gains: np.ndarray, order_scores: np.ndarray, k: int) -> np.ndarray:
    """IDCG@k of every draw and query: float64[D, Q], the draw's gains float[D, Q, N] (0 on padding and
    excluded documents) summed over the top k of the fixed ideal order (``order_scores`` float[Q, N]
    descending; ties by pool position; documents with score -inf last)."""
    kk = min(k, gains.shape[-1])
    order = np.argsort(-order_scores, axis=-1, kind="stable")[:, :kk]  # [Q, kk]
    top = np.take_along_axis(gains, np.broadcast_to(order, gains.shape[:-1] + (kk,)), axis=-1)
    return (top * discounts(k)[:kk]).sum(-1)


def _bootstrap_counts(rng, strata: np.ndarray, n_bootstrap: int) -> np.ndarray:
    """Resampling weights float64[B, Q]: each stratum resampled with replacement, weight 1/(G n_g)."""
    q = len(strata)
    out = np.zeros((n_bootstrap, q))
    labels = np.unique(strata)
    for g in labels:
        cols = np.flatnonzero(strata == g)
        draw = rng.integers(0, len(cols), size=(n_bootstrap, len(cols)))
        counts = np.zeros((n_bootstrap, len(cols)))
        np.add.at(counts, (np.repeat(np.arange(n_bootstrap), len(cols)), draw.ravel()), 1.0)
        out[:, cols] = counts / (len(labels) * len(cols))
    return out


def posterior_metrics(
    run: pd.DataFrame,
    posterior,
    *,
    k: int = 10,
    protocol: str | Protocol = "plain",
    pools: pd.DataFrame | None = None,
    excluded=None,
    rope: float = DEFAULT_ROPE,
    ci_prob: float = 0.9,
    decision_prob: float = DEFAULT_DECISION_PROB,
    n_bootstrap: int = 2000,
    max_draws: int | None = 2000,
    seed: int = 0,
) -> PosteriorMetrics:
    """Posterior RCP-nDCG@k of every system x query, per system and per system pair.

    Args:
        run: ``system, query_id, doc_id, score[, dataset]`` (one row per scored document).
        posterior: a :class:`rcp_jax.bayes.Posterior` (its ``gain_draws`` are used).
        k, protocol, pools, excluded: as :func:`rcp_jax.evaluate`. The ideal list is the query's calibrated
            pool, minus excluded ids, in the Stage A order, scored with each draw's gains (module docstring).
        rope: half-width of the region of practical equivalence of a difference (default 0.02, the
            margin under which the paper's human study finds RCP verdicts at chance).
        ci_prob: probability of the equal-tailed intervals.
        decision_prob: posterior probability a decision needs (:func:`decide`; default 0.95).
        n_bootstrap: query resamples (query-sampling and combined uncertainty).
        max_draws: use at most this many posterior draws (evenly thinned); None = all.
        seed: seed of the bootstrap and of the draw picked per combined replicate.

    Returns:
        :class:`PosteriorMetrics`. Queries without calibrated gains get NaN and are dropped from
        system means (with a warning), as are queries some system did not rank.
    """
    if not 0 < ci_prob < 1 or not 0.5 < decision_prob < 1:
        raise DataError(f"need 0 < ci_prob < 1 and 0.5 < decision_prob < 1, got {ci_prob}, {decision_prob}")
    if rope < 0:
        raise DataError(f"rope must be >= 0, got {rope}")
    run = validate_run(run)
    proto = get_protocol(protocol)
    notes = [f"posterior RCP-nDCG rests on degenerate data: {f['message']}"
             for f in getattr(posterior, "flags", None) or []]
    for note in notes:  # the MAP's checks (rcp_jax.bayes.degenerate): a number on such data misleads unless said
        warnings.warn(note, CalibrationWarning, stacklevel=2)
    inputs = posterior.inputs
    mask = inputs.mask
    qi, di = np.nonzero(mask)
    qids = np.asarray(inputs.query_ids, dtype=object)
    doc_index = {(qids[a], inputs.doc_ids[a, b]): b for a, b in zip(qi, di)}
    query_index = {q: i for i, q in enumerate(inputs.query_ids)}
    pool_table = pools if pools is not None else pd.DataFrame({"query_id": qids[qi], "doc_id": inputs.doc_ids[qi, di]})
    excl = _excluded_pairs(excluded)
    w, systems, queries = discount_weights(
        run, doc_index, query_index, mask.shape[1], k=k, protocol=proto, pools=pool_table, excluded=excl,
    )
    g = posterior.gain_draws
    if max_draws is not None and g.shape[0] > max_draws:
        g = g[np.linspace(0, g.shape[0] - 1, max_draws).round().astype(np.int64)]
    g = g.astype(np.float64)
    rows = np.array([query_index.get(q, -1) for q in queries], dtype=np.int64)
    has_gain = rows >= 0
    g_run = np.zeros((g.shape[0], len(queries), g.shape[2]))
    g_run[:, has_gain] = g[:, rows[has_gain]]
    g_ideal = g_run.copy()
    scores = ideal_order_scores(posterior)
    order_run = np.full((len(queries), g.shape[2]), -np.inf)
    order_run[has_gain] = np.where(mask[rows[has_gain]], scores[rows[has_gain]], -np.inf)
    for q_pos, q in enumerate(queries):
        if has_gain[q_pos]:
            for d in (d for (qq, d) in excl if qq == q):
                if (q, d) in doc_index:
                    g_ideal[:, q_pos, doc_index[(q, d)]] = 0.0
                    order_run[q_pos, doc_index[(q, d)]] = -np.inf
    dcg = np.einsum("sqn,dqn->dsq", w, g_run)
    idcg = _ideal_dcg(g_ideal, order_run, k)  # [D, Q]
    with np.errstate(invalid="ignore", divide="ignore"):
        ndcg = np.where(idcg[:, None, :] > 0, dcg / np.where(idcg > 0, idcg, 1.0)[:, None, :], 0.0)
    # A list equal to the ideal scores exactly 1; a tie's averaged discount times equal gains can round an
    # ulp away from it, so values within 1e-12 of 1 are set to 1 (the ratio itself is not capped: see the
    # module docstring)
    ndcg = np.where(np.abs(ndcg - 1.0) < 1e-12, 1.0, ndcg)
    present = np.zeros((len(systems), len(queries)), dtype=bool)
    s_codes = pd.Index(systems).get_indexer(run["system"])
    q_codes = pd.Index(queries).get_indexer(run["query_id"])
    ok = (s_codes >= 0) & (q_codes >= 0)
    present[s_codes[ok], q_codes[ok]] = True
    ndcg = np.where((has_gain[None, :] & present)[None], ndcg, np.nan)

    lo_p, hi_p = (1 - ci_prob) / 2, 1 - (1 - ci_prob) / 2
    mean_sq = ndcg.mean(0)
    sq_lo, sq_hi = np.quantile(ndcg, [lo_p, hi_p], axis=0)
    per_query = pd.DataFrame({
        "system": np.repeat(systems, len(queries)), "query_id": np.tile(queries, len(systems)),
        "mean": mean_sq.ravel(), "sd": ndcg.std(0).ravel(), "lo": sq_lo.ravel(), "hi": sq_hi.ravel(),
    })

    complete = np.isfinite(mean_sq).all(axis=0)
    dropped = [q for q, c in zip(queries, complete) if not c]
    if dropped:
        warnings.warn(
            f"{len(dropped)} quer{'y' if len(dropped) == 1 else 'ies'} without calibrated gains or not ranked by "
            f"every system dropped from system means: {dropped[:5]}", stacklevel=2,
        )
    if not complete.any():
        raise DataError("no query has calibrated gains and a ranking by every system; nothing to compare")
    used = [q for q, c in zip(queries, complete) if c]
    x = ndcg[:, :, complete]  # [D, S, Qc]
    if "dataset" in run.columns:
        ds = run.drop_duplicates("query_id").set_index("query_id")["dataset"].astype(str)
        strata = pd.factorize(ds.reindex(used).to_numpy())[0]
    else:
        strata = np.zeros(len(used), dtype=np.int64)
    labels, counts = np.unique(strata, return_counts=True)
    weights = 1.0 / (len(labels) * counts[np.searchsorted(labels, strata)])
    cal = x @ weights  # [D, S]

    rng = np.random.default_rng(seed)
    boot_w = _bootstrap_counts(rng, strata, n_bootstrap)  # [B, Qc]
    boot = boot_w @ x.mean(0).T  # [B, S]
    pick = rng.integers(0, x.shape[0], size=n_bootstrap)
    comb = np.empty((n_bootstrap, len(systems)))
    for lo in range(0, n_bootstrap, 256):
        sl = slice(lo, lo + 256)
        comb[sl] = np.einsum("bq,bsq->bs", boot_w[sl], x[pick[sl]])

    def iv(a):
        return np.quantile(a, [lo_p, hi_p], axis=0)

    sys_tab = pd.DataFrame({"system": systems, "mean": cal.mean(0)})
    sys_tab["cal_lo"], sys_tab["cal_hi"] = iv(cal)
    sys_tab["boot_lo"], sys_tab["boot_hi"] = iv(boot)
    sys_tab["lo"], sys_tab["hi"] = iv(comb)
    sys_tab["n_queries"] = len(used)
    sys_tab = sys_tab.sort_values("mean", ascending=False).reset_index(drop=True)
    above = _above_one(sys_tab, per_query)
    if above:
        ideal, why = _IDEAL_WORDS.get(getattr(posterior, "model", None), _IDEAL_WORDS["joint"])
        notes.append(ABOVE_ONE_NOTE.format(which=above, ideal=ideal, why=why))
    order = [systems.index(s) for s in sys_tab["system"]]

    a_idx, b_idx = np.triu_indices(len(order), k=1)
    a_sys, b_sys = np.asarray(order)[a_idx], np.asarray(order)[b_idx]
    rows_out = {"system_a": [systems[i] for i in a_sys], "system_b": [systems[i] for i in b_sys]}
    pair = {}
    for name, arr in (("cal", cal), ("boot", boot), ("comb", comb)):
        d = arr[:, a_sys] - arr[:, b_sys]
        pair[name] = d
    rows_out["delta"] = pair["cal"].mean(0)
    for name, prefix in (("cal", "cal_"), ("boot", "boot_"), ("comb", "")):
        d = pair[name]
        lo, hi = iv(d) if d.size else (np.zeros(0), np.zeros(0))
        rows_out[f"{prefix}lo"], rows_out[f"{prefix}hi"] = lo, hi
        dec = decide(d.reshape(d.shape[0], -1), rope=rope, decision_prob=decision_prob)
        rows_out[f"{prefix}p_a_better"] = dec["p_a_better"]
        if name == "cal":
            rows_out["cal_p_rope"] = dec["p_rope"]
        elif name == "comb":  # the decision: combined uncertainty
            for key in ("p_a_practically_better", "p_b_practically_better", "p_rope", "call"):
                rows_out[key] = dec[key]
    pairs = pd.DataFrame(rows_out)
    mq = x.mean(0)  # [S, Qc]
    _, t_p = paired_t_test(mq[a_sys] - mq[b_sys]) if len(a_sys) else (None, np.zeros(0))
    pairs["t_p"] = t_p
    pairs["call"] = pairs["call"].astype(str)
    pairs["equivalent"] = pairs["call"].to_numpy() == "equivalent"
    cols = ["system_a", "system_b", "delta", "cal_lo", "cal_hi", "cal_p_a_better", "cal_p_rope", "boot_lo", "boot_hi",
            "boot_p_a_better", "lo", "hi", "p_a_better", "p_a_practically_better", "p_b_practically_better", "p_rope",
            "t_p", "call", "equivalent"]
    return PosteriorMetrics(
        per_query=per_query, systems=sys_tab, pairs=pairs[cols], draws=cal, systems_order=list(systems), k=k,
        rope=rope, ci_prob=ci_prob, decision_prob=decision_prob, n_bootstrap=n_bootstrap, protocol=proto.name,
        info={"n_draws": int(x.shape[0]), "queries": used, "dropped_queries": dropped, "seed": seed,
              "posterior_method": posterior.method, "posterior_model": posterior.model, "notes": notes},
    )


def _above_one(systems: pd.DataFrame, per_query: pd.DataFrame, tol: float = 1e-9) -> str:
    """Which posterior means exceed 1, in words ("" when none): systems with their means, and the count of
    (system, query) means."""
    sys_above = systems.loc[systems["mean"] > 1.0 + tol]
    pq = per_query["mean"].to_numpy(dtype=np.float64)
    n_pq = int((pq > 1.0 + tol).sum())
    if not n_pq and sys_above.empty:
        return ""
    parts = []
    if not sys_above.empty:
        shown = ", ".join(f"{s!r} {m:.3f}" for s, m in zip(sys_above["system"][:5], sys_above["mean"][:5]))
        parts.append(f"system mean{'s' if len(sys_above) > 1 else ''} {shown}")
    parts.append(f"{n_pq} of {int(np.isfinite(pq).sum())} (system, query) posterior means")
    return "; ".join(parts)


def decision_rule_text(rope: float, decision_prob: float) -> str:
    """One line stating :func:`decide`'s rule with its settings (tables, CLI and plots print it)."""
    p = f"{decision_prob:g}"
    return (f"call A>B when P(delta > {rope:g}) >= {p}, B>A when P(delta < -{rope:g}) >= {p}, "
            f"equivalent when P(|delta| < {rope:g}) >= {p}, else undecided")


def format_posterior_table(
    metrics: PosteriorMetrics, *, table: str = "pairs", fmt: str = "text", digits: int = 3
) -> str:
    """Render the systems table, the pairs table or the P(A > B) matrix of :class:`PosteriorMetrics`.

    Args:
        metrics: output of :func:`posterior_metrics`.
        table: ``pairs``, ``systems`` or ``matrix`` (:meth:`PosteriorMetrics.p_better_matrix`, combined;
            ``csv`` and ``json`` keep the row labels).
        fmt: ``text`` (aligned columns), ``markdown``, ``csv`` or ``json`` (records, full precision).
        digits: decimals of floats in ``text`` and ``markdown``.

    Returns:
        The table as a string; ``text`` and ``markdown`` start with a line stating k, the interval
        probability, the ROPE and the decision rule.
    """
    if table not in ("pairs", "systems", "matrix"):
        raise DataError(f"unknown table {table!r}; choose 'pairs', 'systems' or 'matrix'")
    if table == "matrix":
        matrix = metrics.p_better_matrix()
        if fmt == "csv":
            return matrix.to_csv()
        if fmt == "json":
            return json.dumps(metrics.to_dict()["p_better_matrix"], indent=2)
        df = matrix.reset_index()
    else:
        df = metrics.pairs if table == "pairs" else metrics.systems
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "json":
        return json.dumps(json.loads(df.to_json(orient="records")), indent=2)
    if fmt not in ("text", "markdown"):
        raise DataError(f"unknown format {fmt!r}; choose text, markdown, csv or json")
    pct = round(100 * metrics.ci_prob)
    if table == "matrix":
        head = (f"P(row > column) of mean RCP-nDCG@{metrics.k} ({metrics.protocol}), calibration and query "
                f"sampling combined; {decision_rule_text(metrics.rope, metrics.decision_prob)}")
    else:
        head = (f"RCP-nDCG@{metrics.k} ({metrics.protocol}); {pct}% intervals: cal = calibration (posterior draws), "
                f"boot = query sampling, lo/hi = both; ROPE |delta| < {metrics.rope:g}; "
                f"{decision_rule_text(metrics.rope, metrics.decision_prob)}")
    shown = df.copy()
    for c in shown.columns:
        if shown[c].dtype.kind == "f":
            blank = "-" if table == "matrix" else "nan"  # the matrix's diagonal
            shown[c] = shown[c].map(lambda v, b=blank: b if not np.isfinite(v) else f"{v:.{digits}f}")
        else:
            shown[c] = shown[c].astype(str)
    cols = list(shown.columns)
    if fmt == "markdown":
        lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in shown.itertuples(index=False)]
        return head + "\n\n" + "\n".join(lines) + "\n"
    width = [max(len(c), *(len(v) for v in shown[c])) if len(shown) else len(c) for c in cols]
    lines = ["  ".join(c.rjust(w_) for c, w_ in zip(cols, width))]
    lines += ["  ".join(v.rjust(w_) for v, w_ in zip(row, width)) for row in shown.itertuples(index=False)]
    return head + "\n" + "\n".join(lines) + "\n"


__all__ = ["DECISIONS", "DEFAULT_DECISION_PROB", "DEFAULT_ROPE", "PosteriorMetrics", "decide", "decision_rule_text",
           "discount_weights", "format_posterior_table", "ideal_order_scores", "posterior_metrics"]
