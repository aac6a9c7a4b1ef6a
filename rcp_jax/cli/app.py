"""The ``rcp-jax`` command line.

Each verb lives in its own module under :mod:`rcp_jax.cli` exposing ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; this module only wires them together, sets the
process-level JAX options (host device count, the persistent compilation cache), makes SIGTERM stop a run
the way Ctrl-C does, and maps errors to exit codes:

====  ===========================================================================================
code  meaning
====  ===========================================================================================
0     success
1     unexpected runtime failure (a bug, or the machine: disk full...); the traceback is printed
2     bad input or usage: a file, option, pools, qrels or store the message names (also a store
      judged under another schedule identity, a folder option naming an existing file)
3     the judge failed: authentication, endpoint, transport, windows still invalid after their
      attempts, or an early-stop verdict (:class:`rcp_jax.judging.errors.JudgeError` other than bad input);
      every answer received is stored: fix the cause and run the same command again to resume
130   interrupted by Ctrl-C (SIGINT): answers received so far are stored; run the same command again
141   stdout was closed early (``rcp-jax compare per_query.csv | head -1``): the verb stops quietly, as
      Unix tools do on SIGPIPE (no traceback)
143   stopped by SIGTERM (``kill``, a scheduler's time limit): handled exactly like Ctrl-C
====  ===========================================================================================

An unknown option is refused with the closest option of the verb as a suggestion (``--datset``: did
you mean ``--dataset``?).
Under ``--json`` a handled failure (2, 3, 130, 143) also prints one JSON object on stdout, ``{"verb", "error",
"kind", "exit_code"}``, so a caller reading stdout always gets an answer.

The compilation cache keeps XLA's compiled programs (the BT and 2PL fits, the NUTS chain) on disk, so a
second ``rcp-jax fit`` skips most of its compile time. It
lives in ``$RCP_JAX_CACHE_DIR``, else ``$XDG_CACHE_HOME/rcp-jax/jax``, else ``~/.cache/rcp-jax/jax``;
``RCP_JAX_CACHE_DIR=off`` turns it off, and a ``JAX_COMPILATION_CACHE_DIR`` already set wins. Only the
console script sets it, and only before JAX is imported: a Python caller keeps its own JAX configuration.

Building the parser imports only the verb modules, which import NumPy, pandas, JAX and the judging layer
inside ``run``: ``rcp-jax --help`` and ``rcp-jax --version`` start without them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from rcp_jax import __version__

VERBS = ("demo", "pool", "judge", "doctor", "fit", "evaluate", "export", "compare", "meta_evaluate", "anchor",
         "plan_labels", "diagnose", "compare_lists", "extend")

#: Exit codes (see the module docstring and ``rcp-jax --help``).
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_JUDGE_FAILED = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_TERMINATED = 128 + 2, 128 + 15  # SIGINT, SIGTERM
EXIT_BROKEN_PIPE = 128 + 13  # SIGPIPE: what a shell reports for a Unix tool whose reader went away

EPILOG = """\
exit status:
  0    success
  1    unexpected runtime failure (a bug, or the machine: disk full...)
  2    bad input or usage: the message names the file, option or store and the fix
  3    the judge failed (authentication, endpoint, transport, windows still invalid after
       their attempts, an early-stop verdict); answers received are stored: fix the cause
       and run the same command again to resume
  130  interrupted by Ctrl-C; answers received so far are stored: run the same command again
  141  stdout closed early (e.g. piped into head): stopped quietly
  143  stopped by SIGTERM, handled like Ctrl-C
"""


def _load_commands() -> list:
    mods = []
    for verb in VERBS:
        try:
            mods.append(importlib.import_module(f"rcp_jax.cli.{verb}"))
        except ModuleNotFoundError as err:
            if err.name != f"rcp_jax.cli.{verb}":
                raise
    return mods


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rcp-jax",
        description="Calibrated LLM relevance gains (RCP) and RCP-nDCG with Bayesian uncertainty.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rcp-jax {__version__}")
    parser.add_argument(
        "--host-devices", type=int, default=None,
        help="number of CPU devices XLA exposes (for sharding / parallel chains); set before JAX starts",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    parser.verb_parsers = {}
    for mod in _load_commands():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        p.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout")
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
        parser.verb_parsers[mod.NAME] = p
    return parser


def unknown_arguments_message(extra: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """``unrecognized arguments: ...`` with, for each unknown option, the closest option ``parser`` has."""
    import difflib

    options = sorted({o for a in parser._actions for o in a.option_strings if o.startswith("--")})
    hints = []
    for arg in extra:
        if not arg.startswith("--"):
            continue
        name = arg.split("=", 1)[0]
        close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
        if close:
            hints.append(f"{name}: did you mean {close[0]}?")
    message = f"unrecognized arguments: {' '.join(extra)}"
    return "; ".join([message, *hints]) if hints else message


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, with unknown options refused by the verb's own parser (its usage line) and a
    suggestion of the closest known option."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        target = getattr(parser, "verb_parsers", {}).get(getattr(args, "verb", None), parser)
        target.error(unknown_arguments_message(extra, target))
    return args


def _silence_stdout() -> None:
    """Point stdout at the null device, so the interpreter's final flush does not raise again (its reader is gone)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # pragma: no cover - stdout without a file descriptor
        pass


COMPILE_CACHE_MAX_BYTES = 1 << 30  # least recently used programs are evicted beyond 1 GiB


def compilation_cache_dir(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The folder of JAX's persistent compilation cache the CLI uses, or None for none (see the module docstring)."""
    if environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None  # JAX reads it itself
    chosen = environ.get("RCP_JAX_CACHE_DIR")
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "0", "off", "false", "no", "none") else Path(chosen)
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rcp-jax" / "jax"


def _configure_compilation_cache() -> None:
    if "jax" in sys.modules:  # called from Python with JAX loaded: its configuration is the caller's
        return
    folder = compilation_cache_dir()
    if folder is not None:
        os.environ["JAX_COMPILATION_CACHE_DIR"] = str(folder)  # read when JAX is first imported
        os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(COMPILE_CACHE_MAX_BYTES))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rcp-jax`` console script; returns the process exit code."""
    parser = build_parser()
    args = _parse(parser, argv)
    if args.host_devices:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={args.host_devices}".strip()
    if not getattr(args, "verb", None):
        parser.print_help()
        return 2
    _configure_compilation_cache()
    # after --help / --version have exited: they need neither the judging layer nor the numeric stack
    from rcp_jax.errors import RcpError
    from rcp_jax.judging.errors import JudgeError, JudgeInputError, StoreError
    from rcp_jax.judging.transport.loop import interrupt_handler

    def show_warning(message, category, filename, lineno, file=None, line=None):  # noqa: ARG001
        # the message already names the file, line and id; the library's own source line would only confuse
        print(f"rcp-jax {args.verb}: warning: {message}", file=sys.stderr if file is None else file)

    previous = warnings.showwarning
    warnings.showwarning = show_warning
    previous_term = _install(signal.SIGTERM, interrupt_handler)  # SIGTERM stops a run like Ctrl-C
    try:
        code = int(args._run(args) or 0)
        sys.stdout.flush()  # a reader that went away shows here, not at interpreter exit
        return code
    except BrokenPipeError:  # stdout's reader closed early (| head): stop quietly, like a Unix tool on SIGPIPE
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except (RcpError, JudgeInputError, StoreError) as err:  # bad input, a damaged or locked store
        return _fail(args, "error", str(err), EXIT_USAGE)
    except JudgeError as err:  # authentication, endpoint, transport, invalid answers: every answer so far is stored
        return _fail(args, "judge failed", str(err), EXIT_JUDGE_FAILED)
    except (FileExistsError, NotADirectoryError, IsADirectoryError) as err:  # a path of the wrong kind
        return _fail(args, "error", _path_error(err), EXIT_USAGE)
    except KeyboardInterrupt as err:
        signum = getattr(err, "signum", signal.SIGINT)
        code = EXIT_TERMINATED if signum == signal.SIGTERM else EXIT_INTERRUPTED
        message = str(err) or "interrupted"
        if "run the same command again" not in message:
            message += "; run the same command again to resume"
        return _fail(args, "interrupted", message, code)
    finally:
        warnings.showwarning = previous
        if previous_term is not None:
            _install(signal.SIGTERM, previous_term)


def _fail(args, kind: str, message: str, code: int) -> int:
    """Say why ``args.verb`` failed on stderr and, under ``--json``, as one JSON object on stdout too
    (``{"verb", "error", "kind", "exit_code"}``), so a caller reading stdout always gets an answer; returns ``code``."""
    label = f"{kind}: " if kind != "interrupted" else ""
    print(f"rcp-jax {args.verb}: {label}{message}", file=sys.stderr)
    if getattr(args, "json", False):
        import json  # noqa: PLC0415

        print(json.dumps({"verb": args.verb, "error": message, "kind": kind, "exit_code": code}))
    return code


def _install(signum: int, handler):
    """Set ``handler`` for ``signum``; return the previous one (None where signals cannot be set: not the
    main thread, or an embedded interpreter)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        return signal.signal(signum, handler)
    except (ValueError, OSError):  # pragma: no cover
        return None


def _path_error(err: OSError) -> str:
    """One line for a path of the wrong kind (a file where a folder is needed, or the reverse)."""
    path = err.filename or "a path"
    if isinstance(err, IsADirectoryError):
        return f"{path} is a folder where a file is needed: pass a file path"
    if isinstance(err, NotADirectoryError):
        return f"{path} cannot be made: part of it is an existing file, not a folder; pass another path or move that file"
    return (f"{path} is an existing file where a folder is needed: pass a folder path (created when missing) or "
            "move the file")

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
