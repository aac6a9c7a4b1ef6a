"""Tables as arrays: window scores, rubric answers, runs and id columns as integer codes.

* :mod:`~rcp_jax.encoding.ids`: id columns of any dtype as integer codes (runs, positions, orders);
* :mod:`~rcp_jax.encoding.windows`: window scores as the Bradley-Terry kernel's arrays
  (:func:`encode_window_scores`, :class:`WindowArrays`);
* :mod:`~rcp_jax.encoding.answers`: rubric answers as placement and pass counts per BT row;
* :mod:`~rcp_jax.encoding.runs`: run rows joined to their pool positions and gains, grouped by (system, query);
* :mod:`~rcp_jax.encoding.threads`: independent GIL-free calls run side by side.
"""

from rcp_jax.encoding.windows import WindowArrays, encode_window_scores

__all__ = ["WindowArrays", "encode_window_scores"]
