"""rcp-jax in the IR toolchain: RCP-nDCG and Count-nDCG as ir_measures measures (needs ``rcp-jax[ir]``).

Importing this package registers the measures with ir_measures::

    from rcp_jax.ir import RCP_nDCG
    import ir_measures
    ir_measures.calc_aggregate([RCP_nDCG("runs/fit")@10, "nDCG@10"], qrels, run)
    ir_measures.parse_measure("RCP_nDCG(calibration='runs/fit')@10")
    RCP_nDCG_Bayes("runs/fit", stat="lo")@10   # the lower end of each query's 90% posterior interval
"""

from rcp_jax.ir.measures import Count_nDCG, GainSource, RCP_nDCG, RCP_nDCG_Bayes, gain_source, posterior_source

__all__ = ["RCP_nDCG", "Count_nDCG", "RCP_nDCG_Bayes", "GainSource", "gain_source", "posterior_source"]
