"""`rcp-jax export` on a three-query cut of the demo (judged by the simulated judge, fitted with a Laplace
posterior): each format's file, pytrec_eval's nDCG@10 on the integer qrels equals RCP-nDCG@10, and errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rcp_jax.cli import main


@pytest.fixture(scope="module")
def fitted(demo_tiny, tmp_path_factory):
    """(the folder `rcp-jax fit --method laplace --out` wrote, the same fit without its posterior, runs.csv)."""
    import shutil

    folder = tmp_path_factory.mktemp("export")
    assert main(["judge", "--rows", str(demo_tiny["rows"]), "--store", str(folder / "store"), "--quiet"]) == 0
    assert main(["fit", "--store", str(folder / "store"), "--out", str(folder / "fit"), "--method", "laplace",
                 "--draws", "100", "--no-plots"]) == 0
    shutil.copytree(folder / "fit" / "calibration", folder / "map" / "calibration")
    return folder / "fit", folder / "map", demo_tiny["runs"]


def _export(cli, *args):
    res = cli("export", *args, "--json")
    return res.returncode, (json.loads(res.stdout) if res.stdout.strip() else None), res.stderr


def test_trec_export_scores_like_rcp_jax_in_pytrec_eval(fitted, tmp_path, cli):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    from rcp_jax import evaluate
    from rcp_jax.calibration import load_calibration

    fit, _, runs = fitted
    code, info, _ = _export(cli, "--calibration", str(fit), "--format", "trec", "--out", str(tmp_path / "q.txt"))
    assert code == 0 and info["scale"] == 1_000_000 and info["queries"] == 3 and info["out"] == str(tmp_path / "q.txt")
    lines = (tmp_path / "q.txt").read_text().splitlines()
    assert all(len(line.split()) == 4 and line.split()[1] == "0" and line.split()[3].isdigit() for line in lines)
    cal = load_calibration(fit)
    run = pd.read_csv(runs, dtype={"query_id": str, "doc_id": str})
    run = run.sort_values(["system", "query_id", "score", "doc_id"], ascending=[True, True, False, True])
    run["score"] = -run.groupby(["system", "query_id"]).cumcount().astype(float)  # distinct scores, same order
    per = evaluate(run, cal, k=10, protocol="plain")
    with open(tmp_path / "q.txt") as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    for system, rows in run.groupby("system"):
        r: dict = {}
        for q, d, s in zip(rows["query_id"], rows["doc_id"], rows["score"]):
            r.setdefault(q, {})[d] = float(s)
        theirs = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(r)
        ours = per.loc[per["system"] == system].set_index("query_id")["rcp_ndcg"]
        assert set(theirs) == set(ours.index) and len(ours) == 3
        assert max(abs(ours[q] - v["ndcg_cut_10"]) for q, v in theirs.items()) < 1e-6


def test_trec_header_is_optional_and_names_the_scale(fitted, tmp_path, cli):
    fit, _, _ = fitted
    code, info, _ = _export(cli, "--calibration", str(fit), "--format", "trec", "--out", str(tmp_path / "q.txt"),
                            "--header", "--scale", "1000")
    assert code == 0 and info["scale"] == 1000
    first, second = (tmp_path / "q.txt").read_text().splitlines()[:2]
    assert first.startswith("#") and "round(gain * 1000)" in first and int(second.split()[3]) <= 1000


def test_gains_export_carries_the_posterior_intervals(fitted, tmp_path, cli):
    fit, map_only, _ = fitted
    code, info, _ = _export(cli, "--calibration", str(fit), "--format", "gains", "--out", str(tmp_path / "g.parquet"))
    g = pd.read_parquet(tmp_path / "g.parquet")
    assert code == 0 and 0 < info["interval"] < 1 and (g["interval"] == info["interval"]).all()
    assert list(g.columns) == ["query_id", "doc_id", "gain", "count_gain", "gain_mean", "gain_lo", "gain_hi", "interval"]
    assert ((g["gain_lo"] <= g["gain_mean"]) & (g["gain_mean"] <= g["gain_hi"])).all() and (g["gain_hi"] > g["gain_lo"]).all()
    code, info, _ = _export(cli, "--calibration", str(map_only), "--format", "gains", "--out", str(tmp_path / "g.csv"))
    assert code == 0 and info["interval"] is None
    assert list(pd.read_csv(tmp_path / "g.csv").columns) == ["query_id", "doc_id", "gain", "count_gain"]


def test_mteb_export_is_the_float_gain_layout(fitted, tmp_path, cli):
    fit, _, _ = fitted
    code, _, _ = _export(cli, "--calibration", str(fit), "--format", "mteb", "--out", str(tmp_path / "test.tsv"))
    assert code == 0
    t = pd.read_csv(tmp_path / "test.tsv", sep="\t", dtype={"query-id": str, "corpus-id": str})
    assert list(t.columns) == ["query-id", "corpus-id", "gain"] and t["gain"].between(0, 1, inclusive="neither").all()


def test_draws_export_thins_and_matches_the_posterior(fitted, tmp_path, cli):
    from rcp_jax.bayes.posterior import load_posterior

    fit, _, _ = fitted
    code, info, _ = _export(cli, "--calibration", str(fit), "--format", "draws", "--draws", "10",
                            "--out", str(tmp_path / "d.csv"))
    assert code == 0 and info["draws"] == 10 and info["draws_available"] == 100
    d = pd.read_csv(tmp_path / "d.csv", dtype={"query_id": str, "doc_id": str})
    assert list(d.columns) == ["draw", "query_id", "doc_id", "gain"] and d["draw"].nunique() == 10
    post = load_posterior(fit / "posterior")
    qi = post.inputs.query_ids.index(d["query_id"][0])
    di = list(post.inputs.doc_ids[qi]).index(d["doc_id"][0])
    assert d["gain"][0] == pytest.approx(float(post.gain_draws[d["draw"][0], qi, di]), rel=1e-6)
    sizes = d.groupby("draw").size()
    assert (sizes == sizes.iloc[0]).all() and sizes.iloc[0] == int(post.documents["gain_mean"].notna().sum())


@pytest.mark.parametrize(("args", "message"), [
    (["--format", "draws", "--out", "d.csv"], "needs a posterior"),
    (["--format", "gains", "--out", "g.xlsx"], ".csv, .tsv or .parquet"),
    (["--format", "gains", "--out", "g.csv", "--draws", "3"], "--draws thins --format draws only"),
])
def test_errors_name_the_fix(fitted, tmp_path, cli, args, message):
    _, map_only, _ = fitted
    args = [a if not a.endswith((".csv", ".xlsx")) else str(tmp_path / a) for a in args]
    code, info, err = _export(cli, "--calibration", str(map_only), *args)
    assert code == 2 and message in info["error"] and message in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_missing_folder_and_unknown_format(tmp_path, cli):
    code, info, _ = _export(cli, "--calibration", str(tmp_path / "nope"), "--format", "gains",
                            "--out", str(tmp_path / "g.csv"))
    assert code == 2 and "no such folder" in info["error"]
    with pytest.raises(SystemExit) as exc:
        main(["export", "--calibration", str(tmp_path), "--format", "excel", "--out", str(tmp_path / "g.csv")])
    assert exc.value.code == 2
