"""Every option of every ``rcp-jax`` verb has help text, and that text states the option's default.

Walks :func:`rcp_jax.cli.build_parser` (so options other modules add later are checked too). An option
whose default is None, False or an empty list needs help only; any other default must appear in its help
as ``default`` followed somewhere by the value (``default 10``, ``default: test``, ``(default)`` right after
the chosen choice, ...).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from rcp_jax.cli import build_parser


def _verbs() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"(top level)": parser, **dict(sub.choices.items())}


def _value_spellings(value) -> set[str]:
    if isinstance(value, Path):
        return {str(value)}
    if isinstance(value, bool):
        return {str(value).lower(), str(value)}
    if isinstance(value, int):
        return {str(value), f"{value:,}", f"{value:_}"}
    if isinstance(value, float):
        return {repr(value), f"{value:g}", str(value)}
    return {str(value)}


def _problems(name: str, parser: argparse.ArgumentParser) -> list[str]:
    out = []
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue
        flag = "/".join(action.option_strings) or action.dest
        if not action.help or action.help == argparse.SUPPRESS:
            out.append(f"{name} {flag}: no help text")
            continue
        default = action.default
        if default is None or default is False or default == [] or action.required:
            continue
        text = formatter._expand_help(action)
        lowered = text.lower()
        if "default" not in lowered:
            out.append(f"{name} {flag}: help does not state the default {default!r}: {text!r}")
            continue
        if not any(v.lower() in lowered for v in _value_spellings(default)):
            out.append(f"{name} {flag}: help says 'default' but not the value {default!r}: {text!r}")
    return out


def test_every_option_has_help_stating_its_default():
    problems = [p for name, parser in _verbs().items() for p in _problems(name, parser)]
    assert not problems, "options without help or without their default in it:\n" + "\n".join(problems)


@pytest.mark.parametrize("bad, needle", [
    (dict(help=None), "no help text"),
    (dict(help="the cut-off"), "does not state the default"),
    (dict(help="the cut-off (default: ten)"), "not the value"),
])
def test_the_walker_catches_missing_help_and_defaults(bad, needle):
    p = argparse.ArgumentParser()
    p.add_argument("--k", type=int, default=10, **bad)
    assert any(needle in problem for problem in _problems("x", p))
    ok = argparse.ArgumentParser()
    ok.add_argument("--k", type=int, default=10, help="the cut-off (default %(default)s)")
    ok.add_argument("--flag", action="store_true", help="a switch")
    assert _problems("x", ok) == []
