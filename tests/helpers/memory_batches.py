"""An in-process batch backend for the runner's unit tests: answers each request line with the fake server's
simulated judge (the same answers :class:`benchmarks.fixtures.fake_server.FakeOpenAIServer` gives online), with
faults: a batch that expires half done, one that fails, malformed lines, repeated ``custom_id`` lines, a result
for a window never asked, an error line, and batches still in progress for a number of polls."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rcp_jax.judging.batch.backends import BatchBackend, BatchStatus
from rcp_jax.judging.transport.client import REPAIR_MARKER

from benchmarks.fixtures.fake_server import FakeOpenAIServer


@dataclass
class MemoryBatch:
    batch_id: str
    key: str
    name: str
    requests: list[dict[str, Any]]
    polls: int = 0
    status: str = "in_progress"
    output: list[bytes] = field(default_factory=list)


def window_key(body: dict[str, Any]) -> tuple[str, str]:
    """(key, content) of a request body as the fake server computes them (the repair note cut off)."""
    texts = []
    for m in body["messages"]:
        text = m["content"] if isinstance(m["content"], str) else "".join(p.get("text", "") for p in m["content"])
        at = text.find(REPAIR_MARKER)
        if at >= 0:
            text = text[: at - 2] if text[max(at - 2, 0):at] == "\n\n" else text[:at]
        texts.append(text)
    content = "\n".join(texts)
    return hashlib.sha256(content.encode()).hexdigest()[:16], content


class MemoryBatches(BatchBackend):
    """See the module docstring. ``faults`` maps a 1-based batch number to a list of fault names:
    ``expire`` (half the requests answered, status expired), ``fail`` (no output, status failed), ``malformed``
    (the first line not JSON), ``duplicate`` (the first line twice, the second with another answer), ``stranger``
    (a line for a custom_id never asked), ``error`` (the first request an error line), ``slow:N`` (in progress for
    N polls)."""

    label = "memory batches"

    def __init__(self, server: FakeOpenAIServer, faults: dict[int, list[str]] | None = None) -> None:
        self.server = server
        self.faults = faults or {}
        self.files: dict[str, list[dict[str, Any]]] = {}
        self.batches: dict[str, MemoryBatch] = {}
        self.created = 0
        self.answered: Counter[str] = Counter()
        self.calls: list[str] = []

    def upload(self, path: Path, name: str) -> str:
        self.calls.append("upload")
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = [json.loads(line) for line in Path(path).read_bytes().splitlines() if line.strip()]
        return file_id

    def create(self, file_id: str, name: str, key: str) -> str:
        self.calls.append("create")
        self.created += 1
        batch_id = f"batch-{self.created}"
        self.batches[batch_id] = MemoryBatch(batch_id, key, name, self.files[file_id])
        return batch_id

    def find(self, key: str) -> str | None:
        self.calls.append("find")
        found = [b.batch_id for b in self.batches.values() if b.key == key]
        return found[-1] if found else None

    def _faults(self, batch: MemoryBatch) -> list[str]:
        return self.faults.get(int(batch.batch_id.split("-")[1]), [])

    def retrieve(self, batch_id: str) -> BatchStatus:
        self.calls.append("retrieve")
        b = self.batches[batch_id]
        faults = self._faults(b)
        slow = next((int(f.split(":")[1]) for f in faults if f.startswith("slow:")), 0)
        b.polls += 1
        if b.status == "in_progress" and b.polls > slow:
            self._run(b, faults)
        n = len(b.requests)
        done = sum(1 for line in b.output if b'"status_code": 200' in line or b'"status_code":200' in line)
        return BatchStatus(batch_id, b.status, total=n, completed=min(done, n), failed=0,
                           output_file_id=f"out-{batch_id}" if b.output else None)

    def _line(self, cid: str, body: dict[str, Any], text: str | None = None) -> bytes:
        key, content = window_key(body)
        if text is None:
            self.answered[key] += 1
            text, finish = self.server.answer_prompt(content, attempt=self.answered[key])
        else:
            finish = "stop"
        completion = {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": body["model"],
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                   "finish_reason": finish}],
                      "usage": {"prompt_tokens": len(content) // 4, "completion_tokens": len(text) // 4,
                                "total_tokens": len(content) // 4 + len(text) // 4}}
        line = {"id": f"req-{cid}", "custom_id": cid, "response": {"status_code": 200, "request_id": "r",
                                                                     "body": completion}, "error": None}
        return (json.dumps(line) + "\n").encode()

    def _run(self, b: MemoryBatch, faults: list[str]) -> None:
        if "fail" in faults:
            b.status = "failed"
            return
        requests = b.requests[: len(b.requests) // 2] if "expire" in faults else b.requests
        for i, r in enumerate(requests):
            if i == 0 and "error" in faults:
                b.output.append((json.dumps({"id": "e", "custom_id": r["custom_id"], "response": None,
                                             "error": {"code": "server_error", "message": "boom"}}) + "\n").encode())
                continue
            b.output.append(self._line(r["custom_id"], r["body"]))
        if "malformed" in faults and b.output:
            b.output[0] = b'{"custom_id": "' + b.requests[0]["custom_id"].encode() + b'", "response": {not json\n'
        if "duplicate" in faults and b.output:
            r = b.requests[-1] if "expire" not in faults else requests[-1]
            b.output.append(self._line(r["custom_id"], r["body"], text="a second, different answer"))
        if "stranger" in faults:
            b.output.append(self._line("0123456789abcdef", b.requests[0]["body"], text='{"scores": {}}'))
        b.status = "expired" if "expire" in faults else "completed"

    def download(self, status: BatchStatus, path: Path) -> None:
        self.calls.append("download")
        Path(path).write_bytes(b"".join(self.batches[status.batch_id].output))
