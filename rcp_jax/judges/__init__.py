"""Several judges, one calibration.

- :mod:`~rcp_jax.judges.roster`: the judges a store holds (:func:`list_judges`) and ``--judges`` selection
  (:func:`select_judges`); a judge's tables are ``rcp_jax.store_tables(store, family=dict(judge.families))``.
- :mod:`~rcp_jax.judges.pooled`: the pooled 2PL with a severity and a scale per judge (:func:`fit_judges`,
  :class:`JudgesFit`, :func:`save_judges_fit`, :func:`load_judges_fit`).
- :mod:`~rcp_jax.judges.agreement`: Cohen's kappa per criterion on shared answers (:func:`judge_agreement`).
- :mod:`~rcp_jax.judges.by_judge`: the second-judge check, each system pair's call under each judge
  (:func:`per_judge_metrics`, :func:`compare_by_judge`).

Example::

    from rcp_jax import store_tables
    from rcp_jax.judges import fit_judges, select_judges
    judges = select_judges("store/", "gpt=openai/gpt-4o-mini,qwen=hosted_vllm/qwen")
    fit = fit_judges({j.name: store_tables("store/", family=dict(j.families), served_model=j.served)[:2]
                      for j in judges})
    fit.offsets      # judge, delta [90% interval], scale [interval]
"""

from rcp_jax.judges.agreement import cohen_kappa, judge_agreement, shared_answers
from rcp_jax.judges.by_judge import compare_by_judge, per_judge_metrics
from rcp_jax.judges.pooled import JudgesFit, fit_judges, load_judges_fit, save_judges_fit
from rcp_jax.judges.roster import JudgeInfo, list_judges, select_judges

__all__ = [
    "JudgeInfo",
    "JudgesFit",
    "cohen_kappa",
    "compare_by_judge",
    "fit_judges",
    "judge_agreement",
    "list_judges",
    "load_judges_fit",
    "per_judge_metrics",
    "save_judges_fit",
    "select_judges",
    "shared_answers",
]
