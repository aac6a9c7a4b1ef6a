"""Rubric files: the criteria a rubric window asks about, read from TOML (or JSON).

A rubric is an ordered list of K >= 2 yes/no criteria, each a short ``name`` and the ``question`` the judge
reads. It drives the rubric prompt (the criteria block, the answer example and the count of questions), the
answer schema and the parser (answers ``C1..CK`` in the file's order), the calibration (K items) and the
reports (criterion names instead of ``C1..CK``). The built-in rubric is the file ``judging/prompts/rubrics/paper.toml``
(the five criteria of METHOD section 2); its prompt is byte for byte the prompt judged before rubric files
existed, so stores judged then keep their record ids.

The file (TOML, read with the standard library's :mod:`tomllib`; a ``.json`` file with the same keys works
too)::

    format = 1                      # optional; 1 is the only version
    name = "support-tickets"        # optional; default: the file's stem. Shown in messages and reports
    description = "..."             # optional; for people, never shown to the judge

    [[criteria]]                    # K >= 2 entries, easiest first by convention (not required)
    name = "On topic"               # one line, unique (case and spacing ignored), at most 80 characters
    question = "is the ticket about the product the query names?"   # the wording the judge reads

Rules (a file breaking one is refused with :class:`RubricError`, naming the file, the line where it can
and the fix): no other keys; 2 <= K <= :data:`MAX_CRITERIA`; names and questions non-empty; a question's
runs of whitespace (line breaks of a multi-line TOML string included) become single spaces; ``{{`` is not
allowed (it would be read as a prompt placeholder).

The rubric's :attr:`Rubric.hash` covers what the judge reads of it (each criterion's name and question, in
order), not the file's layout, comments, ``name`` or ``description``. A judge family of a rubric other than
the built-in one records ``{"name", "hash", "criteria"}`` (see :meth:`Rubric.summary`), and the store's
identity records the rubric judged into it, so a store judged with one rubric is refused by a run with
another (:mod:`rcp_jax.store_identity`).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rcp_jax.judging.errors import PromptError
from rcp_jax.judging.prompts.template import PromptTemplate
from rcp_jax.judging.store.records import content_hash

#: The built-in rubric's name (the file ``judging/prompts/rubrics/<name>.toml``).
BUILTIN_RUBRIC = "paper"
#: Fewest criteria: with one, the 2PL's scale (sum of gamma = K, mean of beta = 0) leaves nothing to fit.
MIN_CRITERIA = 2
#: Most criteria: every answer repeats K grades per document, so a window's answer grows as 10 x K.
MAX_CRITERIA = 20
#: Longest criterion name (names are printed in tables and plot legends).
MAX_NAME_CHARS = 80
FORMAT = 1

_TOP_KEYS = ("format", "name", "description", "criteria")
_CRITERION_KEYS = ("name", "question")
_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                 "twelve")


class RubricError(PromptError):
    """A rubric file is unusable (unreadable, bad syntax, unknown keys, K < 2, duplicate or empty criteria)."""


@dataclass(frozen=True)
class Criterion:
    """One yes/no criterion: ``name`` (short, for reports) and ``question`` (the wording the judge reads)."""

    name: str
    question: str


@dataclass(frozen=True)
class Rubric:
    """An ordered list of K >= 2 criteria; answers name them ``C1..CK`` in this order.

    Attributes
    ----------
    name : the rubric's name (messages, reports, the store identity).
    criteria : the K criteria, in the order of the prompt and of the answer keys ``C1..CK``.
    description : free text for people (not part of the hash, never shown to the judge).
    source : where it was read from (a file path, or ``builtin:paper``); not part of the hash.
    """

    name: str
    criteria: tuple[Criterion, ...]
    description: str = ""
    source: str = field(default="", compare=False)

    @property
    def k(self) -> int:
        """The number of criteria K."""
        return len(self.criteria)

    @property
    def names(self) -> list[str]:
        """Criterion names in order (``names[0]`` is ``C1``)."""
        return [c.name for c in self.criteria]

    @property
    def codes(self) -> list[str]:
        """``["C1", ..., "CK"]``: the answer keys and answer-table columns."""
        return [f"C{i + 1}" for i in range(self.k)]

    @property
    def hash(self) -> str:
        """16-hex content hash of what the judge reads: each criterion's (name, question), in order."""
        return content_hash({"rubric": [[c.name, c.question] for c in self.criteria]})

    @property
    def builtin(self) -> bool:
        """Whether this is the built-in rubric (same criteria, wherever it was read from)."""
        return self.hash == builtin_rubric().hash

    def summary(self) -> dict[str, Any]:
        """``{"name", "hash", "criteria": [names], "source"}``: what families, identities and calibrations record."""
        return {"name": self.name, "hash": self.hash, "criteria": self.names, "source": self.source}

    def describe(self) -> str:
        """One phrase naming the rubric for messages, e.g. ``rubric 'paper' (built-in, 5 criteria, hash 1a2b...)``."""
        return describe_summary(self.summary())

    def criteria_block(self) -> str:
        """The prompt's criteria lines, ``C<k> <name>: <question>``."""
        return "\n".join(f"C{i + 1} {c.name}: {c.question}" for i, c in enumerate(self.criteria))

    def answer_example(self) -> str:
        """The prompt's answer-shape line: two documents, the first failing every criterion, the second
        passing the easier half (``(K + 1) // 2`` criteria)."""
        none = ", ".join(f'"C{i + 1}": 0' for i in range(self.k))
        half = ", ".join(f'"C{i + 1}": {int(i < (self.k + 1) // 2)}' for i in range(self.k))
        return ('{"doc_1": {"reasoning": "<one or two sentences>", "criteria": {' + none + '}}, '
                '"doc_2": {"reasoning": "...", "criteria": {' + half + "}}}")

    def template(self, frame: str | None = None) -> PromptTemplate:
        """The rubric prompt of this rubric: ``frame`` (default: the built-in ``prompts/rubric.txt``) with
        ``{{N_CRITERIA}}``, ``{{CRITERIA}}`` and ``{{ANSWER_EXAMPLE}}`` filled in. The template keeps this
        rubric (:attr:`rcp_jax.judging.prompts.template.PromptTemplate.rubric`), so judges record it in their rubric family."""
        if frame is None:
            frame = resources.files("rcp_jax.judging.prompts").joinpath("rubric.txt").read_text(encoding="utf-8")
        count = _NUMBER_WORDS[self.k] if self.k < len(_NUMBER_WORDS) else str(self.k)
        text = (frame.replace("{{N_CRITERIA}}", count).replace("{{CRITERIA}}", self.criteria_block())
                .replace("{{ANSWER_EXAMPLE}}", self.answer_example()))
        label = "builtin:rubric" if self.source == f"builtin:{BUILTIN_RUBRIC}" else f"rubric:{self.name}"
        return PromptTemplate(stage="rubric", text=text, n_criteria=self.k, name=label, rubric=self)


def describe_summary(summary: Mapping[str, Any]) -> str:
    """A rubric summary (:meth:`Rubric.summary`) in words, for messages."""
    source = str(summary.get("source") or "")
    where = "built-in" if source.startswith("builtin:") else (f"file {source}" if source else "")
    names = list(summary.get("criteria") or [])
    parts = [p for p in (where, f"{len(names)} criteria: {', '.join(names)}", f"hash {summary.get('hash')}") if p]
    return f"rubric {summary.get('name')!r} ({'; '.join(parts)})"


def builtin_rubric() -> Rubric:
    """The built-in rubric (``judging/prompts/rubrics/paper.toml``): the five criteria C1..C5 of METHOD section 2."""
    global _BUILTIN
    if _BUILTIN is None:
        path = resources.files("rcp_jax.judging.prompts").joinpath("rubrics", f"{BUILTIN_RUBRIC}.toml")
        _BUILTIN = rubric_from_text(path.read_text(encoding="utf-8"), source=f"builtin:{BUILTIN_RUBRIC}",
                                    default_name=BUILTIN_RUBRIC)
    return _BUILTIN


_BUILTIN: Rubric | None = None


def builtin_rubric_names() -> list[str]:
    """Names of the rubrics shipped with the package (``judging/prompts/rubrics/*.toml``)."""
    folder = resources.files("rcp_jax.judging.prompts").joinpath("rubrics")
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_rubric(path: str | Path) -> Rubric:
    """Read a rubric file (``.toml``, or ``.json`` with the same keys); a name of a shipped rubric
    (``paper``) with no such file gives that rubric.

    Raises
    ------
    RubricError: the file is missing, unreadable or breaks a rule of the module docstring; the message
        names the file (and the line where it can) and the fix.
    """
    p = Path(path)
    if not p.exists() and str(path) in builtin_rubric_names() and p.suffix == "":
        if str(path) == BUILTIN_RUBRIC:
            return builtin_rubric()
        text = resources.files("rcp_jax.judging.prompts").joinpath("rubrics", f"{path}.toml").read_text(encoding="utf-8")
        return rubric_from_text(text, source=f"builtin:{path}", default_name=str(path))
    if not p.is_file():
        what = "is a folder" if p.is_dir() else "not found"
        raise RubricError(f"rubric file {p} {what}: pass a .toml rubric file to --rubric (see the README, 'Your own "
                          f"rubric'), or a built-in rubric name ({', '.join(builtin_rubric_names())})")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RubricError(f"rubric file {p}: cannot be read ({exc}); save it as UTF-8 text") from None
    return rubric_from_text(text, source=str(p), default_name=p.stem, json_format=p.suffix.lower() == ".json")


def rubric_from_text(text: str, *, source: str = "<text>", default_name: str = "custom",
                     json_format: bool = False) -> Rubric:
    """A :class:`Rubric` from the text of a rubric file (TOML, or JSON with ``json_format``); ``source`` names
    it in messages. Raises :class:`RubricError` as :func:`load_rubric`."""
    if json_format:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RubricError(f"rubric file {source}, line {exc.lineno}: not valid JSON ({exc.msg}, column "
                              f"{exc.colno}); fix the syntax, or write the rubric as TOML") from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise RubricError(f"rubric file {source}: not valid TOML ({exc}); fix the syntax (a question with "
                              "quotes or several lines goes in triple quotes: question = \"\"\"...\"\"\")") from None
    return _rubric_from_data(data, text, source, default_name)


def _rubric_from_data(data: Any, text: str, source: str, default_name: str) -> Rubric:
    def fail(message: str, line: int | None = None) -> RubricError:
        where = f"rubric file {source}" + (f", line {line}" if line else "")
        return RubricError(f"{where}: {message}")

    if not isinstance(data, dict):
        raise fail("must be a table of keys (name, criteria, ...), not a " + type(data).__name__)
    unknown = [k for k in data if k not in _TOP_KEYS]
    if unknown:
        raise fail(f"unknown key {unknown[0]!r}; a rubric takes only {', '.join(_TOP_KEYS)} (each criterion is a "
                   "[[criteria]] table with name and question)", _key_line(text, unknown[0]))
    if "format" in data and data["format"] != FORMAT:
        raise fail(f"format {data['format']!r} is not one this rcp-jax reads ({FORMAT}); write format = {FORMAT} "
                   "or upgrade rcp-jax", _key_line(text, "format"))
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name.strip() or "\n" in name:
        raise fail(f"name must be one line of text, got {name!r}", _key_line(text, "name"))
    description = data.get("description", "")
    if not isinstance(description, str):
        raise fail(f"description must be text, got {type(description).__name__}", _key_line(text, "description"))
    entries = data.get("criteria")
    if entries is None:
        raise fail("has no criteria; add at least two [[criteria]] tables, each with a name and a question")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise fail("criteria must be a list of tables ([[criteria]] with name and question)",
                   _key_line(text, "criteria"))
    if not MIN_CRITERIA <= len(entries) <= MAX_CRITERIA:
        few = len(entries) < MIN_CRITERIA
        why = ("a rubric needs at least 2: the calibration fixes the criteria's mean difficulty and total "
               "discrimination, so a single criterion leaves nothing to calibrate; add criteria"
               if few else f"a rubric takes at most {MAX_CRITERIA} (each answer repeats every criterion per document); "
               "merge or drop criteria")
        raise fail(f"has {len(entries)} {'criterion' if len(entries) == 1 else 'criteria'}; {why}")
    criteria: list[Criterion] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        line = _criterion_line(text, i)
        label = f"criterion {i + 1} (C{i + 1})"
        unknown = [k for k in entry if k not in _CRITERION_KEYS]
        if unknown:
            raise fail(f"{label}: unknown key {unknown[0]!r}; a criterion takes only name and question (the wording "
                       "the judge reads)", line)
        values = {}
        for key in _CRITERION_KEYS:
            value = entry.get(key)
            if value is None:
                raise fail(f"{label} has no {key}; give it {key} = \"...\"", line)
            if not isinstance(value, str):
                raise fail(f"{label}: {key} must be text, got {type(value).__name__}", line)
            values[key] = " ".join(value.split())
            if not values[key]:
                raise fail(f"{label} has an empty {key}; write the {'name shown in reports' if key == 'name' else 'question the judge answers yes or no'}", line)
            if "{{" in values[key]:
                raise fail(f"{label}: {key} contains '{{{{', which the prompt would read as a placeholder; rephrase it",
                           line)
        if "\n" in entry["name"].strip() or len(values["name"]) > MAX_NAME_CHARS:
            raise fail(f"{label}: the name must be one line of at most {MAX_NAME_CHARS} characters (it labels tables "
                       "and plots); put the detail in the question", line)
        key = values["name"].casefold()
        if key in seen:
            raise fail(f"{label} repeats the name {values['name']!r} of criterion {seen[key] + 1}; names must be "
                       "distinct (case and spacing ignored)", line)
        seen[key] = i
        criteria.append(Criterion(name=values["name"], question=values["question"]))
    return Rubric(name=" ".join(name.split()), criteria=tuple(criteria), description=description.strip(),
                  source=source)


def _key_line(text: str, key: str) -> int | None:
    """1-based line of the first ``key = ...`` (or ``"key":``) in ``text``, or ``None``."""
    pattern = re.compile(rf'^\s*(?:{re.escape(key)}|"{re.escape(key)}")\s*[=:]', re.MULTILINE)
    m = pattern.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _criterion_line(text: str, index: int) -> int | None:
    """1-based line of the ``index``-th ``[[criteria]]`` header of a TOML file, or ``None`` (JSON, inline tables)."""
    headers = [m.start() for m in re.finditer(r"^\s*\[\[\s*criteria\s*\]\]", text, re.MULTILINE)]
    return text.count("\n", 0, headers[index]) + 1 if index < len(headers) else None


def resolve_rubric(value: Rubric | str | Path | None) -> Rubric:
    """``value`` as a :class:`Rubric`: itself, a file read with :func:`load_rubric`, or the built-in one for ``None``."""
    if value is None:
        return builtin_rubric()
    if isinstance(value, Rubric):
        return value
    return load_rubric(value)


def family_rubric(family: Mapping[str, Any]) -> dict[str, Any] | None:
    """The rubric summary of a rubric family (a :meth:`rcp_jax.judging.store.records.JudgeFamily.to_dict`): the one it
    records, the built-in rubric's when it records none and its prompt is the built-in prompt (families judged
    with the built-in rubric record none, so their ids did not change), else ``None`` (a custom template)."""
    recorded = family.get("rubric")
    if recorded:
        return dict(recorded)
    builtin = builtin_rubric()
    if family.get("prompt_hash") == builtin.template().hash:
        return builtin.summary()
    return None


def criterion_labels(summary: Mapping[str, Any] | None, k: int) -> list[str]:
    """The K criterion names of a rubric summary, or ``C1..CK`` when there is none (or it has another K)."""
    names = list((summary or {}).get("criteria") or [])
    return names if len(names) == k else [f"C{i + 1}" for i in range(k)]


def same_rubric(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two rubric summaries name the same criteria (same hash)."""
    return (a or {}).get("hash") == (b or {}).get("hash")


def check_rubric_matches(recorded: Mapping[str, Any] | None, given: Rubric, *, what: str, fix: str) -> None:
    """Refuse ``given`` when ``recorded`` (the rubric ``what`` was judged with) is another one.

    Raises :class:`RubricError` naming both rubrics, ``what`` (e.g. the store) and ``fix``.
    """
    if recorded is None or same_rubric(recorded, given.summary()):
        return
    raise RubricError(
        f"{what} was judged with {describe_summary(recorded)}, but this run uses {given.describe()}; answers to one "
        f"rubric's questions cannot be fitted or extended with another's. {fix}"
    )


def judge_rubric(judge: Any) -> dict[str, Any] | None:
    """The summary (:meth:`Rubric.summary`) of the rubric ``judge`` asks its rubric windows with, or ``None`` when
    its rubric prompt is a custom template not made from a rubric."""
    template = (getattr(judge, "prompts", None) or {}).get("rubric")
    rubric = getattr(template, "rubric", None)
    return rubric.summary() if rubric is not None else None
