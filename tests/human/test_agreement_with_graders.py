"""Agreement with human graders: constructed contest sets with known answers, oracles from scipy."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rcp_jax.errors import DataError
from rcp_jax.human import (
    clustered_proportion_ci,
    contest_verdicts,
    contests_from_frame,
    contests_from_records,
    document_table,
    gain_ece,
    grader_verdicts,
    head_to_head,
    hit_rates,
    human_agreement_report,
    load_contests,
    margin_auc,
    pairwise_accuracy,
    qrel_disagreement,
    query_mean_spearman,
)

PREFER_A = {"x": 3, "y": 0}  # lists A = [x, y], B = [y, x]: a grader with these grades picks A
PREFER_B = {"x": 0, "y": 3}
TIE = {"x": 1, "y": 1}


def _contest(cid, grades, rcp, qrel, qid=None, dataset="d"):
    return {"contest_id": cid, "query_id": qid or f"q-{cid}", "dataset": dataset, "systems": ["S1", "S2"],
            "lists": [["x", "y"], ["y", "x"]], "metrics": {"rcp_ndcg": list(rcp), "qrel_ndcg": list(qrel)},
            "grades": {f"g{i}": dict(g) for i, g in enumerate(grades)}}


def _three_of_four():
    """RCP wins exactly 3 of the 4 contests where exactly one metric names the verdict."""
    a3, b3 = [PREFER_A] * 3, [PREFER_B] * 3
    return [
        _contest("c1", a3, (0.8, 0.5), (0.2, 0.6)),          # verdict A; RCP A, qrel B -> RCP
        _contest("c2", a3, (0.9, 0.4), (1.0, 1.0)),          # verdict A; RCP A, qrel tied -> RCP
        _contest("c3", b3, (0.3, 0.7), (0.6, 0.2)),          # verdict B; RCP B, qrel A -> RCP
        _contest("c4", [PREFER_A, PREFER_A, PREFER_B], (0.4, 0.6), (0.7, 0.1)),  # verdict A 2-1; qrel wins
        _contest("c5", a3, (0.8, 0.1), (0.9, 0.3)),          # both right: not counted
        _contest("c6", [PREFER_A, PREFER_B, TIE], (0.8, 0.1), (0.1, 0.9)),  # verdict tie: not counted
        _contest("c7", b3, (0.8, 0.1), (0.9, 0.3)),          # both wrong: not counted
    ]


def test_head_to_head_three_of_four():
    cs = contests_from_records(_three_of_four())
    v = contest_verdicts(cs).set_index("contest_id")
    assert v.verdict.tolist() == ["a", "a", "b", "a", "a", "tie", "b"]
    assert v.loc["c4", ["votes_a", "votes_b", "votes_tie"]].tolist() == [2, 1, 0]
    assert v.loc["c6", ["votes_a", "votes_b", "votes_tie"]].tolist() == [1, 1, 1]
    assert v.loc["c2", "qrel_ndcg_pick"] == "tie" and np.isnan(v.loc["c6", "rcp_ndcg_hit"])
    h = head_to_head(v.reset_index())
    assert (h.wins, h.n, h.share) == (3, 4, 0.75)
    assert h.chance == pytest.approx((0.5 + 1.0 + 0.5 + 0.5) / 4)
    assert (h.n_opposite, h.n_other_tied, h.n_metric_tied) == (3, 1, 0)
    flipped = head_to_head(v.reset_index(), "qrel_ndcg", "rcp_ndcg")
    assert (flipped.wins, flipped.n) == (1, 4)
    assert flipped.chance == pytest.approx((0.5 + 0.0 + 0.5 + 0.5) / 4)
    assert h.chance + flipped.chance == pytest.approx(1.0)


def test_grader_ndcg_hand_worked():
    rec = {"contest_id": "h", "query_id": "q", "lists": [["d1", "d2", "d3"], ["d3", "d4", "d1"]],
           "metrics": {"rcp_ndcg": [0.5, 0.6]}, "grades": {"g": {"d1": 3, "d2": 0, "d3": 2, "d4": 1}}}
    gv = grader_verdicts(contests_from_records([rec])).iloc[0]
    l3 = math.log2(3)
    idcg = 3 + 2 / l3 + 1 / 2
    assert gv.ndcg_a == pytest.approx((3 + 0 / l3 + 2 / 2) / idcg)
    assert gv.ndcg_b == pytest.approx((2 + 1 / l3 + 3 / 2) / idcg)
    assert gv.pick == "b"
    # at k = 1 the top documents decide: d1 (3) beats d3 (2)
    assert grader_verdicts(contests_from_records([rec]), k=1).iloc[0].pick == "a"


def test_clustered_ci_hand_worked_and_paper():
    p, lo, hi = clustered_proportion_ci([1, 1, 0, 1, 0, 0], ["a", "a", "b", "b", "c", "c"], level=0.5)
    # s_g = (2, 1, 0), n_g = 2: sum (s_g - p n_g)^2 = 2; var = 3/2 * 2 / 36 = 1/12
    half = stats.norm.ppf(0.75) * math.sqrt(1 / 12)
    assert (p, lo, hi) == pytest.approx((0.5, 0.5 - half, 0.5 + half))
    # singleton clusters: var = p (1 - p) / (n - 1); the paper's 134/185 -> [66.0, 78.9]
    p, lo, hi = clustered_proportion_ci(np.r_[np.ones(134), np.zeros(51)], np.arange(185))
    assert (round(100 * lo, 1), round(100 * hi, 1)) == (66.0, 78.9)
    assert (hi - p) == pytest.approx(1.959964 * math.sqrt(p * (1 - p) / 184), rel=1e-6)
    assert math.isnan(clustered_proportion_ci([1, 0], ["q", "q"])[1])


def test_clustered_ci_covers_under_query_correlation():
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(300):
        q = np.repeat(np.arange(40), 3)
        p_q = rng.beta(2, 2, 40)  # contests of one query share a success probability
        s = (rng.uniform(size=q.size) < p_q[q]).astype(float)
        _, lo, hi = clustered_proportion_ci(s, q)
        covered += lo <= 0.5 <= hi
    assert 0.89 <= covered / 300 <= 0.99


def test_hit_rates_by_margin_band():
    recs = [
        _contest("a", [PREFER_A] * 3, (0.51, 0.50), (0.5, 0.5)),  # RCP margin 0.01, right
        _contest("b", [PREFER_A] * 3, (0.50, 0.51), (0.5, 0.5)),  # 0.01, wrong
        _contest("c", [PREFER_A] * 3, (0.50, 0.50), (0.5, 0.5)),  # tie -> half credit
        _contest("d", [PREFER_A] * 3, (0.60, 0.50), (0.5, 0.5)),  # 0.10, right
        _contest("e", [PREFER_B] * 3, (0.90, 0.50), (0.5, 0.5)),  # 0.40, wrong
        _contest("f", [PREFER_B] * 3, (0.20, 0.90), (0.5, 0.5)),  # 0.70, right
    ]
    h = hit_rates(contest_verdicts(contests_from_records(recs))).set_index("band")
    assert h.loc["< 0.02", ["n", "hits"]].tolist() == [3, 1.5]
    assert h.loc[">= 0.02", ["n", "hits"]].tolist() == [3, 2.0]
    assert h.loc[">= 0.20", ["n", "hits"]].tolist() == [2, 1.0]
    assert h.loc["all", "rate"] == pytest.approx(3.5 / 6)
    q = hit_rates(contest_verdicts(contests_from_records(recs)), "qrel_ndcg", tie_credit=0.0).set_index("band")
    assert q.loc["all", "hits"] == 0.0


def _random_contests(rng, n=60, graders=3, docs=6, k=3):
    recs, gains = [], []
    for c in range(n):
        pool = [f"d{c}-{i}" for i in range(docs)]
        rel = rng.uniform(0, 1, docs)
        la = list(rng.permutation(pool)[:k])
        lb = list(rng.permutation(pool)[:k])
        grades = {f"g{c}-{j}": {d: int(rng.uniform() < rel[pool.index(d)]) * int(rng.integers(2, 4))
                                 for d in set(la) | set(lb)} for j in range(graders)}
        disc = 1 / np.log2(np.arange(2, k + 2))
        score = lambda lst: float(np.sum([rel[pool.index(d)] for d in lst] * disc))  # noqa: E731
        sa, sb = score(la) + rng.normal(0, 0.1), score(lb) + rng.normal(0, 0.1)
        recs.append({"contest_id": f"c{c}", "query_id": f"q{c // 2}", "lists": [la, lb],
                     "metrics": {"rcp_ndcg": [sa, sb], "qrel_ndcg": [round(sa), round(sb)]}, "grades": grades})
        for i, d in enumerate(pool):
            gains.append({"query_id": f"q{c // 2}", "doc_id": d, "gain": rel[i], "qrel": float(rel[i] > 0.5)})
    return recs, pd.DataFrame(gains).drop_duplicates(["query_id", "doc_id"])


def test_margin_auc_matches_mannwhitneyu():
    recs, _ = _random_contests(np.random.default_rng(1))
    cs = contests_from_records(recs)
    auc, n = margin_auc(cs, "rcp_ndcg")
    gv = grader_verdicts(cs)
    gv = gv[gv.pick != "tie"].merge(cs.contests, on="contest_id")
    m = gv.rcp_ndcg_a - gv.rcp_ndcg_b
    pos, neg = m[gv.pick == "a"], m[gv.pick == "b"]
    u = stats.mannwhitneyu(pos, neg).statistic
    assert n == len(gv)
    assert auc == pytest.approx(u / (len(pos) * len(neg)))
    assert auc > 0.6  # the metric tracks relevance; graders do too
    auc_q, _ = margin_auc(cs, "qrel_ndcg")
    assert auc_q < auc


def test_pairwise_accuracy_hand_case_and_brute_force():
    docs = pd.DataFrame({"query_id": ["q"] * 4, "useful": [True, True, False, False],
                         "rcp": [0.9, 0.5, 0.5, 0.1], "qrel": [1, 0, 0, 0]})
    assert pairwise_accuracy(docs, "rcp") == (pytest.approx(3.5 / 4), 4)
    assert pairwise_accuracy(docs, "qrel") == (pytest.approx(3 / 4), 4)
    rng = np.random.default_rng(2)
    big = pd.DataFrame({"query_id": rng.integers(0, 8, 300).astype(str), "useful": rng.uniform(size=300) < 0.4,
                        "g": np.round(rng.uniform(size=300), 1)})
    total = pairs = 0.0
    for _, q in big.groupby("query_id"):
        for gu in q.g[q.useful]:
            for gn in q.g[~q.useful]:
                total += 1.0 if gu > gn else 0.5 if gu == gn else 0.0
                pairs += 1
    acc, n = pairwise_accuracy(big, "g")
    assert n == pairs and acc == pytest.approx(total / pairs)


def test_document_level_statistics():
    recs, gains = _random_contests(np.random.default_rng(3), n=150, graders=3)
    cs = contests_from_records(recs)
    docs = document_table(cs, gains)
    assert docs.gain.notna().all() and (docs.n_grades >= 3).all()
    # the gain is the true probability of a useful grade: calibrated
    ece, n = gain_ece(cs, gains, "gain")
    assert n == len(cs.grades) and ece < 0.05
    rho, nq = query_mean_spearman(docs, "gain")
    per_q = docs.groupby("query_id")[["gain", "mean_grade"]].mean().round(12)
    assert nq == len(per_q)
    assert rho == pytest.approx(stats.spearmanr(per_q.gain, per_q.mean_grade).statistic)
    acc_rcp, _ = pairwise_accuracy(docs, "gain")
    acc_qrel, _ = pairwise_accuracy(docs, "qrel")
    assert acc_rcp > acc_qrel > 0.5


def test_qrel_disagreement_hand_case():
    docs = pd.DataFrame({"qrel": [1, 0, np.nan, 2, 1], "useful": [True, True, False, False, True]})
    out = qrel_disagreement(docs)
    assert out == {"useful_without_positive": 0.5, "n_without_positive": 2,
                   "not_useful_with_positive": pytest.approx(1 / 3), "n_with_positive": 3}


def _long_frame(recs):
    rows = []
    for r in recs:
        for side, lst in zip("ab", r["lists"]):
            for rank, d in enumerate(lst, 1):
                for g, per_doc in r["grades"].items():
                    rows.append({"contest_id": r["contest_id"], "query_id": r["query_id"], "dataset": r["dataset"],
                                 "side": side, "rank": rank, "doc_id": d, "grader": g, "grade": per_doc[d],
                                 **{f"{m}_{s}": v[i] for m, v in r["metrics"].items() for i, s in enumerate("ab")}})
    return pd.DataFrame(rows)


def test_file_formats_agree(tmp_path):
    recs = _three_of_four()
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    (tmp_path / "c.json").write_text(json.dumps(recs))
    _long_frame(recs).to_csv(tmp_path / "c.csv", index=False)
    _long_frame(recs).to_parquet(tmp_path / "c.parquet")
    ref = contest_verdicts(load_contests(tmp_path / "c.jsonl"))
    for name in ("c.json", "c.csv", "c.parquet"):
        other = contest_verdicts(load_contests(tmp_path / name))
        pd.testing.assert_frame_equal(ref.drop(columns="dataset"), other.drop(columns="dataset"), check_dtype=False)


def test_contest_input_errors(tmp_path):
    rec = _contest("c1", [PREFER_A], (0.5, 0.4), (0.5, 0.5))
    bad = json.loads(json.dumps(rec))
    del bad["grades"]["g0"]["y"]
    with pytest.raises(DataError, match="grader 'g0' did not grade document 'y' shown in contest 'c1'"):
        contests_from_records([bad])
    bad = json.loads(json.dumps(rec))
    bad["lists"] = [["x", "x"], ["y"]]
    with pytest.raises(DataError, match="appears twice in list A"):
        contests_from_records([bad])
    with pytest.raises(DataError, match="missing key 'lists'"):
        contests_from_records([{k: v for k, v in rec.items() if k != "lists"}])
    frame = _long_frame([rec])
    frame.loc[0, "rcp_ndcg_a"] = 0.9
    with pytest.raises(DataError, match="'rcp_ndcg_a' varies within contest 'c1'"):
        contests_from_frame(frame)
    frame = _long_frame([rec]).assign(side="left")
    with pytest.raises(DataError, match="use a or b"):
        contests_from_frame(frame)
    (tmp_path / "bad.jsonl").write_text("{not json}\n")
    with pytest.raises(DataError, match="line 1"):
        load_contests(tmp_path / "bad.jsonl")
    with pytest.raises(DataError, match="does not exist"):
        load_contests(tmp_path / "missing.jsonl")


def test_report_collects_everything():
    recs, gains = _random_contests(np.random.default_rng(4), n=40)
    cs = contests_from_records(recs)
    rep = human_agreement_report(cs, gains, gain_cols=["gain", "qrel"], qrel_col="qrel")
    analyses = set(rep.analysis)
    assert {"head-to-head vs qrel_ndcg", "chance rate vs qrel_ndcg", "margin AUC", "pairwise accuracy",
            "query-mean Spearman", "ECE of gain as P(useful)", "useful without positive qrel",
            "not useful with positive qrel", "hit rate, margin >= 0.20"} <= analyses
    h = rep[rep.analysis == "head-to-head vs qrel_ndcg"].iloc[0]
    assert h.ci_low <= h.value <= h.ci_high
