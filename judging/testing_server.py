"""A fake OpenAI-compatible chat-completions server answering with the simulated judge.

It reads the window back from the prompt text alone (the query block and the ``<doc>`` blocks inside
``<documents>``), maps each text to its document id, and answers with
:meth:`judging.offline.SimulatedJudge.answer`, so litellm's real network path can be exercised on
127.0.0.1 with known answers. Faults (429, 500, 401, slow answers) and a fixed latency can be injected.

It serves ``POST /v1/chat/completions`` (and ``/chat/completions``) and ``GET /v1/models``.

In tests (a background thread with its own event loop)::

    with FakeOpenAIServer(SimulatedJudge(latent), queries=queries, documents=documents) as server:
        judge = LiteLLMJudge("openai/fake-judge", api_base=server.url, api_key="sk-anything")

From the command line (used by the benchmark; prints ``READY <url>`` once listening)::

    python -m judging.testing_server --synthetic 8 40 0 --latency 0.2

Stage detection: a prompt whose text contains ``"criteria"`` is a rubric window (K = the largest
``"C<k>"`` it mentions), anything else a tournament window. Documents the server cannot identify get
the judge's ``unknown_latent``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from judging.lookup import PerQuery
from judging.offline import SimulatedJudge, synthetic_dataset
from judging.render import TRUNCATION_MARKER, read_rendered


@dataclass(frozen=True)
class Fault:
    """What to do instead of (or before) answering a request.

    Attributes
    ----------
    status : answer with this HTTP error status (e.g. 429, 500, 401); ``None``: answer normally.
    delay : seconds to wait first (a slow answer; with ``status=None`` the answer still comes).
    retry_after : value of the ``Retry-After`` header sent with an error status.
    message : the error message (default ``"injected fault <status>"``), e.g. a context-length text.
    """

    status: int | None = None
    delay: float = 0.0
    retry_after: float | None = None
    message: str | None = None


@dataclass(frozen=True)
class FaultContext:
    """The request a fault plan decides about: global 0-based ``index``, the prompt's ``key`` (same
    window, same key) and ``seen``, how many earlier requests carried that key."""

    index: int
    key: str
    seen: int


FaultPlan = Callable[[FaultContext], Fault | None]


def per_window(*faults: Fault | None) -> FaultPlan:
    """A plan giving the k-th request of every window ``faults[k]`` (then answering normally)."""

    def plan(ctx: FaultContext) -> Fault | None:
        return faults[ctx.seen] if ctx.seen < len(faults) else None

    return plan


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


class FakeOpenAIServer:
    """See the module docstring.

    Parameters
    ----------
    judge : the simulated judge that writes the answers.
    queries : ``{query_id: text}`` used to recognise the query of a prompt.
    documents : document texts in either shape accepted by :func:`judging.judge_windows`.
    latency : seconds every answered request waits before answering.
    faults : a :data:`FaultPlan` (see :func:`per_window`); ``None``: no faults.
    api_key : when set, requests must carry ``Authorization: Bearer <api_key>``, else 401 (whose
        message echoes the presented key, as some servers do, so tests can check it is redacted).
    host, port : where to listen (port 0: any free port).
    """

    def __init__(
        self,
        judge: SimulatedJudge,
        *,
        queries: Mapping[str, str] | None = None,
        documents: Mapping[str, str] | Mapping[str, Mapping[str, str]] | None = None,
        latency: float = 0.0,
        faults: FaultPlan | None = None,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.judge = judge
        self.latency = float(latency)
        self.faults = faults
        self.api_key = api_key
        self.host = host
        self.port = port
        self._query_ids = {text: qid for qid, text in (queries or {}).items()}
        self._docs: PerQuery[str] = PerQuery(documents or {})
        self._text_index: dict[str | None, dict[str, str]] = {}
        self._counter = itertools.count()
        self._seen: Counter[str] = Counter()
        self._answered: Counter[str] = Counter()
        self.status_counts: Counter[int] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0  # most requests open at once (for tests of client-side caps)
        self.requests: list[dict[str, Any]] = []
        self._runner: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # -- identification -------------------------------------------------------------------------------

    def _index_for(self, query_id: str | None) -> dict[str, str]:
        scope = query_id if self._docs.per_query else None
        if scope not in self._text_index:
            items = self._docs.items_for(query_id) if (query_id is not None or not self._docs.per_query) else {}
            self._text_index[scope] = {text: did for did, text in items.items()}
        return self._text_index[scope]

    def _doc_id(self, query_id: str | None, text: str) -> str | None:
        index = self._index_for(query_id)
        if text in index:
            return index[text]
        if text.endswith(TRUNCATION_MARKER):
            head = text[: -len(TRUNCATION_MARKER)]
            for full, did in index.items():
                if full.startswith(head):
                    return did
        return None

    def answer_prompt(self, content: str, attempt: int = 1) -> tuple[str, str]:
        """Answer text and finish reason for a prompt (the server's whole 'model')."""
        query_text, blocks = read_rendered(content)
        query_id = self._query_ids.get(query_text) if query_text is not None else None
        if '"better"' in content:
            stage = "lists"
        else:
            stage = "rubric" if '"criteria"' in content else "tournament"
        ks = [int(k) for k in re.findall(r'"C(\d+)"', content)]
        n_criteria = max(ks) if ks else 5
        doc_ids = [self._doc_id(query_id, text) for _, text in blocks]
        split = sum(1 for pid, _ in blocks if pid.startswith("A")) if stage == "lists" else 0
        return self.judge.answer(stage, query_id or "?", doc_ids, n_criteria, attempt, split=split)

    # -- HTTP -----------------------------------------------------------------------------------------

    def _error(self, status: int, message: str, retry_after: float | None = None) -> Any:
        from aiohttp import web  # noqa: PLC0415 - aiohttp only when a server runs

        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else None
        body = {"error": {"message": message, "type": _ERROR_TYPES.get(status, "server_error"), "code": status}}
        self.status_counts[status] += 1
        return web.json_response(body, status=status, headers=headers)

    async def _chat(self, request: Any) -> Any:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: Any) -> Any:
        from aiohttp import web  # noqa: PLC0415

        index = next(self._counter)
        if self.api_key is not None:
            auth = request.headers.get("Authorization", "")
            if auth != f"Bearer {self.api_key}":
                presented = auth.removeprefix("Bearer ")
                self.requests.append({"index": index, "status": 401})
                return self._error(401, f"Incorrect API key provided: {presented}. You can find your key in settings.")
        try:
            body = await request.json()
            messages = body["messages"]
        except (ValueError, KeyError, TypeError):
            return self._error(400, "body must be JSON with a 'messages' list")
        content = "\n".join(str(m.get("content", "")) for m in messages)
        key = hashlib.sha256(content.encode()).hexdigest()[:16]
        seen = self._seen[key]
        self._seen[key] += 1
        record = {
            "index": index,
            "key": key,
            "model": body.get("model"),
            "response_format": body.get("response_format"),
            "temperature": body.get("temperature"),
            "max_tokens": body.get("max_tokens"),
            "authorization_present": "Authorization" in request.headers,
        }
        self.requests.append(record)
        fault = self.faults(FaultContext(index=index, key=key, seen=seen)) if self.faults else None
        if fault is not None:
            if fault.delay > 0:
                await asyncio.sleep(fault.delay)
            if fault.status is not None:
                record["status"] = fault.status
                return self._error(fault.status, fault.message or f"injected fault {fault.status}", fault.retry_after)
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        self._answered[key] += 1
        text, finish = self.answer_prompt(content, attempt=self._answered[key])
        record["status"] = 200
        self.status_counts[200] += 1
        return web.json_response(
            {
                "id": f"chatcmpl-fake-{index}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "fake-judge"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                "usage": {
                    "prompt_tokens": len(content) // 4,
                    "completion_tokens": len(text) // 4,
                    "total_tokens": len(content) // 4 + len(text) // 4,
                },
            }
        )

    async def _models(self, request: Any) -> Any:
        from aiohttp import web  # noqa: PLC0415

        return web.json_response({"object": "list", "data": [{"id": "fake-judge", "object": "model"}]})

    @property
    def url(self) -> str:
        """The OpenAI-style base URL, ``http://host:port/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    async def astart(self) -> FakeOpenAIServer:
        """Start listening on the running event loop."""
        from aiohttp import web  # noqa: PLC0415

        app = web.Application(client_max_size=64 * 2**20)
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/chat/completions", self._chat)
            app.router.add_get(f"{prefix}/models", self._models)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def astop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self) -> FakeOpenAIServer:
        """Serve from a background thread with its own event loop; returns once listening."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.astart())
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.astop())
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        """Stop the background server (no-op if not started)."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop = None
            self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve a synthetic dataset until stdin closes (or the process is terminated)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", nargs=3, type=int, metavar=("QUERIES", "DOCS", "SEED"), default=(4, 20, 0))
    ap.add_argument("--doc-chars", type=int, default=400)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--malformed-rate", type=float, default=0.0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    nq, nd, seed = args.synthetic
    queries, documents, latent = synthetic_dataset(nq, nd, seed=seed, doc_chars=args.doc_chars)
    judge = SimulatedJudge(latent, malformed_rate=args.malformed_rate, seed=seed)

    async def serve() -> None:
        server = FakeOpenAIServer(
            judge, queries=queries, documents=documents, latency=args.latency, host=args.host, port=args.port
        )
        await server.astart()
        print(f"READY {server.url}", flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)
        print(json.dumps({"status_counts": dict(server.status_counts)}), flush=True)
        await server.astop()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
