"""The schedule identity of a judgement store, so that one store never holds two schedules.

The pipeline's windows are a pure function of the dataset name, the seed, the schedule constants and each
query's pool (ids in pool order), plus the judge's earlier answers. Judging into a store filled under
another identity (the same data in a renamed folder, another ``--seed``, an edited pools file) would ask
a whole second schedule, paid for again, into the same store. So the first ``rcp-jax judge`` records the
identity in ``<store>/identity.json`` and every later run compares, *before any judge call*:

=======================  ==================================================================================
what differs             what happens
=======================  ==================================================================================
nothing                  the run resumes
``dataset`` name         refused when ``--name`` was given; without ``--name`` (the name then only defaults
                         to the folder's) the run resumes under the recorded name, with one note
``seed``                 refused (``--seed <recorded>`` resumes)
``schedule`` constants   refused, naming each constant that differs
a recorded query's pool  refused, naming the queries (restore the pools file, or a new ``--store``)
new queries              judged, and added to the file with a note (a query's windows never depend on
                         the other queries, so a store can grow query by query)
``rubric`` (its hash)    refused, naming both rubrics (``--rubric <the store's file>`` resumes); an identity
                         written before rubric files records none: its store was judged with the built-in one
=======================  ==================================================================================

A store written before identity files existed (no ``identity.json``) is never refused for lacking one:
its stored round-1 tournament and balanced-rubric windows (a pure function of the identity) are compared
with this run's. When they agree the identity is adopted and written; when they disagree the store was
judged under another name, seed or pools, which is refused like a recorded mismatch.

The file (JSON, written atomically under the store's lock; format 1)::

    {
      "format": 1,
      "kind": "rcp-jax schedule identity",
      "dataset": "scifact",          # --name (default: the dataset folder's or rows file's name)
      "seed": 0,                     # --seed
      "schedule": {"w": 10, ...},    # rcp_jax.schedule.ScheduleConfig.to_dict()
      "pools_hash": "3f9c...",       # content_hash of {query_id: [doc ids in pool order]}, every recorded query
      "queries": {"q1": {"pool_hash": "a41e...", "documents": 150}, ...},
      "rubric": {"name": "paper", "hash": "...", "criteria": [...], "source": "builtin:paper"},
      "created": "2026-12-03T13:04:05+00:00",
      "updated": "2026-12-03T13:04:05+00:00",
      "rcp_jax": "0.1.0"
    }
"""

from __future__ import annotations

import shlex
import warnings
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rcp_jax import schedule as S
from rcp_jax.errors import DataError
from rcp_jax.judging.store.jsonl import IDENTITY_FILE, JudgementStore, read_identity
from rcp_jax.judging.store.records import Window, content_hash

FORMAT = 1
KIND = "rcp-jax schedule identity"
NEW_STORE_DEMO = " (with `rcp-jax demo`, a new --out)"


class StoreIdentityError(DataError):
    """This run's schedule identity differs from the one the store was judged under (refused before any call)."""


class StoreIdentityNote(UserWarning):
    """Something a user should know about the store's identity (a name taken from the store, a file adopted)."""


def pool_hash(doc_ids: Sequence[str]) -> str:
    """Hash of one query's pool (document ids in pool order)."""
    return content_hash([str(d) for d in doc_ids])


def make_identity(dataset: str, seed: int, config: S.ScheduleConfig, pools: Mapping[str, Sequence[str]],
                  rubric: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The identity of a run (see the module docstring); ``created``/``updated`` are set when written.
    ``rubric``: the summary of the run's rubric (:meth:`rcp_jax.judging.prompts.rubric.Rubric.summary`), or ``None``."""
    from rcp_jax import __version__

    queries = {str(q): {"pool_hash": pool_hash(docs), "documents": len(docs)} for q, docs in sorted(pools.items())}
    out = {
        "format": FORMAT,
        "kind": KIND,
        "dataset": str(dataset),
        "seed": int(seed),
        "schedule": config.to_dict(),
        "pools_hash": _pools_hash(queries),
        "queries": queries,
        "rcp_jax": __version__,
    }
    if rubric is not None:
        out["rubric"] = dict(rubric)
    return out


def _pools_hash(queries: Mapping[str, Mapping[str, Any]]) -> str:
    return content_hash({q: v["pool_hash"] for q, v in sorted(queries.items())})


def check_store_identity(
    store: JudgementStore,
    *,
    dataset: str,
    seed: int,
    config: S.ScheduleConfig,
    pools: Mapping[str, Sequence[str]],
    dataset_from_store: bool = False,
    say=None,
    rubric: Mapping[str, Any] | None = None,
) -> str:
    """Compare this run's identity with the one ``store`` (open, so locked) was judged under; record it.

    Args:
        store: the open store this run judges into.
        dataset, seed, config, pools: this run's schedule identity.
        dataset_from_store: the dataset name is only a default (``--name`` not given): when the store records
            another name and nothing else differs, resume under the recorded name (one
            :class:`StoreIdentityNote`).
        say: progress-line callback (first-run and new-query lines).
        rubric: the summary of this run's rubric (:meth:`rcp_jax.judging.prompts.rubric.Rubric.summary`); ``None`` checks none
            (a custom rubric template given in Python).

    Returns:
        The dataset name to schedule with (``dataset``, or the recorded one when ``dataset_from_store``).

    Raises:
        StoreIdentityError: another seed, schedule, pool of a recorded query, or (given explicitly) name; or
            a store without identity file whose stored windows another identity produced.
    """
    say = say or (lambda _msg: None)
    mine = make_identity(dataset, seed, config, pools, rubric)
    recorded = read_identity(store.folder)
    path = store.folder / IDENTITY_FILE
    now = datetime.now(UTC).isoformat(timespec="seconds")
    if recorded is None:
        if not _has_schedule_records(store):
            store.write_identity({**mine, "created": now, "updated": now})
            say(f"store identity recorded in {path}: dataset {dataset!r}, seed {seed}, {len(pools)} queries")
            return dataset
        _check_legacy(store, mine, pools, config)
        store.write_identity({**mine, "created": now, "updated": now, "adopted": True})
        warnings.warn(
            f"judgement store {store.folder} had no identity file (it predates them); its stored windows match "
            f"this run's schedule (dataset {dataset!r}, seed {seed}), so that identity is now recorded in {path}",
            StoreIdentityNote, stacklevel=3,
        )
        return dataset
    _check_format(recorded, path)
    if dataset_from_store and recorded["dataset"] != dataset:
        old_name = dataset
        dataset = str(recorded["dataset"])
        mine = make_identity(dataset, seed, config, pools, rubric)
        note = (f"resuming judgement store {store.folder} under its recorded dataset name {dataset!r} (this run's "
                f"default was {old_name!r}); pass --name to choose a name explicitly")
    else:
        note = None
    differences = _differences(recorded, mine)
    if differences:
        raise StoreIdentityError(_refusal(store.folder, path, differences, recorded))
    if note:
        warnings.warn(note, StoreIdentityNote, stacklevel=3)
    new = {q: v for q, v in mine["queries"].items() if q not in recorded["queries"]}
    if new:
        queries = {**recorded["queries"], **new}
        recorded = {**recorded, "queries": dict(sorted(queries.items())), "pools_hash": _pools_hash(queries),
                    "updated": now}
        store.write_identity({**({"rubric": rubric} if rubric is not None else {}), **recorded})
        say(f"store identity: {len(new)} new queries added to {path}")
    elif rubric is not None and "rubric" not in recorded:  # written before rubric files: now it says which
        store.write_identity({**recorded, "rubric": dict(rubric), "updated": now})
    return dataset


def _check_format(recorded: Mapping[str, Any], path: Path) -> None:
    fields = ("dataset", "seed", "schedule", "queries")
    if recorded.get("kind") != KIND or not all(f in recorded for f in fields) or not isinstance(recorded["queries"], dict):
        raise StoreIdentityError(
            f"{path} is not an rcp-jax schedule identity file (it lacks {', '.join(f for f in fields if f not in recorded)}"
            f" or its kind is not {KIND!r}); restore it, or delete it to let the next `rcp-jax judge` infer the "
            "identity from the stored answers"
        )
    if int(recorded.get("format", 0)) > FORMAT:
        raise StoreIdentityError(
            f"{path} has identity format {recorded.get('format')}, newer than this rcp-jax reads ({FORMAT}); "
            "upgrade rcp-jax to judge into this store"
        )


def _differences(recorded: Mapping[str, Any], mine: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(what, recorded value, this run's value) for every part of the identity that differs."""
    out: list[tuple[str, Any, Any]] = []
    if recorded["dataset"] != mine["dataset"]:
        out.append(("dataset", recorded["dataset"], mine["dataset"]))
    if int(recorded["seed"]) != mine["seed"]:
        out.append(("seed", int(recorded["seed"]), mine["seed"]))
    old_cfg, new_cfg = dict(recorded["schedule"]), mine["schedule"]
    for key in sorted(set(old_cfg) | set(new_cfg)):
        if old_cfg.get(key) != new_cfg.get(key):
            out.append((f"schedule.{key}", old_cfg.get(key), new_cfg.get(key)))
    changed = [(q, recorded["queries"][q], v) for q, v in mine["queries"].items()
               if q in recorded["queries"] and recorded["queries"][q].get("pool_hash") != v["pool_hash"]]
    if changed:
        out.append(("pools", changed, None))
    if mine.get("rubric") is not None:
        from rcp_jax.judging.prompts.rubric import builtin_rubric

        # an identity written before rubric files records none: its store was judged with the built-in rubric
        old_rubric = recorded.get("rubric") or builtin_rubric().summary()
        if old_rubric.get("hash") != mine["rubric"].get("hash"):
            out.append(("rubric", old_rubric, mine["rubric"]))
    return out


def _refusal(folder: Path, path: Path, differences: list[tuple[str, Any, Any]], recorded: Mapping[str, Any]) -> str:
    if [d[0] for d in differences] == ["rubric"]:
        lines = [f"judgement store {folder} was judged with another rubric ({path}): answers to two rubrics' questions "
                 "cannot be fitted together. Nothing was asked."]
    else:
        lines = [f"judgement store {folder} was judged under another schedule identity ({path}); this run would "
                 "judge a second schedule into it, paid for again, and the fit would mix the two. Nothing was asked."]
    fixes = []
    for what, old, new in differences:
        if what == "dataset":
            lines.append(f"  dataset name: store {old!r}, this run {new!r}")
            fixes.append(f"--name {shlex.quote(str(old))}")
        elif what == "seed":
            lines.append(f"  seed: store {old}, this run {new}")
            fixes.append(f"--seed {old}")
        elif what == "pools":
            shown = ", ".join(f"{q} ({o.get('documents', '?')} documents then, {n['documents']} now)"
                              for q, o, n in sorted(old, key=lambda t: t[0])[:5])
            more = f" and {len(old) - 5} more" if len(old) > 5 else ""
            lines.append(f"  pools: {len(old)} recorded queries have another pool (ids or their order): {shown}{more}")
            fixes.append("the pools file the store was judged with")
        elif what == "rubric":
            from rcp_jax.judging.prompts.rubric import describe_summary

            lines.append(f"  rubric: store {describe_summary(old)}; this run {describe_summary(new)}")
            source = str(old.get("source") or "")
            fixes.append("no --rubric (the store was judged with the built-in rubric)" if source.startswith("builtin:")
                         else f"--rubric {shlex.quote(source)}" if source else f"--rubric <the file of rubric {old.get('name')!r}>")
        else:
            lines.append(f"  {what}: store {old!r}, this run {new!r}")
            fixes.append(f"the schedule setting {what.split('.', 1)[1]} = {old!r}")
    instead = "judge with this rubric" if [d[0] for d in differences] == ["rubric"] else "judge this schedule"
    lines.append(f"To resume this store, run again with {' and '.join(fixes)}; to {instead} instead, pass "
                 f"a new --store folder{NEW_STORE_DEMO}.")
    return "\n".join(lines)


def _has_schedule_records(store: JudgementStore) -> bool:
    return any(store.path(stage).exists() and store.path(stage).stat().st_size > 0 for stage in ("tournament", "rubric"))


def _stored_windows(store: JudgementStore) -> dict[tuple[str, str, str, int], set[tuple[str, ...]]]:
    """(query, stage, phase, sequence) -> the document tuples stored under it (every record, valid or not)."""
    out: dict[tuple[str, str, str, int], set[tuple[str, ...]]] = {}
    for stage in ("tournament", "rubric"):
        for j in store.records(stage):
            w = j.window
            out.setdefault((w.query_id, w.stage, w.phase, w.sequence), set()).add(w.doc_ids)
    return out


def _check_legacy(store: JudgementStore, mine: Mapping[str, Any], pools: Mapping[str, Sequence[str]],
                  config: S.ScheduleConfig) -> None:
    """A store without identity file: its stored round-1 / balanced-rubric windows must be this run's."""
    stored = _stored_windows(store)
    expected: list[Window] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", S.ScheduleWarning)
        for q, docs in sorted(pools.items()):
            expected += S.tournament_round1(q, docs, seed=mine["seed"], dataset=mine["dataset"], config=config)
            expected += S.rubric_balanced(q, docs, seed=mine["seed"], dataset=mine["dataset"], config=config)
    mismatched = [w for w in expected
                  if (key := (w.query_id, w.stage, w.phase, w.sequence)) in stored and w.doc_ids not in stored[key]]
    if not mismatched:
        others = sorted({(w.query_id, w.phase, w.sequence) for w in expected
                         if len(stored.get((w.query_id, w.stage, w.phase, w.sequence), ())) > 1})
        if others:
            q, phase, seq = others[0]
            warnings.warn(
                f"judgement store {store.folder} also holds windows of another schedule ({len(others)} windows, e.g. "
                f"query {q!r} {phase}#{seq} was asked with two document sets): an earlier run used another --name, "
                "--seed or pools file. `rcp-jax fit` keeps every answer, each window on its own; for one balanced "
                "schedule, judge into a new --store",
                StoreIdentityNote, stacklevel=4,
            )
        return
    w = mismatched[0]
    queries = sorted({m.query_id for m in mismatched})
    raise StoreIdentityError(
        f"judgement store {store.folder} predates identity files, and its stored windows were scheduled under "
        f"another identity than this run's (dataset name {mine['dataset']!r}, seed {mine['seed']}): e.g. window "
        f"{w.label} holds other documents in the store. {len(mismatched)} window(s) of {len(queries)} queries "
        f"({', '.join(queries[:5])}{' ...' if len(queries) > 5 else ''}) differ. Nothing was asked. The store was "
        "judged with another --name (the dataset folder's name when --name was not given), another --seed, or "
        f"another pools file: run again with the ones it was judged with to resume it, or pass a new --store folder"
        f"{NEW_STORE_DEMO}."
    )
