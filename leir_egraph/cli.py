"""The ``leir`` command. Each subcommand lives next to the layer it exposes and provides
``register(subparsers)``; this file assembles them and runs every one of them the same way.

    leir fmt FILE                          parse, validate, print canonical LEIR
    leir lower FILE --sig SIG              TIR (or CUDA source) of a program
    leir verify BEFORE AFTER --sig SIG     equivalence levels, errors, times
    leir from-torch FILE.py[:Class]        PyTorch module -> LEIR + signature
    leir steps FILE --sig SIG              single-step rewrites with their chain of thought
    leir search FILE --sig SIG             multi-step optimization search (verified, timed)
    leir explore FILE --sig SIG --depth D  every program reachable in at most D steps
    leir eval CASES --answers FILE         single-step evaluation of a model's answers
    leir strategies                        the strategies (rule files), or their Markdown doc
    leir rules check FILE|DIR [--verify]   a rule file's examples and counterexamples

Exit status, for every subcommand (README.md, "The leir command")::

    0    success
    1    leir verify: AFTER is not equivalent to BEFORE (the result is still printed);
         leir rules check: an example or counterexample fails (each failure is printed)
    2    bad input: a file that is missing, unreadable, not UTF-8, does not parse or does not
         validate; a bad option value; a rule file egglog rejects, or whose fact provider
         raises (its file and line); an unknown strategy id; a program past a limit
    3    internal error: a bug in leir-egraph (LEIR_DEBUG=1 shows the traceback)
    130  interrupted (Ctrl-C);  143  terminated (SIGTERM)

Every error is one line on standard error that names the file (``FILE:line:col: message``
where a position applies) or the option; never a traceback.

Adding a subcommand: write ``register(sub)`` in the layer's ``commands.py`` that adds a parser
with ``set_defaults(handler=fn)``, and list the module in ``SUBCOMMANDS``. ``fn(args)`` returns
the exit status. For bad input it raises :class:`InputError` with the one-line message, or
lets one of the library's own input errors propagate (``INPUT_ERRORS``: syntax, validation,
file, rule-file, selection errors ...); ``run_command`` prints those as one line with status 2,
turns anything else into an internal error, and handles Ctrl-C and SIGTERM, so that worker
processes are shut down on the way out. Option values are checked while parsing with the
types below (``bounded(kind, minimum)`` and its named cases ``positive_float``,
``natural`` ...), so a bad value is refused before any work.
A new exception class of the library that means bad input goes into ``INPUT_ERRORS``. Python
work that must stop after a while runs under ``time_limit(seconds)``. A command outside
``leir`` gets the same policy from ``run_command(parser, argv)`` with a parser built from
:class:`ArgumentParser` whose defaults hold ``handler`` (``python -m leir_egraph.sample``).
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

# Subcommand providers, in --help order.
SUBCOMMANDS = (
    "leir_egraph.leir.commands",
    "leir_egraph.lower.commands",
    "leir_egraph.verify.commands",
    "leir_egraph.frontend.commands",
    "leir_egraph.egraph.commands",
    "leir_egraph.search.commands",
    "leir_egraph.explore.commands",
    "leir_egraph.evaluate.commands",
)

EXIT_OK, EXIT_NOT_EQUIVALENT, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143

# The library's exceptions that mean "the input is bad" (module, class). They are looked up
# in sys.modules only: an exception class that was never imported cannot have been raised, and
# importing it here would cost every command the import (egglog, torch).
INPUT_ERRORS = (
    ("leir_egraph.leir.files", "LeirFileError"),
    ("leir_egraph.leir.parser", "LeirSyntaxError"),
    ("leir_egraph.leir.validate", "LeirValidationError"),
    ("leir_egraph.egraph.strategy", "RuleFileError"),
    ("leir_egraph.egraph.strategy", "UnknownStrategy"),
    ("leir_egraph.egraph.vocabulary", "ProviderError"),
    ("leir_egraph.leir.limits", "ProgramTooLarge"),
    ("leir_egraph.dataset.sources", "SourceError"),
    ("leir_egraph.dataset.shards", "ResumeError"),
    ("leir_egraph.dataset.shards", "OutputFolderError"),
    ("leir_egraph.dataset.pipeline", "StrategySelectionError"),
    ("leir_egraph.frontend.errors", "UnsupportedOp"),
    ("leir_egraph.frontend.errors", "TranslationError"),
    ("leir_egraph.frontend.translate", "TraceFailure"),
    ("leir_egraph.outside", "OutsideInputError"),
    ("leir_egraph.egraph.vocabulary", "ProviderError"),
)


class InputError(Exception):
    """Bad input, reported as one line (the message names the file or option) with status 2."""


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that ``finally`` blocks stop worker processes."""


class TimeLimit(BaseException):
    """Raised by :func:`time_limit` (a BaseException: no ``except Exception`` swallows it);
    ``limit`` is the object the ``with`` statement of the limit that fired yielded."""

    def __init__(self, limit=None):
        super().__init__()
        self.limit = limit


@contextmanager
def time_limit(seconds: float):
    """Raise :class:`TimeLimit` in the block once ``seconds`` have passed (SIGALRM: POSIX,
    main thread; elsewhere the block runs unbounded). For the commands' own Python work; work
    in worker processes is bounded by the workers' own timeouts. Limits nest: an inner limit
    that would end after the outer one leaves the outer in charge, and the outer limit's timer
    is restored (less the time spent) when an inner one ends. ``with time_limit(s) as limit``
    tells one's own :class:`TimeLimit` (``err.limit is limit``) from an outer one's. A limit
    whose signal lands where Python ignores exceptions (a gc callback, ``__del__``) fires again."""
    limit = object()
    if not hasattr(signal, "setitimer") or not _main_thread():
        yield limit
        return
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0]
    if outer_left and outer_left <= seconds:
        yield limit
        return
    started = time.monotonic()

    def expire(signum, frame):
        raise TimeLimit(limit)

    def ignored(unraisable):
        # Python ignores an exception raised where nothing can catch it -- a gc callback (as
        # hypothesis installs), a __del__, a weakref callback -- and reports it here; when the
        # signal landed in one, it fires again at once, so the limit still ends the block.
        if isinstance(unraisable.exc_value, TimeLimit) and unraisable.exc_value.limit is limit:
            signal.setitimer(signal.ITIMER_REAL, 1e-3)
        else:
            previous_hook(unraisable)

    previous = signal.signal(signal.SIGALRM, expire)
    previous_hook, sys.unraisablehook = sys.unraisablehook, ignored
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield limit
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if sys.unraisablehook is ignored:
            sys.unraisablehook = previous_hook
        if outer_left:
            signal.setitimer(signal.ITIMER_REAL,
                             max(outer_left - (time.monotonic() - started), 1e-3))


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors (status 2), for the command and its subcommands."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ---------------------------------------------------------------- option value types

def bounded(kind: type, minimum, *, strict: bool = False, unit: str = ""):
    """The option type for a ``kind`` (``int`` or ``float``) value ``>= minimum`` (``> minimum``
    when ``strict``); a float must also be finite. ``unit`` names what the number counts in the
    error (``"seconds"``). Every numeric option of every command is one of these."""
    noun = "an integer" if kind is int else "a number" + (f" of {unit}" if unit else "")
    bound = f"{noun} {'>' if strict else '>='} {minimum}"
    unparsable = bound if kind is int else "a finite " + bound[len("a "):]

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {unparsable}, got {text!r}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected {unparsable}, got {text!r}")
        if value < minimum or (strict and value == minimum):
            raise argparse.ArgumentTypeError(f"expected {bound}, got {text.strip()}")
        return value
    parse.__name__ = bound
    return parse


natural = bounded(int, 0)                                   # seeds, caps
positive_int = bounded(int, 1)                              # counts, workers, trials
natural_float = bounded(float, 0)                           # temperatures
positive_float = bounded(float, 0, strict=True, unit="seconds")   # timeouts


# ---------------------------------------------------------------- choosing strategies

def add_rules_option(parser) -> None:
    """``--rules DIR`` (repeatable), the one way every command takes user strategies."""
    parser.add_argument("--rules", metavar="DIR", action="append", default=[],
                        help="a directory of rule files (repeatable): its strategies join the "
                             "built-in ones and can be named by id")


def chosen_strategies(rules: list[str], ids: list[str] | None, option: str = "--strategies"):
    """The strategies a command runs: ``rules`` directories loaded (and registered, so that
    their ids resolve everywhere, ``load_strategies``), narrowed to ``ids`` when given. None
    when neither is given: the built-in strategies. An unknown id is an :class:`InputError`
    naming ``option``."""
    from .egraph.strategy import UnknownStrategy, load_strategies, strategy_by_id
    loaded = load_strategies(*rules) if rules else None
    if ids is None:
        return loaded
    if not ids:
        raise InputError(f"{option}: no strategy id given")
    try:
        return [strategy_by_id(sid) for sid in ids]
    except UnknownStrategy as err:
        raise InputError(f"{option}: {err}") from None


def id_list(text: str | None) -> list[str] | None:
    """A comma-separated ``--strategies`` value as ids (None when the option is absent)."""
    return None if text is None else [s.strip() for s in text.split(",") if s.strip()]


# ---------------------------------------------------------------- timing threads

def add_threads_option(parser) -> None:
    """``--threads N``, the one way every command that times chooses how many threads TVM's
    runtime pool runs ``P`` loops on (``lower/threads.py``; default: ``LEIR_NUM_THREADS``, else
    ``TVM_NUM_THREADS``, else the CPUs this process may use). ``run_command`` applies it
    (``threads.use``) before the handler runs, so every worker the command starts inherits it;
    every timing records the count it ran on."""
    parser.add_argument("--threads", type=positive_int, metavar="N",
                        help="threads TVM runs parallel (P) loops on while timing (default: "
                             "LEIR_NUM_THREADS, else TVM_NUM_THREADS, else the CPUs this "
                             "process may use); recorded with every timing")


# ---------------------------------------------------------------- running a command

def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="leir", description="LEIR tensor programs: format, lower, verify, translate, rewrite.",
        epilog="exit status: 0 ok, 1 not equivalent (verify) or a failing rule check, "
               "2 bad input, 3 internal error",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        importlib.import_module(module).register(sub)
    return parser


def one_line(text: str, limit: int = 600) -> str:
    """``text`` on one line: its non-empty lines joined by ' | ', clipped to ``limit``."""
    line = " | ".join(part.strip() for part in str(text).splitlines() if part.strip())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _input_error_types() -> tuple[type, ...]:
    found: list[type] = [InputError]
    for module, name in INPUT_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            found.append(cls)
    return tuple(found)


def _provider_failure(err: Exception):
    """``err`` located in the fact provider whose code raised it (None when none did, or when no
    provider was ever loaded)."""
    vocabulary = sys.modules.get("leir_egraph.egraph.vocabulary")
    return vocabulary.provider_failure(err) if vocabulary is not None else None


def _on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise Terminated()


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen handler with the error policy of the module docstring.
    Returns the exit status (never raises, except with LEIR_DEBUG=1 for internal errors)."""
    from .leir.limits import allow_deep_programs

    recursion_limit = sys.getrecursionlimit()
    allow_deep_programs()
    previous = None
    if hasattr(signal, "SIGTERM") and _main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    name = parser.prog
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as done:  # --help, or a one-line usage error
            return done.code if isinstance(done.code, int) else EXIT_BAD_INPUT
        handler = getattr(args, "handler", None)
        if handler is None:
            print(f"{parser.prog}: error: a command is required (see {parser.prog} --help)",
                  file=sys.stderr)
            return EXIT_BAD_INPUT
        name = f"{parser.prog} {args.command}" if getattr(args, "command", None) else name
        if getattr(args, "threads", None) is not None:   # add_threads_option
            from .lower.threads import use
            use(args.threads)
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print(f"{name}: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except BrokenPipeError:  # `leir steps ... | head`: the reader is gone, nothing to report
        _silence_stdout()
        return EXIT_OK
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else EXIT_BAD_INPUT
    except Exception as err:  # noqa: BLE001 -- the policy: one line, never a traceback
        if isinstance(err, _input_error_types()):
            print(one_line(err), file=sys.stderr)
            return EXIT_BAD_INPUT
        located = _provider_failure(err)
        if located is not None:   # a user's fact provider raised: its file and line
            print(one_line(located), file=sys.stderr)
            return EXIT_BAD_INPUT
        if isinstance(err, RecursionError):
            print(f"{name}: the program is nested too deeply to process (docs/LEIR.md, "
                  "section Limits)", file=sys.stderr)
            return EXIT_BAD_INPUT
        if isinstance(err, MemoryError):
            print(f"{name}: out of memory", file=sys.stderr)
            return EXIT_BAD_INPUT
        if os.environ.get("LEIR_DEBUG"):
            raise
        print(one_line(f"{name}: internal error: {type(err).__name__}: {err} (a bug in "
                       "leir-egraph; LEIR_DEBUG=1 shows the traceback)"), file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        sys.setrecursionlimit(recursion_limit)  # the caller's (when run in-process)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    # ``python -m leir_egraph.cli`` runs this file as __main__; the subcommands import
    # leir_egraph.cli, a second copy whose InputError is the one they raise: run that copy.
    from leir_egraph.cli import main as _main
    sys.exit(_main())
