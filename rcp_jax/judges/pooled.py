"""One calibration of several judges: shared criteria, a severity and a scale per judge.

:func:`fit_judges` takes each judge's tables and fits

* **pooled BT scores**: one Bradley-Terry fit per query of every judge's tournament windows together
  (each window keeps its judge in its id). Pooled, because a judge's severity is invisible in its
  tournament (window scores are relative and BT scores are centred per query), and because one score per
  document makes its calibrated ability common to the judges: that is what identifies the severities
  (with per-judge scores, a judge's offset would be confounded with its queries' alphas). The judges'
  own BT scales differ; each query's tau absorbs the pooled scale.
* **the pooled 2PL** of :mod:`rcp_jax.models.irt_judges`: criteria (gamma_c, beta_c) and per-query (tau, alpha)
  shared, judge k's severity ``delta_k`` (sum over judges = 0: relative to the average judge; > 0 is a
  stricter judge) and, unless ``fit_scale=False``, its discrimination scale ``lambda_k`` (geometric mean 1).
  Intervals: from the inverse Hessian at the MAP (``method="map"``, a Laplace approximation) or from
  NUTS on :func:`rcp_jax.models.bayes_judges.pooled_judges_model` (``method="nuts"``).
* **each judge alone**: its own BT scores and one-judge calibration, the gains the second-judge check
  compares (:mod:`rcp_jax.judges.by_judge`): a system-pair conclusion that holds under each judge's own
  answers does not depend on the judge.

The pooled calibration's gains are the average judge's (delta = 0, lambda = 1), from the pooled BT scores.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from rcp_jax.calibration import Calibration, calibrate, criterion_columns, load_calibration, save_calibration
from rcp_jax.errors import DataError
from rcp_jax.judges.agreement import judge_agreement
from rcp_jax.metrics import gain
from rcp_jax.tournament import fit_bradley_terry

METHODS = ("map", "nuts")


@dataclass
class JudgesFit:
    """A pooled calibration of several judges.

    Attributes:
        judges: judge names in fit order.
        calibration: the pooled :class:`~rcp_jax.calibration.Calibration` (the average judge's gains).
        per_judge: name -> each judge's own one-judge calibration.
        offsets: DataFrame ``judge, delta, delta_lo, delta_hi, scale, scale_lo, scale_hi, answers`` (severity
            and discrimination scale with ``ci_prob`` intervals; ``answers`` = the judge's rubric answers).
        agreement: :func:`rcp_jax.judges.agreement.judge_agreement` of the judges' rubric answers.
        bt: the pooled BT scores ``query_id, doc_id, theta``.
        method: ``map`` (Laplace intervals) or ``nuts``; ci_prob: interval mass.
        info: fit diagnostics (objective, iterations, converged; NUTS divergences, R-hat, ESS).
    """

    judges: list[str]
    calibration: Calibration
    per_judge: dict[str, Calibration]
    offsets: pd.DataFrame
    agreement: pd.DataFrame
    bt: pd.DataFrame
    method: str = "map"
    ci_prob: float = 0.9
    info: dict = field(default_factory=dict)


def _check_tables(tables: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]]) -> list[str]:
    if len(tables) < 2:
        raise DataError(f"pooling needs at least two judges, got {len(tables)} ({', '.join(tables) or 'none'})")
    crit = {name: criterion_columns(ans) for name, (_, ans) in tables.items()}
    first = next(iter(tables))
    for name, c in crit.items():
        if c != crit[first]:
            raise DataError(f"judge {name!r} answered {len(c)} criteria ({', '.join(c)}) but judge {first!r} "
                            f"{len(crit[first])}: pooled judges share one rubric; judge both with the same rubric")
    _check_one_schedule(tables)
    return crit[first]


def _check_one_schedule(tables) -> None:
    """Refuse judges whose round-1 tournament windows differ (two schedules: another name, seed or pools)."""
    seen: dict[tuple[str, str], tuple[str, tuple]] = {}
    for name, (ws, _) in tables.items():
        r1 = ws[ws["window_id"].astype(str).str.match(r"^round1#\d+$")]
        for key, docs in r1.groupby(["query_id", "window_id"], sort=False)["doc_id"]:
            docs = tuple(sorted(docs))
            if key in seen and seen[key][1] != docs:
                raise DataError(
                    f"judges {seen[key][0]!r} and {name!r} were scheduled differently: query {key[0]!r} window "
                    f"{key[1]} holds other documents for each (two schedules: another dataset name, seed or pools "
                    "file). Pooled judges must judge one schedule; judge the second one again with the first's "
                    "--name, --seed and pools"
                )
            seen.setdefault(key, (name, docs))


_SEP = "\x1f"  # joins a judge's name to a query id inside the one batched BT fit (never in an id)


def _bt_scores(tables, *, float64: bool) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """(pooled BT scores, name -> the judge's own BT scores), from one batched fit.

    The pooled tournament (every judge's windows of a query together, each window keeping its judge in its
    id) and each judge's own tournament (its queries renamed ``name<US>query``) go through one
    :func:`rcp_jax.tournament.fit_bradley_terry` call: queries are fitted independently, so the scores
    are those of separate fits, and the batch compiles once.
    """
    parts = []
    for name, (ws, _) in tables.items():
        ws = ws.assign(query_id=ws["query_id"].astype(str), window_id=ws["window_id"].astype(str))
        parts.append(ws.assign(window_id=name + "|" + ws["window_id"]))
        parts.append(ws.assign(query_id=name + _SEP + ws["query_id"]))
    bt = fit_bradley_terry(pd.concat(parts, ignore_index=True), float64=float64)
    bt["query_id"] = bt["query_id"].astype(str)
    bt["doc_id"] = bt["doc_id"].astype(str)
    own = bt["query_id"].str.contains(_SEP, regex=False)
    split = bt.loc[own, "query_id"].str.split(_SEP, n=1, expand=True)
    mine = bt.loc[own].assign(_judge=split[0], query_id=split[1])
    comps = bt.attrs.get("n_components") if isinstance(bt.attrs.get("n_components"), dict) else {}
    per_judge = {}
    for name in tables:
        table = mine.loc[mine["_judge"] == name].drop(columns="_judge").reset_index(drop=True)
        table.attrs = {"n_components": {q.split(_SEP, 1)[1]: n for q, n in comps.items()
                                        if q.startswith(name + _SEP)}}
        per_judge[name] = table
    pooled = bt.loc[~own].reset_index(drop=True)
    pooled.attrs = {"n_components": {q: n for q, n in comps.items() if _SEP not in q}}
    return pooled, per_judge


def _cells(bt: pd.DataFrame, tables, names: list[str], crit: list[str]):
    from rcp_jax.models.irt_judges import JudgeCells

    answers = pd.concat([ans.assign(_judge=k) for k, (_, ans) in enumerate(tables[n] for n in names)],
                        ignore_index=True)
    answers["query_id"] = answers["query_id"].astype(str)
    answers["doc_id"] = answers["doc_id"].astype(str)
    long = answers.melt(id_vars=["query_id", "doc_id", "_judge"], value_vars=crit, var_name="criterion", value_name="y")
    counts = long.groupby(["_judge", "query_id", "doc_id", "criterion"], sort=True)["y"].agg(["sum", "count"]).reset_index()
    theta = bt.set_index(["query_id", "doc_id"])["theta"]
    key = pd.MultiIndex.from_frame(counts[["query_id", "doc_id"]])
    counts["theta"] = theta.reindex(key).to_numpy()
    if counts["theta"].isna().any():  # pragma: no cover - store_tables drops unscored documents
        row = counts[counts["theta"].isna()].iloc[0]
        raise DataError(f"document {row.doc_id!r} of query {row.query_id!r} has rubric answers but no BT score")
    queries = sorted(counts["query_id"].unique())
    q_index = {q: i for i, q in enumerate(queries)}
    c_index = {c: i for i, c in enumerate(crit)}
    cells = JudgeCells(
        query=counts["query_id"].map(q_index).to_numpy(np.int64), theta=counts["theta"].to_numpy(np.float64),
        criterion=counts["criterion"].map(c_index).to_numpy(np.int64), judge=counts["_judge"].to_numpy(np.int64),
        passes=counts["sum"].to_numpy(np.float64), trials=counts["count"].to_numpy(np.float64),
        n_queries=len(queries), n_criteria=len(crit), n_judges=len(names),
    )
    return cells, queries, answers


def _pooled_calibration(fit, bt, answers, queries, crit, names) -> Calibration:
    tau = pd.Series(fit.tau, index=queries)
    alpha = pd.Series(fit.alpha, index=queries)
    docs = bt.loc[:, ["query_id", "doc_id", "theta"]].copy()
    per_doc = answers.groupby(["query_id", "doc_id"], sort=False)
    passed = per_doc[crit].sum().sum(axis=1).rename("passed")
    placements = per_doc.size().rename("placements")
    docs = docs.join(passed, on=["query_id", "doc_id"]).join(placements, on=["query_id", "doc_id"])
    docs["placements"] = docs["placements"].fillna(0).astype(np.int64)
    docs["ability"] = docs["query_id"].map(tau) * docs["theta"] + docs["query_id"].map(alpha)
    docs["gain"] = np.where(docs["ability"].notna(), gain(docs["ability"].fillna(0.0), fit.gamma, fit.beta), np.nan)
    k = len(crit)
    docs["count_gain"] = np.where(docs["placements"] > 0, docs["passed"] / (k * docs["placements"].clip(lower=1)), np.nan)
    docs = docs.rename(columns={"theta": "theta_bt"})[["query_id", "doc_id", "theta_bt", "ability", "gain", "placements", "count_gain"]]
    per_q = docs.groupby("query_id", sort=False).agg(n_docs=("doc_id", "size"), placements=("placements", "sum"))
    q_all = list(dict.fromkeys(docs["query_id"]))
    qt = pd.DataFrame({"query_id": q_all})
    qt["tau"] = qt["query_id"].map(tau)
    qt["alpha"] = qt["query_id"].map(alpha)
    qt["n_docs"] = qt["query_id"].map(per_q["n_docs"]).astype(int)
    qt["n_answers"] = (qt["query_id"].map(per_q["placements"]) * k).astype(int)
    qt["calibrated"] = qt["tau"].notna()
    return Calibration(criteria=list(crit), gamma=fit.gamma, beta=fit.beta, queries=qt,
                       documents=docs.reset_index(drop=True), method="pooled_judges",
                       info={"objective": fit.objective, "iterations": fit.iterations, "converged": fit.converged,
                             "judges": list(names), "delta": fit.delta.tolist(), "scale": fit.scale.tolist()})


def fit_judges(
    tables: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]],
    *,
    fit_scale: bool = True,
    method: str = "map",
    ci_prob: float = 0.9,
    num_warmup: int = 300,
    num_samples: int = 300,
    num_chains: int = 2,
    seed: int = 0,
    float64: bool = False,
) -> JudgesFit:
    """Pool several judges into one calibration (see the module docstring).

    Args:
        tables: judge name -> (window_scores ``query_id, window_id, doc_id, score``, answers ``query_id,
            window_id, doc_id, C1..CK``), e.g. ``rcp_jax.store_tables(store, family=dict(judge.families))[:2]`` per judge of
            :func:`rcp_jax.judges.select_judges`. At least two.
        fit_scale: fit each judge's discrimination scale (else all 1; severities only).
        method: ``map`` (intervals from the inverse Hessian) or ``nuts`` (posterior intervals).
        ci_prob: interval mass (default 0.9).
        num_warmup, num_samples, num_chains, seed: NUTS settings (``method="nuts"``).
        float64: fit the per-judge BT and one-judge calibrations in double precision.

    Returns:
        :class:`JudgesFit`.

    Raises:
        DataError: fewer than two judges, judges with different rubrics, or judges of two schedules.
    """
    from rcp_jax.models.irt_judges import fit_pooled_judges

    if method not in METHODS:
        raise DataError(f"judges are pooled by {' or '.join(METHODS)}, not {method!r}")
    if not 0.0 < ci_prob < 1.0:
        raise DataError(f"the interval mass must be in (0, 1), got {ci_prob}")
    crit = _check_tables(tables)
    names = list(tables)
    bt, own_bt = _bt_scores(tables, float64=float64)
    cells, queries, answers = _cells(bt, tables, names, crit)
    fit = fit_pooled_judges(cells, fit_scale=fit_scale)
    if not fit.converged:
        warnings.warn(f"the pooled 2PL of {len(names)} judges did not converge in {fit.iterations} iterations",
                      stacklevel=2)
    z = float(norm.ppf(0.5 + ci_prob / 2))
    n_ans = np.bincount(cells.judge, weights=cells.trials, minlength=len(names)).astype(np.int64)
    offsets = pd.DataFrame({
        "judge": names, "delta": fit.delta, "delta_lo": fit.delta - z * fit.delta_se,
        "delta_hi": fit.delta + z * fit.delta_se, "scale": fit.scale,
        "scale_lo": fit.scale * np.exp(-z * fit.log_scale_se), "scale_hi": fit.scale * np.exp(z * fit.log_scale_se),
        "answers": n_ans,
    })
    info = {"objective": fit.objective, "iterations": fit.iterations, "converged": fit.converged,
            "fit_scale": fit_scale, "intervals": "laplace" if method == "map" else "nuts"}
    if method == "nuts":
        offsets, nuts_info = _nuts_offsets(cells, fit, names, fit_scale=fit_scale, ci_prob=ci_prob, n_ans=n_ans,
                                           num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains,
                                           seed=seed)
        info.update(nuts_info)
    per_judge = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # each judge's own warnings are those of its own fit
        for name, (_, ans) in tables.items():
            per_judge[name] = calibrate(own_bt[name], ans, float64=float64)
    return JudgesFit(judges=names, calibration=_pooled_calibration(fit, bt, answers, queries, crit, names),
                     per_judge=per_judge, offsets=offsets,
                     agreement=judge_agreement({n: tables[n][1] for n in names}), bt=bt, method=method,
                     ci_prob=ci_prob, info=info)


def _nuts_offsets(cells, fit, names, *, fit_scale, ci_prob, n_ans, num_warmup, num_samples, num_chains, seed):
    from rcp_jax.models import inference
    from rcp_jax.models.bayes_judges import init_values, pooled_judges_model
    from rcp_jax.models.irt_judges import padded_arrays

    query, theta, criterion, judge, passes, trials = (
        x.astype(np.float32) if x.dtype.kind == "f" else x for x in padded_arrays(cells))
    kwargs = dict(query=query, theta=theta, criterion=criterion, judge=judge, passes=passes, trials=trials,
                  n_queries=cells.n_queries, n_criteria=cells.n_criteria, n_judges=cells.n_judges, fit_scale=fit_scale)
    init = init_values(fit.gamma, fit.beta, fit.tau, fit.alpha, fit.delta, fit.scale if fit_scale else None)
    draws = inference.run_nuts(pooled_judges_model, kwargs, seed=seed, num_warmup=num_warmup,
                               num_samples=num_samples, num_chains=num_chains, init_values=init)
    lo_q, hi_q = 0.5 - ci_prob / 2, 0.5 + ci_prob / 2
    delta = draws.samples["delta"].reshape(-1, len(names))
    scale = draws.samples["scale"].reshape(-1, len(names)) if fit_scale else np.ones_like(delta)
    offsets = pd.DataFrame({
        "judge": names, "delta": delta.mean(0), "delta_lo": np.quantile(delta, lo_q, axis=0),
        "delta_hi": np.quantile(delta, hi_q, axis=0), "scale": np.exp(np.log(scale).mean(0)),
        "scale_lo": np.quantile(scale, lo_q, axis=0), "scale_hi": np.quantile(scale, hi_q, axis=0), "answers": n_ans,
    })
    sites = ["delta"] + (["scale"] if fit_scale else [])
    rhat = max(float(np.nanmax(inference.split_rhat_ess(draws.samples[s])[0])) for s in sites)
    ess = min(float(np.nanmin(inference.split_rhat_ess(draws.samples[s])[1])) for s in sites)
    div = int(np.asarray(draws.stats.get("diverging", np.zeros(1))).sum())
    return offsets, {"num_chains": num_chains, "num_draws": num_samples, "divergences": div, "max_rhat": rhat,
                     "min_ess": ess, "wall_s": draws.info.get("wall_s")}


def _slug(name: str, i: int) -> str:
    return f"{i + 1}_" + re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")[:60]


def save_judges_fit(fit: JudgesFit, folder: str | Path) -> dict[str, Path]:
    """Write ``folder/calibration`` (pooled) and ``folder/judges/`` (``judges.json``, ``offsets.csv``,
    ``agreement.csv``, ``<n>_<name>/calibration`` per judge); returns the paths written."""
    from rcp_jax.data.atomic import atomic_write_csv, atomic_write_json

    folder = Path(folder)
    save_calibration(fit.calibration, folder / "calibration")
    base = folder / "judges"
    paths = {"calibration": folder / "calibration",
             "offsets": atomic_write_csv(base / "offsets.csv", fit.offsets),
             "agreement": atomic_write_csv(base / "agreement.csv", fit.agreement)}
    folders = {}
    for i, name in enumerate(fit.judges):
        sub = _slug(name, i)
        save_calibration(fit.per_judge[name], base / sub / "calibration")
        folders[name] = sub
    paths["judges"] = atomic_write_json(base / "judges.json", {
        "judges": [{"name": n, "folder": folders[n]} for n in fit.judges], "method": fit.method,
        "ci_prob": fit.ci_prob, "info": fit.info,
    })
    return paths


def load_judges_fit(folder: str | Path, *, option: str = "--by-judge") -> tuple[dict[str, Calibration], pd.DataFrame, pd.DataFrame, dict]:
    """Read what :func:`save_judges_fit` wrote: (name -> own calibration, offsets, agreement, judges.json).

    Raises:
        DataError: ``folder`` is not a pooled-judges fit, or it holds fewer than two judges.
    """
    folder = Path(folder)
    path = folder / "judges" / "judges.json"
    if not path.is_file():
        raise DataError(f"{folder} is not a fit of several judges ({path} not found): run `rcp-jax fit --store STORE "
                        f"--judges A,B --out {folder}` first, then give that folder to {option}")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
        entries = [(e["name"], e["folder"]) for e in meta["judges"]]
    except (ValueError, KeyError, TypeError) as err:
        raise DataError(f"{path} is not a judges file ({err!r}); run `rcp-jax fit --judges ...` again") from None
    if len(entries) < 2:
        raise DataError(f"{folder} holds {len(entries)} judge ({', '.join(n for n, _ in entries) or 'none'}); "
                        f"{option} compares at least two: fit with `--judges A,B`")
    cals = {name: load_calibration(folder / "judges" / sub / "calibration") for name, sub in entries}
    offsets = pd.read_csv(folder / "judges" / "offsets.csv", dtype={"judge": str})
    agreement = pd.read_csv(folder / "judges" / "agreement.csv", dtype={"judge_a": str, "judge_b": str, "criterion": str})
    return cals, offsets, agreement, meta
