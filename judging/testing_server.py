"""A fake OpenAI-compatible chat-completions server answering with the simulated judge.

It reads the window back from the prompt text alone (the query block and the ``<doc>`` blocks inside
``<documents>``), maps each text to its document id, and answers with
:meth:`rcp_jax.judging.offline.SimulatedJudge.answer`, so litellm's real network path can be exercised on
127.0.0.1 with known answers. Faults (429, 500, 401, slow answers, answers trickling one byte at a time,
malformed bodies such as an empty ``choices`` list, fixed bad answers) and a fixed latency can be injected.
Re-asks that append a repair message (:data:`rcp_jax.judging.client.REPAIR_MARKER`) are recognised as the same
window: the repair message is left out of the window's key and of the text the simulated judge reads.

It serves ``POST /v1/chat/completions`` (and ``/chat/completions``) and ``GET /v1/models``.

In tests (a background thread with its own event loop)::

    with FakeOpenAIServer(SimulatedJudge(latent), queries=queries, documents=documents) as server:
        judge = LiteLLMJudge("openai/fake-judge", api_base=server.url, api_key="sk-anything")

From the command line (used by the benchmark; prints ``READY <url>`` once listening)::

    python -m rcp_jax.judging.testing_server --synthetic 8 40 0 --latency 0.2

Page images (content parts ``image_url``, :mod:`rcp_jax.judging.pages`) are read too: each is recorded in the
request's ``images`` (the label text just before it, media type, bytes, pixel size) and identifies its
document by the SHA-256 of its bytes, as given or as encoded within ``image_limits``.

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

from rcp_jax.judging.lookup import PerQuery
from rcp_jax.judging.offline import SimulatedJudge, synthetic_dataset
from rcp_jax.judging.pages import Document, ImageLimits, data_url_size, doc_text, encode_image
from rcp_jax.judging.render import TRUNCATION_MARKER, read_rendered

_IMAGE_MARK = re.compile(r"\[image sha256=([0-9a-f]{64})\]")


@dataclass(frozen=True)
class Fault:
    """What to do instead of (or before) answering a request.

    Attributes
    ----------
    status : answer with this HTTP error status (e.g. 429, 500, 401); ``None``: answer normally.
    delay : seconds to wait first (a slow answer; with ``status=None`` the answer still comes).
    retry_after : value of the ``Retry-After`` header sent with an error status.
    message : the error message (default ``"injected fault <status>"``), e.g. a context-length text.
    content : answer 200 with this text as the message content instead of the simulated judge's answer
        (e.g. ``"not json"``, to test re-asks); ``None``: the judge's answer.
    body : answer 200 with this JSON body verbatim (e.g. ``{"choices": []}``, a malformed completion).
    trickle : seconds between the bytes of a 200 answer's body: the answer arrives one byte at a time
        (a server that keeps a call open as long as it likes); 0: all at once.
    """

    status: int | None = None
    delay: float = 0.0
    retry_after: float | None = None
    message: str | None = None
    content: str | None = None
    body: Mapping[str, Any] | None = None
    trickle: float = 0.0


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


#: Request fields every chat call carries; the rest are recorded as a request's ``extra``.
_KNOWN_FIELDS = frozenset({"model", "messages", "temperature", "max_tokens", "response_format", "seed", "top_p",
                           "stream", "n", "user", "extra_body"})

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
    documents : document texts in either shape accepted by :func:`rcp_jax.judging.judge_windows`.
    latency : seconds every answered request waits before answering.
    faults : a :data:`FaultPlan` (see :func:`per_window`); ``None``: no faults.
    api_key : when set, requests must carry ``Authorization: Bearer <api_key>``, else 401 (whose
        message echoes the presented key, as some servers do, so tests can check it is redacted).
    host, port : where to listen (port 0: any free port).
    model_info : extra fields of the one model ``GET /v1/models`` lists (vLLM reports ``max_model_len``).
    props : the JSON ``GET /props`` answers, as llama.cpp's server does (e.g.
        ``{"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1}``); ``None``: 404.
    image_limits : the limits the client encodes page images with (to recognise a scaled image's document).
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
        model_info: Mapping[str, Any] | None = None,
        props: Mapping[str, Any] | None = None,
        image_limits: ImageLimits | None = None,
    ) -> None:
        self.image_limits = image_limits or ImageLimits()
        self._image_index: dict[str, str] | None = None
        self.model_info = dict(model_info) if model_info else None
        self.props = dict(props) if props is not None else None
        self.trickling = 0  # answers being sent one byte at a time right now
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
            self._text_index[scope] = {doc_text(text): did for did, text in items.items()}
        return self._text_index[scope]

    def _images(self) -> dict[str, str]:
        """SHA-256 of each document image's bytes (as given and as encoded) -> doc id (built on first use)."""
        if self._image_index is None:
            index: dict[str, str] = {}
            scopes = [None] if not self._docs.per_query else list(self._docs._data)  # noqa: SLF001
            for q in scopes:
                for did, value in self._docs.items_for(q).items():
                    if isinstance(value, Document) and value.image is not None and not value.image.remote:
                        index[value.image.sha256] = did
                        sent = encode_image(value.image, self.image_limits, doc_id=did)
                        index[_url_sha(sent.url)] = did
            self._image_index = index
        return self._image_index

    def _doc_id(self, query_id: str | None, text: str) -> str | None:
        mark = _IMAGE_MARK.search(text)
        if mark is not None:
            return self._images().get(mark.group(1))
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
        if not isinstance(messages, list):
            return self._error(400, "'messages' must be a list")
        from rcp_jax.judging.client import REPAIR_MARKER  # noqa: PLC0415 - the client imports litellm lazily only

        repairs, window_texts, images = [], [], []
        for m in messages:  # a re-ask's repair note is cut off: the window's key and text stay the same
            text = _flatten(m.get("content", ""), images)
            at = text.find(REPAIR_MARKER)
            if at >= 0:
                repairs.append(text[at:])
                text = text[: at - 2] if text[max(at - 2, 0) : at] == "\n\n" else text[:at]
            window_texts.append(text)
        content = "\n".join(window_texts)
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
            "seed": body.get("seed"),
            "messages": messages,
            "images": images,
            "repair": repairs,
            "extra": {k: v for k, v in body.items() if k not in _KNOWN_FIELDS},
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
        if fault is not None and fault.body is not None:
            payload: Any = dict(fault.body)
        else:
            if fault is not None and fault.content is not None:
                text, finish = fault.content, "stop"
            else:
                self._answered[key] += 1
                text, finish = self.answer_prompt(content, attempt=self._answered[key])
            payload = {
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
        record["status"] = 200
        self.status_counts[200] += 1
        if fault is not None and fault.trickle > 0:
            return await self._trickle(request, payload, fault.trickle)
        return web.json_response(payload)

    async def _trickle(self, request: Any, payload: Any, every: float) -> Any:
        """Send ``payload`` one byte every ``every`` seconds (stops quietly when the client leaves)."""
        from aiohttp import web  # noqa: PLC0415

        data = json.dumps(payload).encode()
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.content_length = len(data)
        await response.prepare(request)
        self.trickling += 1
        try:
            for i in range(len(data)):
                await response.write(data[i : i + 1])
                await asyncio.sleep(every)
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError, RuntimeError):
            pass  # the client gave up: what a real server sees when its caller's deadline passes
        finally:
            self.trickling -= 1
        return response

    async def _models(self, request: Any) -> Any:
        from aiohttp import web  # noqa: PLC0415

        entry = {"id": "fake-judge", "object": "model", **(self.model_info or {})}
        return web.json_response({"object": "list", "data": [entry]})

    async def _props(self, request: Any) -> Any:
        from aiohttp import web  # noqa: PLC0415

        if self.props is None:
            return web.json_response({"error": {"message": "File Not Found", "code": 404}}, status=404)
        return web.json_response(dict(self.props))

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
        app.router.add_get("/props", self._props)
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


def _url_sha(url: str) -> str:
    """SHA-256 of the bytes of a ``data:`` URL (of the URL itself otherwise)."""
    if url.startswith("data:"):
        import base64  # noqa: PLC0415

        try:
            return hashlib.sha256(base64.b64decode(url.partition(",")[2])).hexdigest()
        except ValueError:
            pass
    return hashlib.sha256(url.encode()).hexdigest()


def _flatten(content: Any, images: list[dict[str, Any]]) -> str:
    """A message content as text: content parts joined, each image written ``[image sha256=<hex>]`` where it
    was; each image is also appended to ``images`` (label: the last line of the text before it; media type;
    bytes; pixel size)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    out = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            out.append(str(part.get("text", "")))
        elif kind == "image_url":
            inner = part.get("image_url")
            url = str(inner.get("url", "") if isinstance(inner, Mapping) else inner)
            before = "".join(out).rstrip("\n").rsplit("\n", 1)[-1]
            n_bytes = None
            if url.startswith("data:"):
                n_bytes = len(url.partition(",")[2]) * 3 // 4 - url.partition(",")[2][-2:].count("=")
            images.append({"label": before, "media_type": url[5:].split(";", 1)[0] if url.startswith("data:") else None,
                           "bytes": n_bytes, "size": data_url_size(url), "url_sha256": _url_sha(url)})
            out.append(f"[image sha256={_url_sha(url)}]")
    return "".join(out)


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
