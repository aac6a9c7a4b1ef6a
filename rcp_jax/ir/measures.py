"""RCP-nDCG and Count-nDCG as ir_measures measures (so in ``pt.Experiment``, ranx-free pipelines, notebooks).

Importing this module registers ``RCP_nDCG`` and ``Count_nDCG`` with ir_measures, after which
``ir_measures.parse_measure("RCP_nDCG(calibration='runs/fit')@10")`` works as for the built-in measures. The
measures run through ir_measures' runtime provider: ir_measures hands each run (``query_id, doc_id, score``)
and the qrels to :meth:`_GainMeasure.runtime_impl`, which scores it with :func:`rcp_jax.evaluate`, so a value
equals ``rcp-jax evaluate``'s to the last bit (same gains, tie rule and protocol).

A measure holds its gains: a :class:`rcp_jax.Calibration`, or the folder ``rcp-jax fit --out`` wrote (read when the
measure is built). The qrels ir_measures passes only say which queries count: ir_measures scores every query of
the run and of the qrels, and gives a query the run lacks the value 0. A query the calibration never judged
therefore raises a :class:`~rcp_jax.errors.DataError` naming it (otherwise it would enter the mean as 0.0):
``unjudged="zero"`` scores such queries 0, ir_measures' own convention for a query without results.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from rcp_jax.errors import DataError

try:
    import ir_measures
    from ir_measures.measures.base import Measure, ParamInfo
except ImportError as exc:  # pragma: no cover - exercised with the import blocked (tests/ir)
    raise ImportError(
        'rcp_jax.ir needs ir_measures (RCP-nDCG as an ir_measures / PyTerrier measure): pip install "rcp-jax[ir]"'
    ) from exc

#: Values of the ``unjudged`` parameter: what a query of the run or qrels without gains does.
UNJUDGED = ("error", "zero")
#: Values of the ``holes`` parameter (as :func:`rcp_jax.evaluate`).
HOLES = ("refuse", "zero", "ignore")


class GainSource:
    """The gains a measure holds (``fitted``: a :class:`rcp_jax.Calibration`, or a :class:`rcp_jax.Posterior` for
    ``RCP_nDCG_Bayes``) and a short, stable label for its name.

    Two sources are equal when their gain tables are (the label carries a hash of them), so measures built from
    the same calibration compare equal and key the same column of ``pt.Experiment``.
    """

    def __init__(self, fitted, label: str) -> None:
        self.fitted = fitted
        self.label = label

    def __repr__(self) -> str:
        return self.label

    def __eq__(self, other) -> bool:
        return isinstance(other, GainSource) and other.label == self.label

    def __hash__(self) -> int:
        return hash(self.label)


def gain_source(calibration) -> GainSource:
    """A :class:`GainSource` of a Calibration, of a folder ``rcp-jax fit --out`` wrote (or its ``calibration/``
    subfolder), or the source itself. A folder is read here, once per measure built from it."""
    from rcp_jax.calibration import Calibration, load_calibration

    if isinstance(calibration, GainSource):
        return calibration
    if isinstance(calibration, Calibration):
        return GainSource(calibration, f"cal#{_digest(calibration)}")
    if isinstance(calibration, (str, Path)):
        folder = _calibration_folder(Path(calibration))
        return GainSource(load_calibration(folder), repr(str(calibration)))
    raise DataError(
        f"a calibration for RCP_nDCG / Count_nDCG must be an rcp_jax.Calibration or the folder `rcp-jax fit --out` "
        f"wrote, got {type(calibration).__name__}"
    )


def _calibration_folder(path: Path) -> Path:
    if (path / "items.json").is_file():
        return path
    if (path / "calibration" / "items.json").is_file():
        return path / "calibration"
    raise DataError(f"calibration {path}: neither {path / 'items.json'} nor {path / 'calibration' / 'items.json'} "
                    "exists; pass the folder `rcp-jax fit --out` wrote, or a Calibration")


def _digest(calibration) -> str:
    """8 hex digits of the calibration's documents and gains (its identity in a measure's name)."""
    d = calibration.documents
    h = hashlib.sha256()
    for column in ("query_id", "doc_id"):
        h.update("\x1f".join(d[column].astype(str)).encode())
    h.update(np.ascontiguousarray(d["gain"].to_numpy(np.float64)).tobytes())
    return h.hexdigest()[:8]


class _GainMeasure(Measure):
    """nDCG with a calibration's gains; subclasses name the gain (RCP or Count)."""

    GAIN = "rcp"
    SUPPORTED_PARAMS = {
        "cutoff": ParamInfo(dtype=int, required=False, desc="ranking cutoff (default: the whole ranking)"),
        "calibration": ParamInfo(required=False, desc="an rcp_jax.Calibration or the folder `rcp-jax fit` wrote"),
        "protocol": ParamInfo(dtype=str, required=False, default="plain",
                              desc="tie rule and pool restriction: an rcp_jax.PROTOCOLS name"),
        "unjudged": ParamInfo(dtype=str, required=False, choices=UNJUDGED, default="error",
                              desc="a query of the run or qrels without gains: error (default) or zero"),
        "holes": ParamInfo(dtype=str, required=False, choices=HOLES, default="refuse",
                           desc="a top-k document without a gain: as rcp_jax.evaluate(holes=...)"),
    }

    def __call__(self, calibration=None, **params):
        """``RCP_nDCG(cal)``, ``RCP_nDCG(calibration="runs/fit", protocol="trecdl")``: a new measure."""
        if calibration is not None:
            params["calibration"] = gain_source(calibration)
        elif isinstance(params.get("calibration"), (str, Path)):
            params["calibration"] = gain_source(params["calibration"])
        return super().__call__(**params)

    def validate_params(self) -> None:
        if isinstance(self.params.get("calibration"), (str, Path)):  # parsed from "RCP_nDCG(calibration='...')"
            self.params["calibration"] = gain_source(self.params["calibration"])
        protocol = self.params.get("protocol", "plain")
        from rcp_jax.metrics import PROTOCOLS

        if protocol not in PROTOCOLS:
            raise DataError(f"{self.NAME}: unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
        for name, allowed in (("unjudged", UNJUDGED), ("holes", HOLES)):
            if self.params.get(name, allowed[0]) not in allowed:
                raise DataError(f"{self.NAME}: {name}={self.params[name]!r}; choose one of {', '.join(allowed)}")
        super().validate_params()

    def runtime_impl(self, qrels: pd.DataFrame, run: pd.DataFrame):
        """Yield one :class:`ir_measures.Metric` per query of the run (ir_measures adds 0 for qrels queries the run
        lacks): nDCG@cutoff with this measure's gains, as :func:`rcp_jax.evaluate` computes it."""
        from rcp_jax.evaluation import evaluate

        source = self.params.get("calibration")
        if source is None:
            raise DataError(f"{self.NAME} needs the gains it scores with: {self.NAME}(calibration)@10, where "
                            "calibration is an rcp_jax.Calibration or the folder `rcp-jax fit --out` wrote")
        cal = source.fitted
        gains = cal.gains() if self.GAIN == "rcp" else cal.count_gains()
        judged = set(gains["query_id"].astype(str))
        run = run.loc[:, ["query_id", "doc_id", "score"]].astype({"query_id": str, "doc_id": str})
        _refuse_unjudged(self, run, qrels, judged, f"{'RCP' if self.GAIN == 'rcp' else 'Count'} gains")
        cutoff = self.params.get("cutoff")
        scored = run.loc[run["query_id"].isin(judged)]
        if len(scored):
            k = cutoff if cutoff is not None else _whole_ranking(scored, gains)
            table = evaluate(scored.assign(system="run"), gains=gains, k=k,
                             protocol=self.params.get("protocol", "plain"), holes=self.params.get("holes", "refuse"))
            for qid, value in zip(table["query_id"], table["rcp_ndcg"]):
                yield ir_measures.Metric(qid, self, 0.0 if np.isnan(value) else float(value))
        for qid in pd.unique(run["query_id"]):
            if qid not in judged:  # unjudged="zero" (qrels-only queries get ir_measures' own 0)
                yield ir_measures.Metric(qid, self, 0.0)


def _whole_ranking(run: pd.DataFrame, gains: pd.DataFrame) -> int:
    """A cutoff deep enough for every ranked list and every ideal list (nDCG without a cutoff)."""
    return int(max(run.groupby("query_id").size().max(), gains.groupby("query_id").size().max()))


class _RCPnDCG(_GainMeasure):
    """RCP-nDCG: nDCG with the calibrated RCP gains; the ideal list is the query's pool in the tournament's order."""

    NAME = "RCP_nDCG"
    __name__ = "RCP_nDCG"
    GAIN = "rcp"
    PRETTY_NAME = "RCP-nDCG"
    SHORT_DESC = "nDCG with rubric-calibrated LLM relevance gains (rcp-jax)"


class _CountnDCG(_GainMeasure):
    """Count-nDCG: nDCG with the share of rubric criteria the judge said each document meets."""

    NAME = "Count_nDCG"
    __name__ = "Count_nDCG"
    GAIN = "count"
    PRETTY_NAME = "Count-nDCG"
    SHORT_DESC = "nDCG with the share of rubric criteria met (rcp-jax)"


#: Values of :data:`RCP_nDCG_Bayes`'s ``stat``: the posterior mean, sd, or an end of the equal-tailed interval.
STATS = ("mean", "sd", "lo", "hi")


def posterior_source(posterior):
    """A :class:`rcp_jax.Posterior`, or the one in the folder ``rcp-jax fit --method nuts|svi|laplace --out`` wrote
    (its ``posterior/`` subfolder, read here), as a :class:`GainSource`."""
    from rcp_jax.bayes.posterior import Posterior, load_posterior

    if isinstance(posterior, GainSource):
        return posterior
    if isinstance(posterior, Posterior):
        return GainSource(posterior, f"post#{hashlib.sha256(posterior.gain_draws.tobytes()).hexdigest()[:8]}")
    if isinstance(posterior, (str, Path)):
        path = Path(posterior)
        folder = path if (path / "posterior.json").is_file() else path / "posterior"
        if not (folder / "posterior.json").is_file():
            raise DataError(f"posterior {path}: neither {path / 'posterior.json'} nor {folder / 'posterior.json'} exists; "
                            "fit one with `rcp-jax fit --method nuts|svi|laplace --out DIR` and pass DIR")
        return GainSource(load_posterior(folder), repr(str(posterior)))
    raise DataError(f"RCP_nDCG_Bayes needs an rcp_jax.Posterior or the folder `rcp-jax fit --method ...` wrote, "
                    f"got {type(posterior).__name__}")


class _RCPnDCGBayes(Measure):
    """RCP-nDCG under the full posterior of the gains: per query, the posterior mean (or sd, or an end of the
    ``ci`` equal-tailed interval) of nDCG@cutoff, as ``rcp-jax evaluate --posterior`` computes it."""

    NAME = "RCP_nDCG_Bayes"
    __name__ = "RCP_nDCG_Bayes"
    PRETTY_NAME = "RCP-nDCG (posterior)"
    SHORT_DESC = "posterior mean or interval end of RCP-nDCG per query (rcp-jax)"
    SUPPORTED_PARAMS = {
        "cutoff": ParamInfo(dtype=int, required=False, desc="ranking cutoff (default: the whole ranking)"),
        "posterior": ParamInfo(required=False, desc="an rcp_jax.Posterior or the folder `rcp-jax fit --method` wrote"),
        "stat": ParamInfo(dtype=str, required=False, choices=STATS, default="mean",
                          desc="mean, sd, lo or hi of each query's posterior RCP-nDCG"),
        "ci": ParamInfo(dtype=float, required=False, default=0.9, desc="probability of the interval of lo / hi"),
        "protocol": ParamInfo(dtype=str, required=False, default="plain", desc="an rcp_jax.PROTOCOLS name"),
        "unjudged": ParamInfo(dtype=str, required=False, choices=UNJUDGED, default="error",
                              desc="a query of the run or qrels without gains: error (default) or zero"),
    }

    def __call__(self, posterior=None, **params):
        """``RCP_nDCG_Bayes("runs/fit", stat="lo")@10``: a new measure."""
        if posterior is not None or isinstance(params.get("posterior"), (str, Path)):
            params["posterior"] = posterior_source(posterior if posterior is not None else params["posterior"])
        return super().__call__(**params)

    def validate_params(self) -> None:
        if isinstance(self.params.get("posterior"), (str, Path)):
            self.params["posterior"] = posterior_source(self.params["posterior"])
        if self.params.get("stat", "mean") not in STATS:
            raise DataError(f"{self.NAME}: stat={self.params['stat']!r}; choose one of {', '.join(STATS)}")
        super().validate_params()

    def runtime_impl(self, qrels: pd.DataFrame, run: pd.DataFrame):
        """One :class:`ir_measures.Metric` per query of the run: the chosen statistic of its posterior RCP-nDCG."""
        import warnings

        from rcp_jax.bayes.posterior_ndcg import posterior_metrics

        source = self.params.get("posterior")
        if source is None:
            raise DataError(f"{self.NAME} needs a posterior: {self.NAME}('runs/fit')@10, the folder "
                            "`rcp-jax fit --method nuts|svi|laplace --out` wrote, or an rcp_jax.Posterior")
        post = source.fitted
        judged = {str(q) for q in post.inputs.query_ids}
        run = run.loc[:, ["query_id", "doc_id", "score"]].astype({"query_id": str, "doc_id": str})
        _refuse_unjudged(self, run, qrels, judged, "posterior gains")
        scored = run.loc[run["query_id"].isin(judged)]
        if len(scored):
            cutoff = self.params.get("cutoff")
            k = cutoff if cutoff is not None else int(max(scored.groupby("query_id").size().max(), post.inputs.mask.sum(1).max()))
            with warnings.catch_warnings():  # the system means' notes concern a table this measure does not report
                warnings.simplefilter("ignore")
                table = posterior_metrics(scored.assign(system="run"), post, k=k, protocol=self.params.get("protocol", "plain"),
                                          ci_prob=self.params.get("ci", 0.9), n_bootstrap=1).per_query
            stat = self.params.get("stat", "mean")
            for qid, value in zip(table["query_id"], table[stat]):
                yield ir_measures.Metric(str(qid), self, 0.0 if np.isnan(value) else float(value))
        for qid in pd.unique(run["query_id"]):
            if qid not in judged:
                yield ir_measures.Metric(qid, self, 0.0)


def _refuse_unjudged(measure, run: pd.DataFrame, qrels: pd.DataFrame, judged: set, what: str) -> None:
    """A DataError naming the queries of ``run`` and ``qrels`` outside ``judged``, unless ``unjudged="zero"``."""
    asked = pd.unique(pd.concat([run["query_id"], qrels["query_id"].astype(str)]))
    unjudged = [q for q in asked if q not in judged]
    if unjudged and measure.params.get("unjudged", "error") == "error":
        shown = ", ".join(repr(q) for q in unjudged[:5]) + (f" and {len(unjudged) - 5} more" if len(unjudged) > 5 else "")
        raise DataError(
            f"{measure!r}: {len(unjudged)} of the {len(asked)} queries of the run and qrels have no {what} in the "
            f"calibration ({shown}); ir_measures would count them as 0. Judge them, leave them out of the run and "
            "qrels, or pass unjudged='zero' to score them 0 on purpose"
        )


RCP_nDCG = _RCPnDCG()
Count_nDCG = _CountnDCG()
RCP_nDCG_Bayes = _RCPnDCGBayes()

for _measure in (RCP_nDCG, Count_nDCG, RCP_nDCG_Bayes):
    if _measure.NAME not in ir_measures.measures.registry:
        ir_measures.measures.register(_measure)
