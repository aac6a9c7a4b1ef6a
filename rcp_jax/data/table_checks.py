"""Checks of table columns and cells that name the offending file, line and id in every error.

The tables come from :mod:`rcp_jax.data.formats` (index = source line, ``attrs["source"]`` = file path).
These helpers select columns by name or alias, turn cells into id strings or finite floats, and find
duplicate keys; each refusal is a :class:`~rcp_jax.errors.DataError` that says where and how to fix it.
:func:`finite_column` serves any table (runs, window scores) and leaves the message to the caller.
:func:`id_codes`, :func:`id_codes_at`, :func:`run_codes`, :func:`run_heads` (or :func:`change_bits` with
:func:`run_starts`) and :func:`id_positions` turn id columns of any dtype into integer codes in a few vectorised
passes (the ids as strings, as ``astype(str)`` gives them), so the fits' table encodings never group, merge or
sort string columns. :func:`start_chunk_codes` codes a long id column in chunks of whole queries, tasks of a
:class:`~rcp_jax.data.task_queue.TaskQueue` on a small thread pool (:func:`id_pool`; pyarrow hashes without the
GIL), so each chunk's hash table stays in cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import contextmanager
from functools import partial

import numpy as np
import pandas as pd

from rcp_jax.data.task_queue import TaskQueue
from rcp_jax.errors import DataError

_ALIASES = {
    "query_id": ("query_id", "query-id", "qid", "_id"),
    "doc_id": ("doc_id", "corpus-id", "docid", "_id"),
    "grade": ("grade", "score", "relevance", "label"),
}


def _where(df: pd.DataFrame, label, what: str = "table") -> str:
    """``file:line`` (or ``file, row n``) of the row labelled ``label``."""
    source = df.attrs.get("source")
    unit = df.index.name
    if source and unit == "line":
        return f"{source}:{label}"
    if source:
        return f"{source}, {unit or 'row'} {label}"
    return f"{what} row {label}"


def plain(value):
    """``value`` with NumPy scalars (also inside lists, tuples, sets and dicts) as plain Python values,
    so that a message shows ``nan`` or ``2``, never ``np.float64(nan)`` or ``np.int64(2)``."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple, set)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value


def show(value) -> str:
    """``repr`` of a cell for a message, with NumPy scalars shown as plain Python values (``nan``, ``2``,
    ``'q1'``)."""
    return repr(plain(value))


_show = show


def _unit(df: pd.DataFrame) -> str:
    return df.index.name or "row"


def _id_string(value) -> str | None:
    """A cell as an id string; integral floats (from JSON or Parquet) lose their '.0'; None if missing."""
    if value is None:
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if value.is_integer():
            return str(int(value))
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8")
    s = str(value).strip()
    return s if s else None


def _rename(df: pd.DataFrame, wanted: Sequence[str], optional: Sequence[str] = (), what: str = "") -> pd.DataFrame:
    """Select ``wanted`` (+ present ``optional``) columns, accepting the aliases of :data:`_ALIASES`."""
    mapping = {}
    for col in list(wanted) + list(optional):
        for alias in _ALIASES.get(col, (col,)):
            if alias in df.columns and alias not in mapping:
                mapping[alias] = col
                break
    got = set(mapping.values())
    missing = [c for c in wanted if c not in got]
    if missing:
        raise DataError(
            f"{df.attrs.get('source', what)}: missing column(s) {missing} for {what}; expected "
            f"{list(wanted)}{' [+ ' + ', '.join(optional) + ']' if optional else ''}, got {list(df.columns)}"
        )
    out = df.loc[:, list(mapping)].rename(columns=mapping)
    out.attrs = dict(df.attrs)
    return out


def _ids(df: pd.DataFrame, columns: Sequence[str], what: str) -> pd.DataFrame:
    for col in columns:
        values = [_id_string(v) for v in df[col].tolist()]
        bad = [i for i, v in enumerate(values) if v is None]
        if bad:
            label = df.index[bad[0]]
            raise DataError(f"{_where(df, label)}: empty {col} in {what}; every row needs a {col}")
        df[col] = pd.Series(values, index=df.index, dtype=str)
    return df


def _numbers(df: pd.DataFrame, col: str, describe) -> np.ndarray:
    """Column ``col`` as float64, refusing text, NaN and infinities; ``describe(row)`` names the row."""
    raw = df[col]
    values = pd.to_numeric(raw.map(lambda v: v.strip() if isinstance(v, str) else v), errors="coerce")
    values = values.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        label = df.index[i]
        raise DataError(
            f"{_where(df, label)}: {col} {_show(raw.iloc[i])} of {describe(df.iloc[i])} is not a finite number; "
            f"fix the value or drop the {_unit(df)}"
        )
    return values


def finite_column(df: pd.DataFrame, col: str) -> tuple[np.ndarray, pd.Series | None]:
    """Column ``col`` as float64[n] (cells that are not numbers become NaN; a float64 column is not copied:
    the array is then a read-only view) and the first row whose value is not finite, or None when all are
    finite; the row's ``name`` is its index label, so a message can quote the original cell
    (``df.loc[row.name, col]``)."""
    column = df[col]
    if column.dtype == np.dtype(np.float64):  # already numbers: a read-only view of the column, no copy
        values = column.to_numpy().view()
        values.flags.writeable = False
    else:
        values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
    if np.isfinite(values).all():
        return values, None
    return values, df.loc[~np.isfinite(values)].iloc[0]


def _first_duplicate(df: pd.DataFrame, keys: Sequence[str]):
    dup = df.duplicated(list(keys), keep=False)
    if not dup.any():
        return None
    rows = df.loc[dup]
    first_key = tuple(rows.iloc[0][k] for k in keys)
    same = rows[np.all([rows[k] == v for k, v in zip(keys, first_key)], axis=0)]
    return first_key, list(same.index[:2])


def id_strings(column: pd.Series) -> pd.Series:
    """An id column as strings (a column that already holds strings is returned as is; others are cast
    with ``astype(str)``, which keeps missing cells missing)."""
    return column if isinstance(column.dtype, pd.StringDtype) else column.astype(str)


def id_codes(column: pd.Series, *, sort: bool = False) -> tuple[np.ndarray, pd.Index]:
    """``(codes int64[n], names)`` of an id column: exactly ``pd.factorize(id_strings(column), sort=sort)``
    (names: a string Index, sorted or in order of first appearance; code -1 for a missing cell), without
    turning every cell into a string.

    String columns are factorized as they are. Other columns (integers, categoricals, objects) are
    factorized by value first (a categorical by its codes), and only the distinct values are turned into
    strings; values that give the same string (``1`` and ``"1"``) are then merged, so the codes are those of
    the strings. A column with missing cells takes the plain path.
    """
    if isinstance(column.dtype, pd.StringDtype) or column.hasnans:
        codes, names = pd.factorize(id_strings(column), sort=sort)
        return np.asarray(codes, dtype=np.int64), names
    if isinstance(column.dtype, pd.CategoricalDtype):  # its codes, numbered by first appearance (integer hash)
        raw_codes, used = pd.factorize(column.cat.codes.to_numpy())
        raw_names = column.cat.categories.take(used)
    else:
        raw_codes, raw_names = pd.factorize(column)
    codes, names = pd.factorize(id_strings(pd.Series(raw_names)), sort=sort)
    return np.asarray(codes, dtype=np.int64)[raw_codes], names


def _arrow(values) -> object | None:
    """The pyarrow array of an arrow-backed string column or Index without missing cells, else None (one
    chunk is taken as it is, several are combined; missing cells are counted by arrow, no pass)."""
    if not (isinstance(values.dtype, pd.StringDtype) and values.dtype.storage == "pyarrow"):
        return None
    chunked = values.array.__arrow_array__()
    if chunked.null_count:
        return None
    if not hasattr(chunked, "num_chunks"):
        return chunked
    return chunked.chunk(0) if chunked.num_chunks == 1 else chunked.combine_chunks()


def arrow_ids(column) -> object | None:
    """The pyarrow array of an arrow-backed string id column (or Index) without missing cells, else None."""
    return _arrow(column)


def chunk_bounds(starts: np.ndarray, n: int, rows: int | None = None) -> np.ndarray:
    """int64[B + 1]: cuts of ``n`` rows into chunks of at least ``rows`` rows (default :data:`CHUNK_ROWS`),
    cut only at ``starts`` int[G] (sorted first rows of groups); first 0, last ``n``."""
    rows = CHUNK_ROWS if rows is None else rows
    starts = np.asarray(starts, dtype=np.int64)
    targets = np.arange(rows, n, rows, dtype=np.int64)
    cut = starts[np.minimum(np.searchsorted(starts, targets), len(starts) - 1)] if len(starts) else targets[:0]
    return np.unique(np.concatenate([np.array([0, n], dtype=np.int64), cut[(cut > 0) & (cut < n)]]))


def order_by_code_and_id(codes: np.ndarray, column: pd.Series) -> np.ndarray:
    """int64[n]: the stable order of rows by (``codes`` int[n], then the id of ``column`` as a string);
    arrow strings are sorted by pyarrow on both keys at once, others through their sorted :func:`id_codes`.

    When ``codes`` never decrease (rows grouped by code, in order) and there are many rows, the arrow sort runs
    in chunks of whole codes on the id thread pool (:func:`id_pool`; pyarrow sorts without the GIL): the same
    order, since no code spans two chunks and the sort is stable."""
    values = _arrow(column)
    if values is None:
        id_code, names = id_codes(column)
        rank = np.empty(len(names), dtype=np.int64)
        rank[names.argsort()] = np.arange(len(names))
        return np.lexsort((rank[id_code], codes))
    import pyarrow as pa
    import pyarrow.compute as pc

    codes = np.asarray(codes)
    keys = [("code", "ascending"), ("id", "ascending")]

    def order(a: int, b: int) -> np.ndarray:
        table = pa.table({"code": codes[a:b], "id": values.slice(a, b - a)})
        return pc.sort_indices(table, sort_keys=keys).to_numpy().astype(np.int64) + a

    n = len(codes)
    if n < 2 * CHUNK_ROWS or np.any(codes[1:] < codes[:-1]):
        return order(0, n)
    bounds = chunk_bounds(np.flatnonzero(np.diff(codes, prepend=codes[0] - 1) != 0), n)
    jobs = [id_pool().submit(order, int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
    return np.concatenate([job.result() for job in jobs])


@contextmanager
def small_pages():
    """Turn numpy's huge-page advice off while a table encoding allocates its short-lived temporaries; the
    previous setting is restored on exit.

    NumPy advises transparent huge pages (``madvise``) for every array of 4 MB or more. Where the kernel
    defragments synchronously for that advice (THP ``defrag = madvise``, a common default), faulting in the
    hundreds of MB of temporaries of an encoding stalls in memory compaction once memory is fragmented: at
    10,000 queries (21.6 M window rows) a public BT call spent 0.6 s of system time with the advice and 0.3 s
    without it (3.81 -> 3.47 s wall; 0.443 -> 0.365 s at 1,000 queries). The setting is process-wide, so
    arrays other threads allocate meanwhile get plain pages too: a matter of speed only, never of results.
    Without numpy's switch (``numpy._core.multiarray._set_madvise_hugepage``) this does nothing.
    """
    core = getattr(np, "_core", None)
    toggle = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if toggle is None:
        yield
        return
    before = toggle(False)
    try:
        yield
    finally:
        toggle(before)


#: Rows per chunk of :func:`start_chunk_codes` (at least): a chunk's hash table stays in cache.
CHUNK_ROWS = 1 << 17
_POOL = None


def id_pool():
    """The thread pool of the id coding (two workers: pyarrow hashes and compares strings without the GIL)."""
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=max(1, min(2, _cores())), thread_name_prefix="rcp-id-codes")
    return _POOL


def _cores() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one, e.g. ``taskset`` or a container's
    cpuset; else the machine's count)."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def id_helpers() -> int:
    """Workers of :func:`id_pool` to lend a :class:`~rcp_jax.data.task_queue.TaskQueue` beside the calling
    thread: one thread per core in all (1 on 2 cores, 0 on one), at most the pool's two."""
    return max(0, min(2, _cores() - 1))


def run_cuts(column: pd.Series, first: int, rows: int) -> np.ndarray | None:
    """int64[C + 1]: cuts of an arrow-string id column (no missing cells) at the first run boundary (a row
    whose id differs from the previous row's) at or after rows ``first``, ``first + rows``, ...; first cut 0,
    last ``n``. None for other columns. Each boundary is found by comparing a short stretch of ids after the
    target row with the id before it (pyarrow, stretches doubling from 4,096 rows), not by a pass over the
    column: a few calls per cut."""
    values = _arrow(column)
    if values is None:
        return None
    import pyarrow.compute as pc

    n = len(values)
    cuts = [0]
    target = max(int(first), 1)
    while target < n:
        at, span, before = target, 4096, values[target - 1]
        while at < n:
            hit = pc.index(pc.not_equal(values.slice(at, span), before), True).as_py()
            if hit >= 0:
                at += hit
                break
            at, span = at + span, span * 2
        if at >= n:
            break
        cuts.append(at)
        target = at + rows
    cuts.append(n)
    return np.asarray(cuts, dtype=np.int64)


def start_chunk_codes(column: pd.Series, starts: np.ndarray | None = None, *, bounds: np.ndarray | None = None,
                      queue: TaskQueue | None = None):
    """Start coding an arrow-string id column in chunks of whole groups, on a thread pool; returns a
    :class:`ChunkCodes` (call it to wait for ``(codes int32[n], names)``; or take the chunks as they are
    done), or None when the column is not arrow strings without missing cells (then use :func:`id_codes`).

    ``starts`` int[G] are the sorted first rows of the groups (e.g. the runs of a query id, first 0); the
    column is cut only at these rows, into chunks of at least :data:`CHUNK_ROWS` rows. Or ``bounds``
    int[C + 1] gives the cuts themselves (first 0, last ``n``; e.g. from :func:`run_cuts`). Each chunk is
    dictionary-encoded on its own: a small hash table per chunk instead of one that leaves the cache (at 21.6
    M rows 1.65 s -> ~0.4 s of CPU). Codes number the ids by (chunk, first appearance in the chunk), so
    they follow the order of first appearance in the column, and ``names`` (a string Index, the column's
    dtype) is the chunks' distinct ids one after another. An id found in two chunks gets two codes (and is
    twice in ``names``): within a chunk, a code is one id. When no id spans two chunks the result equals
    :func:`id_codes` (``pd.factorize``).

    The chunks are tasks of ``queue`` (run by its helpers, or by whoever asks for a chunk first); without
    one, of a queue of their own on :func:`id_pool`.
    """
    values = _arrow(column)
    if values is None:
        return None
    bounds = chunk_bounds(starts, len(values)) if bounds is None else np.asarray(bounds, dtype=np.int64)
    own = queue is None
    if own:
        queue = TaskQueue(id_pool(), id_helpers())
    codes = ChunkCodes(queue, bounds, column, values)
    if own:
        queue.close()
    return codes


class ChunkCodes:
    """The codes of :func:`start_chunk_codes` while its chunks are being coded (tasks of a
    :class:`~rcp_jax.data.task_queue.TaskQueue`, one per chunk).

    Call it to wait for every chunk and get ``(codes int32[n], names)``. Before that, :meth:`chunk` gives one
    chunk's own codes once that chunk is coded, :meth:`on_coded` has each chunk handed over by the thread that
    codes it (while its codes are in cache), and :meth:`names` gives the distinct ids without touching the
    codes."""

    def __init__(self, queue: TaskQueue, bounds: np.ndarray, column: pd.Series, values):
        import threading

        self._queue, self._column, self._values = queue, column, values
        self._out = np.empty(len(values), dtype=np.int32)
        self._lock, self._coded, self._hook = threading.Lock(), [False] * (len(bounds) - 1), None
        self._final = None
        self._tasks = [(int(a), int(b), queue.add(partial(self._encode, k, int(a), int(b))))
                       for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]

    def _encode(self, k: int, a: int, b: int):
        """Code chunk ``k`` (rows ``a..b-1``) and hand it to the :meth:`on_coded` hook, if one is set."""
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(self._values.slice(a, b - a))
        np.copyto(self._out[a:b], encoded.indices.to_numpy())
        with self._lock:
            self._coded[k] = True
            hook = self._hook
        if hook is not None:
            hook(k, a, b, self._out[a:b], len(encoded.dictionary))
        return encoded.dictionary

    def on_coded(self, hook) -> list[int]:
        """Have ``hook(k, a, b, codes, count)`` (:meth:`chunk`'s values) called by the thread that codes each
        chunk not coded yet, right after coding it (an error it raises is that chunk's error); returns the
        chunks coded already, which the hook will not see. Each chunk is in exactly one of the two."""
        with self._lock:
            self._hook = hook
            return [k for k, coded in enumerate(self._coded) if coded]

    def __len__(self) -> int:
        return len(self._tasks)

    def chunk(self, k: int) -> tuple[int, int, np.ndarray, int]:
        """``(a, b, codes int32[b - a], count)`` of chunk ``k`` (rows ``a..b-1``), once it is coded (coded here
        if nobody has started it): its ids coded ``0 .. count - 1`` in order of first appearance in the chunk
        (a view: valid until the object is called)."""
        a, b, task = self._tasks[k]
        return a, b, self._out[a:b], len(self._queue.result(task))

    def wait(self) -> None:
        """Wait until every chunk is coded (the error of a chunk is raised here)."""
        for _, _, task in self._tasks:
            self._queue.result(task)

    def names(self) -> pd.Index:
        """The chunks' distinct ids one after another (a string Index of the column's dtype), once all are coded."""
        import pyarrow as pa

        parts = [self._queue.result(task) for _, _, task in self._tasks]
        names = pa.concat_arrays(parts) if parts else self._values.slice(0, 0)
        return pd.Index(type(self._column.array)(names, dtype=self._column.dtype))

    def __call__(self) -> tuple[np.ndarray, pd.Index]:
        """``(codes int32[n], names)``, once every chunk is coded: the codes of a chunk follow those of the
        chunks before it."""
        if self._final is None:
            offset = 0
            for a, b, task in self._tasks:
                count = len(self._queue.result(task))
                if offset + count >= 2**31 - 1:
                    raise OverflowError("more than 2**31 - 1 distinct ids in one column")
                if offset:
                    self._out[a:b] += offset
                offset += count
            self._final = (self._out, self.names())
        return self._final


def _category_codes(column: pd.Series) -> np.ndarray | None:
    """A categorical column's own codes int[n] (-1: missing) when its categories are distinct as strings
    (equal codes then mean equal ids, as :func:`id_codes` reads them); else None."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return None
    if not id_strings(pd.Series(column.cat.categories)).is_unique:  # e.g. 1 and "1": one id
        return None
    return column.cat.codes.to_numpy()


def run_heads(column: pd.Series, breaks: np.ndarray | None = None, *, split: bool = False) -> np.ndarray:
    """bool[n]: True on the first row and on every row whose id differs from the previous row's (or
    where ``breaks`` bool[n] is True). Arrow-backed string columns are compared by pyarrow, others by
    their :func:`id_codes`. ``split``: a long arrow column's second half is compared on the id thread pool
    (:func:`id_pool`; pyarrow compares without the GIL) while the calling thread compares the first (only
    from a thread that is not an id-pool worker)."""
    n = len(column)
    change = np.ones(n, dtype=bool)
    if n > 1:
        values = _arrow(column)
        if values is not None:
            import pyarrow.compute as pc

            def compare(a: int, b: int) -> None:  # rows a..b-1 (a >= 1) against the rows before them
                np.copyto(change[a:b], pc.not_equal(values.slice(a, b - a), values.slice(a - 1, b - a))
                          .to_numpy(zero_copy_only=False))

            half = n // 2 if split and n >= 4 * CHUNK_ROWS else n
            job = id_pool().submit(compare, half, n) if half < n else None
            compare(1, half)
            if job is not None:
                job.result()
        else:
            codes = _category_codes(column)
            if codes is None:
                codes, _ = id_codes(column)
            change[1:] = codes[1:] != codes[:-1]
    if breaks is not None:
        change |= breaks
    return change


def change_bits(column: pd.Series):
    """Where each row's id differs from the previous row's, for rows 1..n-1: a pyarrow ``BooleanArray[n - 1]``
    for an arrow-backed string column without missing cells (compared by pyarrow, without the GIL), else a
    numpy ``bool[n - 1]`` (:func:`run_heads`). Combine them with :func:`run_starts`."""
    values = _arrow(column)
    n = len(column)
    if values is None or n < 2:
        return run_heads(column)[1:]
    import pyarrow.compute as pc

    return pc.not_equal(values.slice(1), values.slice(0, n - 1))


def run_starts(n: int, *bits) -> np.ndarray:
    """int64[R]: the first rows of the runs of ``n`` rows cut wherever any of ``bits`` (from
    :func:`change_bits` of columns of ``n`` rows) is set: row 0, then the set rows, sorted. Arrow bits are
    combined and searched by pyarrow (no bool array of ``n`` rows is made)."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if all(isinstance(b, np.ndarray) for b in bits):
        hit = np.flatnonzero(np.logical_or.reduce(bits)) if len(bits) > 1 else np.flatnonzero(bits[0])
    elif all(not isinstance(b, np.ndarray) for b in bits):
        import pyarrow.compute as pc

        mask = bits[0]
        for more in bits[1:]:
            mask = pc.or_(mask, more)
        hit = pc.indices_nonzero(mask).to_numpy().view(np.int64)
    else:
        return run_starts(n, *(b if isinstance(b, np.ndarray) else b.to_numpy(zero_copy_only=False) for b in bits))
    starts = np.empty(len(hit) + 1, dtype=np.int64)
    starts[0] = 0
    np.add(hit, 1, out=starts[1:])
    return starts


def id_codes_at(column: pd.Series, rows: np.ndarray, *, sort: bool = False) -> tuple[np.ndarray, pd.Index]:
    """``id_codes(column.take(rows), sort=sort)``: ``(codes int64[len(rows)], names)`` of the ids at positions
    ``rows`` int[m]. An arrow-backed string column without missing cells is taken and dictionary-encoded by
    pyarrow (the sorted names by pyarrow's sort: UTF-8 bytes, the order of Python's string comparison)."""
    values = _arrow(column)
    if values is None:
        return id_codes(column.take(rows), sort=sort)
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(values.take(pa.array(np.asarray(rows, dtype=np.int64))))
    codes = encoded.indices.to_numpy().astype(np.int64)
    names = encoded.dictionary
    if sort and len(names):
        order = pc.sort_indices(names).to_numpy()
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        codes, names = rank[codes], names.take(order)
    return codes, pd.Index(type(column.array)(names, dtype=column.dtype))


def run_codes(column: pd.Series, *, sort: bool = False) -> tuple[np.ndarray, pd.Index]:
    """:func:`id_codes` of a column whose ids come in runs (a table grouped by query): only the first row of
    each run is factorized. Same ``(codes int64[n], names)``."""
    heads = np.flatnonzero(run_heads(column))
    head_codes, names = id_codes(column.take(heads), sort=sort)
    return np.repeat(head_codes, np.diff(np.append(heads, len(column)))), names


def id_positions(column: pd.Series, names: pd.Index, *, runs: bool = False) -> np.ndarray:
    """int64[n]: the position of each row's id (as :func:`id_strings` gives it) in ``names`` (distinct string
    ids), -1 where it is absent or missing. ``runs``: the ids come in runs, only each run's first row is
    looked up. Arrow-backed strings are looked up by pyarrow (``index_in``), others through their
    :func:`id_codes`."""
    if runs:
        heads = np.flatnonzero(run_heads(column))
        head_pos = id_positions(column.take(heads), names)
        return np.repeat(head_pos, np.diff(np.append(heads, len(column))))
    values, value_set = _arrow(column), _arrow(names)
    if values is not None and value_set is not None and values.type == value_set.type:
        import pyarrow.compute as pc

        return pc.index_in(values, value_set=value_set).fill_null(-1).to_numpy().astype(np.int64)
    codes, distinct = id_codes(column)
    return np.where(codes >= 0, names.get_indexer(distinct)[codes], -1) if len(codes) else codes
