"""Item response models of Stage B rubric answers (METHOD sections 2-3).

Three fits, all on answers collapsed to binomial cells ``(passes, trials)``:

* :func:`fit_2pl_calibration` - the RCP calibration, a 2PL on the frozen BT scores of each query, MAP
  (:mod:`~rcp_jax.models.irt.map_objective`, :mod:`~rcp_jax.models.irt.calibration_fit`; the cells laid out by
  :mod:`~rcp_jax.models.irt.cells`);
* :func:`fit_rasch` - per-query Rasch model, used to stratify Stage B windows (:mod:`~rcp_jax.models.irt.rasch`);
* :func:`fit_rubric_only` - a 2PL without a tournament, by marginal maximum likelihood
  (:mod:`~rcp_jax.models.irt.rubric_only`).

What they share (likelihood, item parameters, priors, placement counts) is in :mod:`~rcp_jax.models.irt.items`.
"""

from rcp_jax.models.irt.calibration_fit import MAX_T_STEP, CalibrationFit, fit_2pl_calibration
from rcp_jax.models.irt.map_objective import calibration_objective
from rcp_jax.models.irt.cells import (
    FINE_QUERY_SLOTS, MIN_CAL_CELLS, MIN_CAL_QUERIES, CalibrationCells, CriterionMajorCells, calibration_cells,
    criterion_major_cells,
)
from rcp_jax.models.irt.items import ALPHA_PRIOR_SD, DEFAULT_RIDGE, TAU_PRIOR_SD, collapse_placements, item_parameters
from rcp_jax.models.irt.rasch import fit_rasch
from rcp_jax.models.irt.rubric_only import RUBRIC_ONLY_RIDGE, RubricOnlyFit, fit_rubric_only, quadrature_grid

__all__ = [
    "ALPHA_PRIOR_SD", "DEFAULT_RIDGE", "FINE_QUERY_SLOTS", "MAX_T_STEP", "MIN_CAL_CELLS", "MIN_CAL_QUERIES",
    "RUBRIC_ONLY_RIDGE", "TAU_PRIOR_SD", "CalibrationCells", "CalibrationFit", "CriterionMajorCells", "RubricOnlyFit",
    "calibration_cells", "calibration_objective", "collapse_placements", "criterion_major_cells", "fit_2pl_calibration",
    "fit_rasch", "fit_rubric_only", "item_parameters", "quadrature_grid",
]
