"""A 1,000,000-call judging run as batches, on paper: sequential batches, wall time, cost at batch vs online prices,
store size.

The protocol at ``--pool`` documents per query (150: 316 calls per query, the paper's scale) is scaled to
``--calls`` calls (the queries it takes, rounded up). Each protocol phase is one batch across all queries
(:func:`rcp_jax.cli._batch.batch_phases`): rounds 1 and 2, each adaptive round-3 step, the two rubric halves.

- **Tokens per call** come from :func:`rcp_jax.judging.estimate_cost` on the embedded demo collection (its
  round-1 and balanced-rubric windows of 10 documents, the window size of every pool of 10 or more), per stage,
  counted with litellm's tokenizer for each model; re-asks of invalid answers are not included.
- **Prices** are litellm's cost map (``litellm.model_cost``, the local copy): ``input_cost_per_token`` /
  ``output_cost_per_token`` online, ``input_cost_per_token_batches`` / ``output_cost_per_token_batches`` in a batch.
- **Wall time** is the number of sequential batches times a turnaround per batch (``--turnaround-hours``): 24 h is
  the window OpenAI and Anthropic promise for each batch; 1 h is what most batches take in practice (see
  RESULTS.md for the sources). Phases larger than a provider's per-batch cap (OpenAI 50,000 requests or 200 MB per
  file; Anthropic 100,000 requests) go as several batches submitted at once, which adds no sequential step.
- **Store size** is measured: the demo's windows judged by the simulated judge into a store (the same records the
  demo writes), bytes per line per stage; then with a real judge's answer text in place of the simulated one's
  (:func:`rcp_jax.judging.estimate.representative_answer`, ``--reasoning-words`` words of reasoning, as the estimate
  assumes), times the calls of each stage.

Run: ``.venv/bin/python -m benchmarks.batch_cost`` (seconds; no network: litellm's local cost map).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import warnings
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MODELS = ("openai/gpt-4o-mini-2024-07-18", "anthropic/claude-sonnet-4-5-20250929")


def demo_windows():
    """(queries, documents, latent, windows): the demo collection's round-1 and balanced-rubric windows."""
    from rcp_jax import schedule as S
    from rcp_jax.demo import load_demo

    demo = load_demo()
    texts = demo.document_texts()
    queries = dict(zip(demo.queries["query_id"].astype(str), demo.queries["text"]))
    latent: dict[str, dict[str, float]] = {}
    for q, d, v in demo.latent[["query_id", "doc_id", "latent"]].itertuples(index=False):
        latent.setdefault(str(q), {})[str(d)] = float(v)
    windows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", S.ScheduleWarning)
        for q, g in demo.pools.sort_values(["query_id", "rank"]).groupby("query_id"):
            docs = [str(d) for d in g["doc_id"]]
            windows += S.tournament_round1(str(q), docs, seed=0, dataset="rcp-jax-demo")
            windows += S.rubric_balanced(str(q), docs, seed=0, dataset="rcp-jax-demo")
    return queries, texts, latent, windows


def tokens_per_call(model: str, queries, texts, windows) -> dict[str, tuple[float, float]]:
    """stage -> (input, output) tokens per call of ``model`` on the demo windows."""
    from rcp_jax.judging import LiteLLMJudge, estimate_cost

    est = estimate_cost(windows, judge=LiteLLMJudge(model), documents=texts, queries=queries)
    return {s: (v["input_tokens"] / v["calls"], v["output_tokens"] / v["calls"]) for s, v in est.per_stage.items()}


def bytes_per_record(queries, texts, latent, windows, reasoning_words: int) -> dict[str, dict[str, float]]:
    """stage -> {"simulated": bytes per stored line as the demo writes it, "real answer": the same line with a real
    judge's answer text of ``reasoning_words`` words of reasoning}."""
    from rcp_jax.judging import SimulatedJudge, judge_windows_sync
    from rcp_jax.judging.estimate import representative_answer

    out = {}
    with tempfile.TemporaryDirectory() as folder:
        judge_windows_sync(windows, judge=SimulatedJudge(latent, seed=0), store=folder, documents=texts,
                           queries=queries)
        for stage in ("tournament", "rubric"):
            lines = Path(folder, f"{stage}.jsonl").read_bytes().splitlines()
            size = sum(len(x) + 1 for x in lines) / len(lines)
            real = []
            for raw in lines:
                rec = json.loads(raw)
                answer = representative_answer(stage, len(rec["window"]["doc_ids"]), 5, reasoning_words)
                rec["raw_response"] = answer
                real.append(len(json.dumps(rec, ensure_ascii=False).encode()) + 1)
            out[stage] = {"simulated": size, "real answer": sum(real) / len(real)}
    return out


def main(argv=None) -> dict:
    import litellm

    from rcp_jax import schedule as S
    from rcp_jax.cli._batch import batch_phases

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=1_000_000)
    p.add_argument("--pool", type=int, default=150, help="documents per query (150: 316 calls per query)")
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--turnaround-hours", type=float, nargs="+", default=[1.0, 24.0])
    p.add_argument("--reasoning-words", type=int, default=60)
    args = p.parse_args(argv)

    counts = S.schedule_counts(args.pool)
    per_query = {"tournament": counts.tournament_calls, "rubric": counts.rubric_windows}
    n_queries = math.ceil(args.calls / sum(per_query.values()))
    calls = {s: n * n_queries for s, n in per_query.items()}
    phases = batch_phases([counts] * n_queries)
    queries, texts, latent, windows = demo_windows()
    print(f"{args.calls:,} calls: {n_queries:,} queries x {sum(per_query.values())} calls "
          f"({per_query['tournament']} tournament + {per_query['rubric']} rubric) at {args.pool} documents per query "
          f"= {sum(calls.values()):,} calls")
    print(f"sequential batches: {len(phases)} (" + ", ".join(f"{n} {c:,}" for n, c in phases) + "), plus one per "
          "re-ask round")
    print("  OpenAI files of 50,000 requests per phase: "
          + ", ".join(f"{n} {math.ceil(c / 50_000)}" for n, c in phases) + " (submitted together)")
    for h in args.turnaround_hours:
        total = len(phases) * h
        print(f"wall time at {h:g} h per batch: {total:g} h ({total / 24:.1f} days)")
    rows = []
    for model in args.models:
        key = model.split("/", 1)[1]
        prices = litellm.model_cost[key]
        per_call = tokens_per_call(model, queries, texts, windows)
        tin = sum(calls[s] * per_call[s][0] for s in calls)
        tout = sum(calls[s] * per_call[s][1] for s in calls)
        online = tin * prices["input_cost_per_token"] + tout * prices["output_cost_per_token"]
        batch = tin * prices["input_cost_per_token_batches"] + tout * prices["output_cost_per_token_batches"]
        rows.append({"model": model, "input tokens/call": {s: round(v[0]) for s, v in per_call.items()},
                     "output tokens/call": {s: round(v[1]) for s, v in per_call.items()},
                     "input tokens": tin, "output tokens": tout, "online USD": online, "batch USD": batch})
        print(f"{model}: {tin / 1e9:.3f} G input + {tout / 1e9:.3f} G output tokens "
              f"(per call: tournament {per_call['tournament'][0]:.0f} + {per_call['tournament'][1]:.0f}, rubric "
              f"{per_call['rubric'][0]:.0f} + {per_call['rubric'][1]:.0f}); online ${online:,.0f}, batch ${batch:,.0f}")
    sizes = bytes_per_record(queries, texts, latent, windows, args.reasoning_words)
    for kind in ("simulated", "real answer"):
        total = sum(calls[s] * sizes[s][kind] for s in calls)
        print(f"store, {kind}: tournament {sizes['tournament'][kind]:,.0f} B/record, rubric "
              f"{sizes['rubric'][kind]:,.0f} B/record; {total / 2**30:.2f} GiB for {sum(calls.values()):,} records "
              "(one valid record per call; invalid answers add a record each)")
    return {"queries": n_queries, "calls": calls, "phases": phases, "models": rows, "bytes_per_record": sizes}


if __name__ == "__main__":
    main()
