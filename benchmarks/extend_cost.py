"""What `extend` costs per new document, measured with the simulated judge.

For each number ``n`` of new documents per query, a collection of ``--queries`` queries is judged with the
full schedule on pools of ``--pool`` documents and calibrated; one system then ranks the pool plus ``n``
documents nobody judged, and ``rcp_jax.extend`` judges those. Reported per ``n``: the calls the extension
made (tournament + rubric windows, re-asks of invalid answers included), per query and per new document,
beside the plan of :func:`rcp_jax.schedule.extension_counts`.

Run: ``.venv/bin/python -m benchmarks.extend_cost`` (6 queries x 40 documents; a few seconds per ``n`` on
two cores); ``--malformed 0.05`` to count re-asks of invalid answers too.
"""

from __future__ import annotations

import argparse

import pandas as pd

from benchmarks.fixtures.extension_cost import measure


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=6)
    p.add_argument("--pool", type=int, default=40, help="documents judged before the extension, per query")
    p.add_argument("--new", type=int, nargs="+", default=[1, 2, 3, 5, 10, 30], help="new documents per query")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--malformed", type=float, default=0.0, help="share of malformed answers (re-asked)")
    args = p.parse_args(argv)
    return [measure(n, queries=args.queries, pool=args.pool, seed=args.seed, malformed=args.malformed)
            for n in args.new]


if __name__ == "__main__":
    rows = main()
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.2f}"))
