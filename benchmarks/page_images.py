"""What judging a page-image corpus costs: ``rcp-jax judge --estimate`` on a 10-query corpus of page images.

The corpus is drawn by ``benchmarks/fixtures/page_corpus.py`` (text rendered to PNG with matplotlib): 10 queries x
``--docs`` documents, a third of them page + extracted text, a third page only, a third text only; pages of
``--page-inches`` at ``--dpi`` (8.5 x 11 in at 100 dpi: 850 x 1100 px, a letter page). Pools come from
``rcp-jax pool --depth`` (lexical, so page-only documents enter as swapped-in qrel positives). Each model's
plan is ``rcp-jax judge --estimate --json`` in this process; nothing is called.

Models: ``openai/gpt-4o-mini`` and ``openai/gpt-4o`` (litellm's OpenAI tile rules and prices),
``anthropic/claude-sonnet-4-5`` (litellm's Anthropic patch rule), ``hosted_vllm/qwen2.5-vl`` (no litellm
rule: the documented 28 x 28-pixel approximation) and the simulated judge (chars/4 + the approximation).

Usage: ``python -m benchmarks.page_images [--docs 30] [--depth 30] [--dpi 100]``; writes
``benchmarks/out/page_images.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MODELS = ("simulated", "openai/gpt-4o-mini", "openai/gpt-4o", "anthropic/claude-sonnet-4-5", "hosted_vllm/qwen2.5-vl")


def _cli(*argv: str) -> dict:
    from rcp_jax.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    if code:
        raise SystemExit(f"rcp-jax {' '.join(argv)} exited {code}")
    return json.loads(out.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=30, help="documents per query (default 30)")
    ap.add_argument("--depth", type=int, default=30, help="pool depth (default 30)")
    ap.add_argument("--dpi", type=int, default=100, help="page resolution (default 100)")
    ap.add_argument("--page-inches", type=float, nargs=2, default=(8.5, 11.0), help="page size (default 8.5 11)")
    args = ap.parse_args()
    from benchmarks.fixtures.page_corpus import make_page_corpus

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "pages10"
        t = time.perf_counter()
        info = make_page_corpus(folder, 10, args.docs, size=tuple(args.page_inches), dpi=args.dpi)
        drawn = time.perf_counter() - t
        pooled = _cli("pool", "--dataset", str(folder), "--depth", str(args.depth), "--out", f"{tmp}/pools.tsv", "--json")
        rows = []
        for model in MODELS:
            t = time.perf_counter()
            plan = _cli("judge", "--dataset", str(folder), "--pools", f"{tmp}/pools.tsv", "--model", model,
                        "--estimate", "--json")
            plan["seconds"] = round(time.perf_counter() - t, 2)
            rows.append(plan)
    kinds = {k: sum(v == k for v in info["kinds"].values()) for k in ("both", "image", "text")}
    result = {"queries": 10, "docs_per_query": args.docs, "depth": args.depth, "page_px":
              [round(args.page_inches[0] * args.dpi), round(args.page_inches[1] * args.dpi)], "kinds": kinds,
              "pool": pooled, "draw_seconds": round(drawn, 1), "plans": rows}
    out = ROOT / "benchmarks" / "out" / "page_images.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"10 queries, {args.docs} docs each ({kinds}), pages {result['page_px'][0]}x{result['page_px'][1]} px, "
          f"pooled {pooled['min_pool']}-{pooled['max_pool']} per query, {pooled['pooled_with_image']} pooled with an image")
    print("| model | calls | input tokens | output tokens | cost (USD) | image tokens counted with |")
    print("|---|---:|---:|---:|---:|---|")
    for p in rows:
        cost = "unknown" if p["cost_usd"] is None else f"{p['cost_usd']:.2f}"
        rule = p["token_method"].split("images", 1)[-1].strip(" :")
        print(f"| `{p['model']}` | {p['calls']:,} | {p['input_tokens']:,} | {p['output_tokens']:,} | {cost} | {rule} |")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
