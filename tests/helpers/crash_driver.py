"""Runs ``rcp-jax`` verbs in one process, exactly as the console script does, with test hooks.

Usage: ``python tests/helpers/crash_driver.py SPEC.json`` (the reliability tests run it as a subprocess).
The spec (JSON object) holds:

- ``commands``: a list of argv lists (``["judge", "--rows", ...]``), each run by ``rcp_jax.cli.main``;
  the process exits with the first non-zero code, else 0.
- ``kill`` (optional): where this process SIGKILLs itself, to stand for a crash at a chosen point:

  * ``call:<phase>:<n>``: at the start of the n-th simulated-judge call of windows of ``<phase>``
    (``*``: any phase); answers still in flight are lost;
  * ``bt:<n>``: right after the n-th Bradley-Terry fit of the pipeline (between rounds) returns;
  * ``calibrate:<n>``: right after the n-th 2PL calibration fit returns (before anything is written);
  * ``write:<n>:half``: during the n-th atomic file write, once half its bytes are in the temp file;
  * ``write:<n>:rename``: during the n-th atomic file write, just before its temp file is renamed.

- ``calls_log`` (optional): a file receiving one JSON line per *answered* simulated-judge call,
  ``{"tag", "record_id", "window", "attempt"}``, written (O_APPEND) before the answer is handed back,
  so it survives a SIGKILL.
- ``tag``: the label of this process in the calls log.
- ``latency``: seconds each simulated-judge call waits before answering (a slow judge, for Ctrl-C).
- ``malformed_rate``: share of malformed first answers of the simulated judge (part of its family).
- ``debug_logging``: ``logging.basicConfig(level=DEBUG)`` before anything runs.
- ``fake_server`` (optional): ``{"rows": path, "api_key": key or null, "api_key_env": variable}`` starts
  :class:`benchmarks.fixtures.fake_server.FakeOpenAIServer` over that collection (requiring the key given, or the
  one in that environment variable); the string ``{FAKE_URL}`` in a command is replaced by its URL.
  ``"latency": seconds`` makes every answer of the server wait that long (a slow server, for Ctrl-C).
- ``strict_warnings``: every RuntimeWarning is an error, and an error that Python can only report as
  "Exception ignored in ..." (such as "coroutine ... was never awaited" when an orphaned coroutine is
  collected) is printed as ``UNRAISABLE: ...`` and makes the process exit 70 (after a final ``gc.collect``).

Nothing here changes what the verbs compute: the hooks only observe, delay, or kill.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _install_judge_hooks(spec: dict) -> None:
    from rcp_jax.judging import SimulatedJudge, record_id

    kill = spec.get("kill") or ""
    target_phase, target_n = None, None
    if kill.startswith("call:"):
        _, target_phase, n = kill.split(":")
        target_n = int(n)
    latency = float(spec.get("latency", 0.0))
    log_fd = None
    if spec.get("calls_log"):
        log_fd = os.open(spec["calls_log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    tag = spec.get("tag", "")
    counts: dict[str, int] = {}
    original_complete = SimulatedJudge.complete
    original_init = SimulatedJudge.__init__

    def init(self, *args, **kwargs):
        kwargs.setdefault("malformed_rate", float(spec.get("malformed_rate", 0.0)))
        original_init(self, *args, **kwargs)

    async def complete(self, request):
        phase = request.window.phase
        for key in (phase, "*"):
            counts[key] = counts.get(key, 0) + 1
        if target_n is not None and counts.get(target_phase, 0) == target_n:
            _die()
        if latency > 0:
            await asyncio.sleep(latency)
        completion = await original_complete(self, request)
        if log_fd is not None:
            w = request.window
            line = {"tag": tag, "record_id": record_id(self.family(w.stage), w), "window": w.label,
                    "attempt": request.attempt}
            os.write(log_fd, (json.dumps(line) + "\n").encode())
        return completion

    SimulatedJudge.__init__ = init
    SimulatedJudge.complete = complete


def _install_fit_hooks(kill: str) -> None:
    if kill.startswith("bt:"):
        import rcp_jax.pipeline as pipeline

        n_kill, seen, fit = int(kill.split(":")[1]), [0], pipeline.fit_bradley_terry

        def fit_bt(*args, **kwargs):
            out = fit(*args, **kwargs)
            seen[0] += 1
            if seen[0] == n_kill:
                _die()
            return out

        pipeline.fit_bradley_terry = fit_bt
    elif kill.startswith("calibrate:"):
        from rcp_jax.models import irt

        n_kill, seen, fit2 = int(kill.split(":")[1]), [0], irt.fit_2pl_calibration

        def fit_2pl(*args, **kwargs):
            out = fit2(*args, **kwargs)
            seen[0] += 1
            if seen[0] == n_kill:
                _die()
            return out

        irt.fit_2pl_calibration = fit_2pl


class _HalfWriter:
    """A binary file whose next ``write`` stores half its bytes, makes them durable, and dies."""

    def __init__(self, fh):
        self._fh = fh

    def write(self, data):
        self._fh.write(data[: len(data) // 2])
        self._fh.flush()
        os.fsync(self._fh.fileno())
        _die()

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self._fh.__exit__(*exc)


class _OsProxy:
    """Stands in for ``os`` inside :mod:`rcp_jax.data.atomic` to kill the n-th atomic write half-way or before its rename."""

    def __init__(self, n: int, where: str):
        self._n, self._where = n, where
        self._opened = 0

    def fdopen(self, fd, *args, **kwargs):
        fh = os.fdopen(fd, *args, **kwargs)
        self._opened += 1
        if self._where == "half" and self._opened == self._n:
            return _HalfWriter(fh)
        return fh

    def replace(self, src, dst):
        if self._where == "rename" and self._opened == self._n:
            _die()
        return os.replace(src, dst)

    def __getattr__(self, name):
        return getattr(os, name)


def _start_fake_server(cfg: dict):
    from benchmarks.fixtures.fake_server import FakeOpenAIServer
    from rcp_jax.judging import SimulatedJudge

    rows = [json.loads(line) for line in open(cfg["rows"], encoding="utf-8")]
    queries = {r["query_id"]: r["query"] for r in rows}
    documents = {r["query_id"]: dict(zip(r["doc_ids"], r["docs"])) for r in rows}
    latent = {r["query_id"]: {d: float(r.get("qrels", {}).get(d, 0)) - 1.0 for d in r["doc_ids"]} for r in rows}
    key = os.environ[cfg["api_key_env"]] if cfg.get("api_key_env") else cfg.get("api_key")
    return FakeOpenAIServer(SimulatedJudge(latent, seed=2), queries=queries, documents=documents, api_key=key,
                            latency=float(cfg.get("latency", 0.0))).start()


def _strict_warnings() -> list[str]:
    """RuntimeWarnings become errors; unraisable errors are printed and collected (see the module docstring)."""
    import warnings

    warnings.filterwarnings("error", category=RuntimeWarning)
    seen: list[str] = []

    def hook(unraisable) -> None:
        line = f"UNRAISABLE: {unraisable.exc_type.__name__}: {unraisable.exc_value} ({unraisable.err_msg} {unraisable.object!r})"
        seen.append(line)
        print(line, file=sys.stderr, flush=True)

    sys.unraisablehook = hook
    return seen


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as fh:
        spec = json.load(fh)
    if spec.get("debug_logging"):
        logging.basicConfig(level=logging.DEBUG)
    kill = spec.get("kill") or ""
    _install_judge_hooks(spec)
    _install_fit_hooks(kill)
    if kill.startswith("write:"):
        import rcp_jax.data.atomic

        _, n, where = kill.split(":")
        rcp_jax.data.atomic.os = _OsProxy(int(n), where)
    unraisable = _strict_warnings() if spec.get("strict_warnings") else None
    server = _start_fake_server(spec["fake_server"]) if spec.get("fake_server") else None
    from rcp_jax.cli import main as cli_main

    rc = 0
    try:
        for argv in spec["commands"]:
            if server is not None:
                argv = [a.replace("{FAKE_URL}", server.url) for a in argv]
            rc = cli_main(argv)
            sys.stdout.flush()
            if rc:
                break
    finally:
        if server is not None:
            server.stop()
    if unraisable is not None:
        import gc

        gc.collect()
        if unraisable:
            return 70
    return rc


if __name__ == "__main__":
    sys.exit(main())
