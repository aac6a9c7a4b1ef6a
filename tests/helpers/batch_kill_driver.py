"""Runs batch judging in this process and SIGKILLs itself at a chosen moment (the batch kill tests run it as a
subprocess against a fake Files + Batches server living in the test process).

Usage: ``python tests/helpers/batch_kill_driver.py SPEC.json``. The spec (JSON object) holds:

- ``argv``: an ``rcp-jax`` command line (``["judge", "--batch", ...]``), run by ``rcp_jax.cli.main``; or
- ``plan``: ``{"url", "store"}``: :func:`rcp_jax.judging.judge_windows_batch_sync` of :func:`plan_windows` with a
  litellm judge at ``url`` (no JAX: the fast variant);
- ``kill`` (optional), where this process dies:

  * ``journal:<n>``: right after the n-th batch journal event of this process is durable;
  * ``upload:<n>`` / ``create:<n>``: right after the n-th request file upload / batch creation returned, before
    the journal hears of it (a file or a batch the server holds and the journal does not);
  * ``retrieve:<n>``: right after the n-th poll of a batch returned (while waiting);
  * ``append:<n>``: in the n-th bulk append of an ingest, half its records written and fsynced;
  * ``time:<seconds>``: that many seconds after the imports are done (litellm alone takes seconds), wherever the
    run is.

Exits with the command's code (0 for ``plan``); prints ``{"valid": n}`` for a ``plan`` run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def plan_windows():
    """(queries, documents, latent, windows) of the fast variant: 3 queries x 12 documents, 4 tournament and
    4 rubric windows each."""
    from rcp_jax.judging import Window, synthetic_dataset

    queries, documents, latent = synthetic_dataset(3, 12, seed=7, doc_chars=300)
    windows = []
    for qid, docs in documents.items():
        ids = sorted(docs)
        for s in range(4):
            chunk = tuple(ids[(s * 5 + k) % len(ids)] for k in range(5))
            windows.append(Window(qid, "tournament", "round1", s, chunk))
            windows.append(Window(qid, "rubric", "balanced", s, chunk[::-1]))
    return queries, documents, latent, windows


def _install(kill: str) -> None:
    from rcp_jax.judging.batch.backends import ProviderBatches
    from rcp_jax.judging.batch.journal import BatchJournal
    from rcp_jax.judging.store.jsonl import JudgementStore

    if not kill:
        return
    point, _, arg = kill.partition(":")
    if point == "time":
        timer = threading.Timer(float(arg), _die)
        timer.daemon = True
        timer.start()
        return
    target, seen = int(arg), [0]

    def counted(original, *, half: bool = False):
        def wrapper(self, *args, **kwargs):
            seen[0] += 1
            if half and seen[0] == target:
                items = list(args[0])
                original(self, items[: max(1, len(items) // 2)])
                _die()
            out = original(self, *args, **kwargs)
            if seen[0] == target:
                _die()
            return out

        return wrapper

    where = {"journal": (BatchJournal, "write"), "upload": (ProviderBatches, "upload"),
             "create": (ProviderBatches, "create"), "retrieve": (ProviderBatches, "retrieve"),
             "append": (JudgementStore, "append_many")}
    cls, name = where[point]
    setattr(cls, name, counted(getattr(cls, name), half=point == "append"))


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as fh:
        spec = json.load(fh)
    import litellm  # noqa: F401 - imported before the clock of a time: kill starts

    import rcp_jax.cli  # noqa: F401

    _install(spec.get("kill") or "")
    if spec.get("argv"):
        from rcp_jax.cli import main as cli_main

        return cli_main(spec["argv"])
    from rcp_jax.judging import LiteLLMJudge, ProviderBatches, judge_windows_batch_sync

    queries, documents, _, windows = plan_windows()
    url = spec["plan"]["url"]
    judge = LiteLLMJudge("openai/fake-judge", api_base=url, api_key="sk-kill", structured_output="off")
    backend = ProviderBatches.for_judge(judge)
    backend.backoff_base = backend.backoff_max = 0.01
    out = judge_windows_batch_sync(windows, judge=judge, store=spec["plan"]["store"], documents=documents,
                                   queries=queries, batches=backend, poll_seconds=0.02)
    print(json.dumps({"valid": len(out)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
