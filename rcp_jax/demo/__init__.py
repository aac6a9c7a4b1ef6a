"""The embedded demo dataset: 212 short documents on 15 topics, 20 queries, pools, runs and latent truth.

Everything was written for rcp-jax (no text comes from elsewhere) so that the demo reads naturally to a
real LLM judge and also drives the offline simulated judge. Per query, the pooled documents span the
relevance range on purpose: thorough direct answers, brief direct answers, partial answers, documents on
the topic that do not answer, lexical traps that share words with the query but not its meaning, and
unrelated documents. The qrels are deliberately sparse, as real qrels are: two or three obvious best
documents per query are labelled, other useful ones are not.

The files are in ``rcp_jax/demo/files/``:
``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv`` and ``latent.jsonl`` are hand-written and read by
:mod:`rcp_jax.demo.sources`; ``pools.tsv`` and ``runs.tsv`` are derived by :mod:`rcp_jax.demo.rebuild`
(``python -m rcp_jax.demo.rebuild`` regenerates them). :mod:`rcp_jax.demo.dataset` loads them all.

Example:
    >>> from rcp_jax.demo.dataset import load_demo
    >>> demo = load_demo()
    >>> len(demo.corpus), len(demo.queries)
    (212, 20)
"""

from rcp_jax.demo.dataset import INPUT_FILES, DemoData, load_demo, write_demo_inputs
from rcp_jax.demo.sources import read_pools, read_runs

__all__ = ["DemoData", "INPUT_FILES", "load_demo", "read_pools", "read_runs", "write_demo_inputs"]
