"""Several judge endpoints from the command line: ``--api-base`` given several times, ``--api-base-file``.

The endpoint file holds one endpoint per line, ``URL [KEY_VARIABLE]``: the URL of an OpenAI-compatible
server (``http://host:8000/v1``) and, optionally, the NAME of an environment variable holding that
server's API key (never the key itself: a second field that does not look like a variable name is
refused without being shown). Blank lines and ``#`` comments are skipped. Example::

    # two vLLM servers; the second checks a key
    http://gpu1:8000/v1
    http://gpu2:8000/v1  GPU2_API_KEY

Keys are read from the environment when the judge is built and held in memory only: never written to the
store, the report or a log line.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rcp_jax.errors import DataError

_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Endpoint:
    """One judge endpoint: its URL, the environment variable holding its key (``None``: the provider's usual
    variable, or none), and where it was given (``"--api-base"`` or ``"FILE line N"``)."""

    api_base: str
    key_var: str | None = None
    origin: str = "--api-base"


class ApiBaseAction(argparse.Action):
    """``--api-base`` may be repeated: ``api_base`` keeps the first URL (what single-endpoint code reads),
    ``api_bases`` every one in order."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        bases = [*(getattr(namespace, "api_bases", None) or []), values]
        namespace.api_bases = bases
        setattr(namespace, self.dest, bases[0])


def _check_url(url: str, origin: str) -> str:
    if not re.match(r"https?://[^\s/]+", url):
        raise DataError(f"{origin}: {url!r} is not an endpoint URL; give one such as http://host:8000/v1 "
                        "(http:// or https://)")
    return url


def read_endpoint_file(path: Path) -> list[Endpoint]:
    """The endpoints of an ``--api-base-file`` (module docstring); a DataError names the file, line and fix."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"--api-base-file {path}: no such file; give a file with one endpoint URL per line") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"--api-base-file {path}: cannot be read ({type(exc).__name__}); give a UTF-8 text file "
                        "with one endpoint URL per line") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        origin = f"--api-base-file {path} line {number}"
        if len(fields) > 2:
            raise DataError(f"{origin}: {len(fields)} fields; a line is 'URL [KEY_VARIABLE]' (the NAME of an "
                            "environment variable holding the key, never the key itself)")
        url = _check_url(fields[0], origin)
        var = fields[1] if len(fields) == 2 else None
        if var is not None and not _VAR_NAME.match(var):  # e.g. a pasted key: never echoed
            raise DataError(f"{origin}: the second field is not an environment variable name (letters, digits, _); "
                            "write the NAME of the variable that holds this server's key (e.g. GPU2_API_KEY) and "
                            "export the key in it. A key itself must never be written in this file (its text is "
                            "not shown here)")
        out.append(Endpoint(url, var, origin))
    if not out:
        raise DataError(f"--api-base-file {path}: no endpoint in it; write one URL per line (e.g. http://host:8000/v1)")
    return out


def endpoints_of(args) -> list[Endpoint]:
    """Every endpoint of ``--api-base`` (each time given) and ``--api-base-file``, in that order; a URL given
    twice is refused. ``args.only_endpoint`` (set by ``doctor``, which checks one endpoint at a time) stands
    for all of them."""
    only = getattr(args, "only_endpoint", None)
    if only is not None:
        return [only]
    bases = getattr(args, "api_bases", None) or ([args.api_base] if getattr(args, "api_base", None) else [])
    out = [Endpoint(_check_url(b, "--api-base"), None, "--api-base") for b in bases]
    path = getattr(args, "api_base_file", None)
    if path is not None:
        out += read_endpoint_file(path)
    seen: dict[str, str] = {}
    for e in out:
        key = e.api_base.rstrip("/")
        if key in seen:
            raise DataError(f"endpoint {e.api_base} is given twice ({seen[key]} and {e.origin}); list each server "
                            "once")
        seen[key] = e.origin
    return out


def judge_endpoints(endpoints: list[Endpoint]) -> list[dict[str, Any]]:
    """``LiteLLMJudge(endpoints=...)`` mappings, keys read from their variables now (a DataError names an unset
    variable and its line, never a value)."""
    out = []
    for e in endpoints:
        key = None
        if e.key_var is not None:
            key = os.environ.get(e.key_var)
            if not key:
                raise DataError(f"{e.origin}: the environment variable {e.key_var} (the key of {e.api_base}) is not "
                                f"set; export it (export {e.key_var}=...) or drop the name from the line")
        out.append({"api_base": e.api_base, "api_key": key})
    return out


def combined_server_info(infos: list[Any]) -> Any:
    """One :class:`rcp_jax.judging.transport.server_info.ServerInfo` for several servers: slots summed when every server
    reports them, the smallest reported context, the sources joined."""
    from rcp_jax.judging.transport.server_info import ServerInfo

    if len(infos) == 1:
        return infos[0]
    slots = [i.slots for i in infos]
    contexts = [i.context for i in infos if i.context]
    return ServerInfo(context=min(contexts) if contexts else None,
                      slots=sum(slots) if slots and all(slots) else None,
                      source=", ".join(i.source for i in infos if i.source))


def endpoint_summary(judge) -> tuple[list[dict[str, Any]], list[str]]:
    """Per-endpoint answered / failed tries of a judge with several endpoints (payload rows and text lines);
    empty for one endpoint."""
    stats_of = getattr(judge, "endpoint_stats", None)
    stats = stats_of() if callable(stats_of) else []
    if len(stats) < 2:
        return [], []
    lines = ["calls per endpoint (tries answered / failed; a failed try is retried, on another endpoint when one "
             "is healthy):"]
    for s in stats:
        timeouts = f", {s['timeouts']} past --timeout" if s["timeouts"] else ""
        lines.append(f"  {s['api_base']}: {s['answered']} answered, {s['failed']} failed{timeouts}")
    return stats, lines
