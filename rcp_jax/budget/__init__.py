"""Budgeted judging: pay for the judgements that change system-pair decisions.

Given the runs of the systems to compare and a budget (calls, or a fraction of the fixed protocol's), the
loop (:mod:`rcp_jax.budget.loop`) judges a **seed** - per query, the fixed round 1's first un-mirrored
windows (about 2 placements per document) and its first 5 balanced rubric windows - then repeats:

1. one batched refit of every query: Bradley-Terry (:func:`rcp_jax.fit_bradley_terry`) and the 2PL
   calibration (:func:`rcp_jax.calibrate`), turned into a Gaussian posterior of every gain
   (:mod:`rcp_jax.budget.gains`: BT standard errors plus each query's (tau, alpha) covariance);
2. every system pair's call under the decision rule of :func:`rcp_jax.bayes.posterior_ndcg.decide`
   (combined calibration and query-sampling draws of the difference of mean RCP-nDCG@k), and whether an
   undecided pair is still in reach of judging (:mod:`rcp_jax.budget.decisions`);
3. stop when every pair is decided (``A>B``, ``B>A`` or ``equivalent``), when every undecided pair is out
   of reach, or when the budget is spent;
4. otherwise choose the next round's windows by the criterion of :mod:`rcp_jax.budget.select`: the
   expected shrinkage of the open pairs' (relative) posterior variance per call, attributed to documents
   through ``|dDelta/dgain| = |discount_A(d) - discount_B(d) - Delta_q discount_ideal(d)| / IDCG_q`` and the
   gain's variance, with least-shown documents in every window as an exploration floor; judge them into
   the store and go to 1.

Every answer goes to the append-only store, under the fixed protocol's store identity: a killed run
resumes, a run with a larger budget continues, and the fixed protocol run later into the same store pays
only for the windows the budgeted run did not ask (the seed's windows are the fixed schedule's own; the
adaptive windows, phases ``budget_r001``..., stay in the store as extra data for ``rcp-jax fit``).
The fixed protocol stays the default of ``rcp-jax judge`` and the reference.
"""

from rcp_jax.budget.decisions import PairDecisions, decide_pairs, pair_gradients, run_weights
from rcp_jax.budget.gains import GainPosterior, gain_posterior
from rcp_jax.budget.loop import (
    STOP_REASONS,
    BudgetResult,
    BudgetSettings,
    RoundReport,
    full_protocol_calls,
    judge_budgeted,
    judge_budgeted_async,
    resolve_budget,
    seed_windows,
)
from rcp_jax.budget.select import document_values, pair_weights, plan_round

__all__ = [
    "BudgetSettings",
    "BudgetResult",
    "RoundReport",
    "STOP_REASONS",
    "judge_budgeted",
    "judge_budgeted_async",
    "full_protocol_calls",
    "resolve_budget",
    "seed_windows",
    "GainPosterior",
    "gain_posterior",
    "PairDecisions",
    "decide_pairs",
    "pair_gradients",
    "run_weights",
    "document_values",
    "pair_weights",
    "plan_round",
]
