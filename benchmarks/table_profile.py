"""Where the public BT + 2PL calls spend their time, part by part (table work vs kernels).

Times warm calls of ``rcp_jax.fit_bradley_terry(window_scores)`` and ``rcp_jax.calibrate(bt, answers)`` on the
benchmark tables of :mod:`benchmarks.public_api_speed` (string ids, 150 documents and 216 windows of 10 per
query) and splits them into parts by wrapping the functions they call (wall and process CPU seconds per
part, summed over a call, medians over ``--repeats``):

* public BT: ``encode`` (``encode_window_scores``), ``encode alone`` (wall time of encoding with no
  ``fit_windows`` call running), ``bt kernel`` (``fit_windows``) and the rest (wall minus encode and kernel: the output frame; negative when
  the two overlap). The CPU of a part is the process's, so it includes threads running beside it;
* ``calibrate``: ``validate`` (``validate_answers``), ``lookup`` (``answer_counts``: answers matched to BT rows and counted), ``cells``
  (``calibration_cells`` or ``criterion_major_cells``), ``2pl layout`` (``_criterion_major``), ``2pl compiled`` (the compiled Newton
  solve, blocked until ready; ``iterations`` beside it), ``2pl host`` (the rest of ``fit_2pl_calibration``),
  ``flags`` and the rest (frames, gains).

``--save DIR`` writes the outputs (BT frame and attrs, the calibration's frames, gamma, beta, ``repr(info)``),
``--compare DIR`` checks them bit for bit against a saved run. ``--cprofile FILE`` writes the cProfile
statistics of one warm BT + calibrate call (top 40 by cumulative time).

Usage: ``.venv/bin/python -m benchmarks.table_profile --n 1000 [--repeats 3] [--save DIR] [--compare DIR]``.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

_parts: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
_extra: dict[str, object] = {}
_spans: dict[str, list[tuple[float, float]]] = defaultdict(list)


def _wrap(module, name: str, label: str, block: bool = False) -> None:
    inner = getattr(module, name)

    def wrapper(*args, **kwargs):
        t, c = time.perf_counter(), time.process_time()
        out = inner(*args, **kwargs)
        if block:
            import jax

            jax.block_until_ready(out)
            _extra["iterations"] = int(out[5])
        end = time.perf_counter()
        _spans[label].append((t, end))
        _parts[label][0] += end - t
        _parts[label][1] += time.process_time() - c  # process CPU: other threads' work included
        return out

    setattr(module, name, wrapper)


def _instrument() -> None:
    import rcp_jax.models.bradley_terry as bt_mod
    import rcp_jax.models.irt as irt
    import rcp_jax.models.irt.calibration_fit as irt_fit
    import rcp_jax.calibration as cal
    import rcp_jax.tournament as tour

    _wrap(tour, "encode_window_scores", "encode")
    _wrap(bt_mod, "fit_windows", "bt kernel")
    _wrap(cal, "validate_answers", "validate")
    _wrap(cal, "answer_counts", "lookup")
    _wrap(irt, "calibration_cells", "cells")
    if hasattr(irt, "criterion_major_cells"):
        _wrap(irt, "criterion_major_cells", "cells")
    _wrap(irt_fit, "_criterion_major", "2pl layout")
    _wrap(irt_fit, "_calibrate_newton", "2pl compiled", block=True)
    _wrap(irt, "fit_2pl_calibration", "2pl fit")
    if hasattr(cal, "_flags_by_code"):
        _wrap(cal, "_flags_by_code", "flags")


def _alone(spans, beside) -> float:
    """Seconds of the intervals ``spans`` [(start, end)] not covered by any of ``beside`` (disjoint intervals)."""
    total = 0.0
    for a, b in spans:
        total += (b - a) - sum(max(0.0, min(b, d) - max(a, c)) for c, d in beside)
    return total


def _outputs(bt, calib) -> dict:
    return {
        "bt": bt, "n_components": list(bt.attrs["n_components"].items()), "queries": calib.queries,
        "documents": calib.documents, "gamma": calib.gamma, "beta": calib.beta, "info": repr(calib.info),
    }


def _compare(saved: dict, now: dict) -> list[str]:
    import pandas as pd

    bad = []
    for key in ("bt", "queries", "documents"):
        try:
            pd.testing.assert_frame_equal(saved[key], now[key], check_exact=True)
        except AssertionError as err:
            bad.append(f"{key}: {str(err)[:300]}")
    for key in ("gamma", "beta"):
        if not np.array_equal(saved[key], now[key]):
            bad.append(f"{key} differs: max {np.abs(saved[key] - now[key]).max():.3g}")
    for key in ("n_components", "info"):
        if saved[key] != now[key]:
            bad.append(f"{key} differs")
    return bad


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="queries (default 1000)")
    ap.add_argument("--repeats", type=int, default=3, help="warm repeats (default 3)")
    ap.add_argument("--save", help="write the outputs to this folder (default: none)")
    ap.add_argument("--compare", help="compare the outputs with this saved folder (default: none)")
    ap.add_argument("--cprofile", help="write cProfile statistics of one warm call here (default: none)")
    ap.add_argument("--no-parts", action="store_true", help="time whole calls only (default: parts too)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    from benchmarks import _common as C
    from benchmarks.public_api_speed import tables

    import rcp_jax

    if not args.no_parts:
        _instrument()
    data = C.collection(args.n)
    ws, ans = tables(args.n, data)
    del data
    print(f"{rcp_jax.__file__}: {args.n} queries, {len(ws):,} window rows, {len(ans):,} rubric rows; "
          f"load {os.getloadavg()[0]:.2f}", flush=True)

    def both():
        bt = rcp_jax.fit_bradley_terry(ws)
        return bt, rcp_jax.calibrate(bt, ans)

    bt, calib = both()  # cold
    rows = defaultdict(list)
    for _ in range(args.repeats):
        _parts.clear()
        _spans.clear()
        t, c = time.perf_counter(), time.process_time()
        bt = rcp_jax.fit_bradley_terry(ws)
        t1, c1 = time.perf_counter(), time.process_time()
        calib = rcp_jax.calibrate(bt, ans)
        t2, c2 = time.perf_counter(), time.process_time()
        rows["public BT"].append((t1 - t, c1 - c))
        rows["calibrate"].append((t2 - t1, c2 - c1))
        rows["BT + 2PL"].append((t2 - t, c2 - c))
        if not args.no_parts:
            rows["encode alone"].append((_alone(_spans["encode"], _spans["bt kernel"]), float("nan")))
        for label, (w, cpu) in _parts.items():
            rows[label].append((w, cpu))
        if not args.no_parts:
            p = _parts
            rows["BT rest (frame)"].append((t1 - t - p["encode"][0] - p["bt kernel"][0],
                                            c1 - c - p["encode"][1] - p["bt kernel"][1]))
            fit_w = p["2pl fit"][0] - p["2pl layout"][0] - p["2pl compiled"][0]
            fit_c = p["2pl fit"][1] - p["2pl layout"][1] - p["2pl compiled"][1]
            rows["2pl host"].append((fit_w, fit_c))
            known = ("validate", "lookup", "cells", "2pl fit", "flags")
            rows["calibrate rest"].append((t2 - t1 - sum(p[k][0] for k in known if k in p),
                                           c2 - c1 - sum(p[k][1] for k in known if k in p)))
    print(f"load {os.getloadavg()[0]:.2f}; 2PL iterations {_extra.get('iterations')}; medians of {args.repeats}:")
    print("| part | wall s | CPU s |\n|---|---:|---:|")
    for label, vals in rows.items():
        print(f"| {label} | {statistics.median(v[0] for v in vals):.3f} | {statistics.median(v[1] for v in vals):.3f} |")
    now = _outputs(bt, calib)
    if args.save:
        Path(args.save).mkdir(parents=True, exist_ok=True)
        with open(Path(args.save) / f"outputs_{args.n}.pkl", "wb") as fh:
            pickle.dump(now, fh)
        print(f"saved {args.save}")
    if args.compare:
        with open(Path(args.compare) / f"outputs_{args.n}.pkl", "rb") as fh:
            bad = _compare(pickle.load(fh), now)
        print("IDENTICAL to " + args.compare if not bad else "DIFFERENT:\n  " + "\n  ".join(bad))
    if args.cprofile:
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        both()
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(40)
        Path(args.cprofile).write_text(out.getvalue())
        print(f"wrote {args.cprofile}")


if __name__ == "__main__":
    main()
