"""Any number of criteria: recovery of known items at K = 3 and K = 7 on the simulator.

For each K, a collection (``--queries`` x ``--docs``, 7 rubric placements per document) is simulated with known
items (sum gamma = K, mean beta = 0) and exact BT scores, then fitted by the MAP calibration
(:func:`rcp_jax.calibrate`) and by the frozen model's posterior (NUTS): the largest error of gamma and beta,
the share of the 90% intervals holding the truth, the chains' largest R-hat and the CPU seconds. The joint
model takes any K the same way (its items are the same ``_items`` of :mod:`rcp_jax.models.bayes`).

    .venv/bin/python -m benchmarks.rubric_k                  # 20 x 40, 2 chains x 300 draws: a few minutes
    .venv/bin/python -m benchmarks.rubric_k --queries 8 --docs 25 --draws 100   # a quick look
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from benchmarks.fixtures.simulated_collections import RUBRIC_ITEMS, answer_table, exact_bt_scores, known_items


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--docs", type=int, default=40)
    ap.add_argument("--draws", type=int, default=300, help="NUTS warmup and draws per chain (default 300)")
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    import rcp_jax
    from rcp_jax.models.simulate import simulate_judgements
    from rcp_jax.bayes import posterior

    rows = []
    for k in RUBRIC_ITEMS:
        gamma, beta = known_items(k)
        sim = simulate_judgements(args.seed, [args.docs] * args.queries, gamma=gamma, beta=beta, rubric_placements=7.0)
        bt, answers = exact_bt_scores(sim), answer_table(sim)
        t0 = time.process_time()
        cal = rcp_jax.calibrate(bt, answers)
        rows.append({"K": k, "fit": "MAP", "max |gamma err|": np.abs(cal.gamma - gamma).max(),
                     "max |beta err|": np.abs(cal.beta - beta).max(), "gamma 90% cover": "", "beta 90% cover": "",
                     "max R-hat": "", "CPU s": time.process_time() - t0})
        t0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = posterior.fit_posterior(bt, answers, method="nuts", model="frozen", num_warmup=args.draws,
                                           num_samples=args.draws, num_chains=args.chains, seed=args.seed)
        it = post.items
        rows.append({"K": k, "fit": f"NUTS frozen ({args.chains}x{args.draws})",
                     "max |gamma err|": np.abs(it["gamma_mean"].to_numpy() - gamma).max(),
                     "max |beta err|": np.abs(it["beta_mean"].to_numpy() - beta).max(),
                     "gamma 90% cover": f"{int(((it['gamma_lo'] <= gamma) & (gamma <= it['gamma_hi'])).sum())}/{k}",
                     "beta 90% cover": f"{int(((it['beta_lo'] <= beta) & (beta <= it['beta_hi'])).sum())}/{k}",
                     "max R-hat": posterior.diagnostics_summary(post)["max_rhat"], "CPU s": time.process_time() - t0})
    table = pd.DataFrame(rows)
    print(f"{args.queries} queries x {args.docs} documents, 7 rubric placements, exact BT scores, seed {args.seed}")
    print(table.to_markdown(index=False, floatfmt=".3f"))


if __name__ == "__main__":
    main()
