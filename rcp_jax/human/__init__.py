"""Agreement of metrics with human graders (METHOD section 5, "Agreement with humans").

A **contest** shows graders one query and two systems' top-k lists (A and B); each grader grades every
shown document (0-3 by default). Each grader's own nDCG@k over the two lists picks a winner; the
majority of graders is the **verdict**. A metric (RCP-nDCG, qrel-nDCG, ...) names the list it scores
higher.

Where things live: the contest file schema and its reader in :mod:`rcp_jax.human.contests`, the
document-level analyses in :mod:`rcp_jax.human.documents`, the contest-level analyses and the report that
gathers everything in :mod:`rcp_jax.human.agreement`.
"""

from rcp_jax.human.agreement import (
    DEFAULT_BANDS,
    HeadToHead,
    clustered_proportion_ci,
    contest_verdicts,
    grader_verdicts,
    head_to_head,
    hit_rates,
    human_agreement_report,
    margin_auc,
)
from rcp_jax.human.contests import ContestSet, contests_from_frame, contests_from_records, load_contests
from rcp_jax.human.documents import (
    USEFUL_GRADE,
    document_grades,
    document_table,
    gain_ece,
    pairwise_accuracy,
    qrel_disagreement,
    query_mean_spearman,
)

__all__ = [
    "USEFUL_GRADE",
    "DEFAULT_BANDS",
    "ContestSet",
    "load_contests",
    "contests_from_records",
    "contests_from_frame",
    "grader_verdicts",
    "contest_verdicts",
    "clustered_proportion_ci",
    "HeadToHead",
    "head_to_head",
    "hit_rates",
    "margin_auc",
    "document_grades",
    "document_table",
    "pairwise_accuracy",
    "gain_ece",
    "query_mean_spearman",
    "qrel_disagreement",
    "human_agreement_report",
]
