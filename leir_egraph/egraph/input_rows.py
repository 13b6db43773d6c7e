"""Facts and terms loaded as rows (docs/EXPLORE.md, "Loading facts"): each relation's rows
written to a tab-separated file and read by one egglog ``input`` into a twin table, then
copied into the relation by one rule; each term named by a reference ``(<Sort>Ref__ k)``
defined by a row of its constructor's twin. The shared explorer (explore/shared.py) loads a
round's facts this way.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile

from .encoding import SORT_OF, Term, to_egglog
from .traversals import SCHEMA_FILE
from .vocabulary import Vocabulary

# In a database of many programs: (HeldSuffix__ suffix program), a suffix of that program.
HELD_SUFFIX = "HeldSuffix__"


class References:
    """Names for the terms an exploration sends, kept for all of it (the ``table`` of
    :func:`shared_terms`): a term is defined once as ``(<Sort>Ref__ k)``, by a row of its
    constructor's twin (:meth:`number`: every term of a program and of a loaded fact) or, in
    the text of a fact sent as a command, when its text is at least ``MIN_CHARS`` long, by
    ``(union (<Sort>Ref__ k) <its text>)``; it is named by that reference from then on, in every
    program that holds it -- a depth-2 program sends only the terms its parent did not have.
    Not a ``let``: each egglog ``let`` is a table of its own, and the cost of every later
    command grew with their number. A reference is ``:unextractable``: extraction, and the
    frozen reading of a round's rows (``Engine.read_table``), never return one."""

    MIN_CHARS = 24

    def __init__(self):
        self._text: dict[Term, str] = {}
        self._by_id: dict[int, tuple[Term, str]] = {}  # a term object seen before, unhashed
        self._number: dict[Term, int] = {}  # term -> its reference's number, where it has one
        self._rows: dict[str, list[tuple]] = {}  # constructor's twin -> rows (number())
        self._unions: list[str] = []
        self.count = 0  # references made

    @staticmethod
    def declarations() -> str:
        return "\n".join(f"(constructor {sort}Ref__ (i64) {sort} :unextractable)"
                         for sort in sorted(set(SORT_OF.values())))

    def text(self, term: Term) -> str:
        known = self._by_id.get(id(term))
        if known is not None and known[0] is term:
            return known[1]
        text = self._text.get(term)
        if text is None:
            text = ("(" + " ".join([term[0], *(to_egglog(a) for a in term[1:])]) + ")"
                    if len(term) > 1 else f"({term[0]})")
            if len(text) >= self.MIN_CHARS:
                text = self._union(term, text)
            self._text[term] = text
        self._by_id[id(term)] = (term, text)
        return text

    def number(self, term: Term) -> int:
        """The number ``k`` of ``term``'s reference ``(<Sort>Ref__ k)``, made now for it and
        each subterm that has none: defined by a row of its constructor's twin
        (:func:`load_schema`; the rows are taken with :meth:`take_rows`), or, where a string
        argument would not read back as written, by a union command (:meth:`take`)."""
        numbers = self._number
        stack = [term]
        while stack:
            t = stack[-1]
            if t in numbers:
                stack.pop()
                continue
            children = [a for a in t[1:] if type(a) is tuple and a not in numbers]
            if children:
                stack.extend(children)
                continue
            stack.pop()
            args = t[1:]
            if all(type(a) is not str or _PLAIN.fullmatch(a) for a in args):
                numbers[t] = k = self.count
                self.count += 1
                self._text[t] = f"({SORT_OF[t[0]]}Ref__ {k})"
                self._rows.setdefault(t[0] + TERM, []).append(
                    (k, *(numbers[a] if type(a) is tuple else a for a in args)))
            else:
                text = self.text(t)
                if t not in numbers:
                    self._union(t, text)
        return numbers[term]

    def row(self, sorts: tuple[str, ...], columns: tuple) -> list | None:
        """A fact's columns as a row of its relation's twin (``sorts``: the relation's column
        sorts): integers as they are, strings as they are, terms by their reference's number
        (:meth:`number`); None when a string would not read back as written (``_PLAIN``),
        and the fact must be sent as a command."""
        row = []
        for sort, value in zip(sorts, columns):
            if sort == "String":
                if not _PLAIN.fullmatch(value):
                    return None
                row.append(value)
            else:
                row.append(value if sort == "i64" else self.number(value))
        return row

    def take_rows(self) -> dict[str, list[tuple]]:
        """The terms' rows made since the last call (loaded before the facts' rows name them)."""
        out, self._rows = self._rows, {}
        return out

    def _union(self, term: Term, text: str) -> str:
        ref = f"({SORT_OF[term[0]]}Ref__ {self.count})"
        self._number[term] = self.count
        self.count += 1
        self._unions.append(f"(union {ref} {text})")
        return ref

    def take(self) -> list[str]:
        """The unions made since the last call (sent before any text naming them)."""
        out, self._unions = self._unions, []
        return out


# Facts are loaded as rows (docs/EXPLORE.md, "Loading facts"): egglog spends about 25 us on
# each command whatever it does, more than most facts cost it to insert, so a round's facts of
# a relation whose columns are all terms, strings and integers are written to a file, one
# tab-separated row each (a term as its reference's number), read by one ``input`` command
# into the relation's twin ``<name>__raw`` (integer and string columns), and copied into the
# relation by one rule each (the ``load_rows__`` ruleset, run once before the analysis).
LOAD_ROWS = "load_rows__"
RAW = "__raw"
TERM = "__term"
_TERM_SORTS = frozenset(SORT_OF.values())
# a string that ``input`` reads back as written (it splits at tabs and newlines and trims each
# field); any other is sent in its fact's command
_PLAIN = re.compile(r'[^\s"\\]([^\t\n\r"\\]*[^\s"\\])?')


def loaded_relations(vocab: Vocabulary, context: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """The relations of ``vocab`` whose facts are loaded as rows (every column a term, a
    string or an integer), with ``HeldSuffix__``: name -> the sorts of its columns in the
    database (a context relation's last, the context column, included)."""
    every = {r.name: r.sorts for _, r in vocab.relations.values()}
    every.update({r.name: r.sorts for r in vocab.parameters.values()})
    out = {name: sorts + (("i64",) if name in context else ()) for name, sorts in every.items()
           if sorts and all(s in _TERM_SORTS or s in ("String", "i64") for s in sorts)}
    out[HELD_SUFFIX] = ("Prog", "i64")
    return out


_CONSTRUCTOR = re.compile(r"^\(constructor (\w+) \(([^()]*)\) (\w+)\)", re.M)


def load_schema(relations: dict[str, tuple[str, ...]]) -> list[str]:
    """The ``load_rows__`` ruleset; each LEIR constructor's twin ``<name>__term`` (the term's
    reference number, then its arguments' numbers and literals) and the rule making the term
    and its reference one e-class; each loaded relation's twin and the rule copying its rows
    into it (a term column's number made the reference ``(<Sort>Ref__ k)`` it names)."""
    out = [f"(ruleset {LOAD_ROWS})"]
    for name, args, sort in _CONSTRUCTOR.findall(SCHEMA_FILE.read_text()):
        names, columns, raw = _row_columns(args.split())
        made = f"({' '.join([name, *columns])})"
        out += [f"(relation {name}{TERM} (i64 {' '.join(raw)}))",
                f"(rule (({name}{TERM} k {' '.join(names)})) ((union ({sort}Ref__ k) {made}))"
                f" :ruleset {LOAD_ROWS})"]
    for name, sorts in relations.items():
        names, columns, raw = _row_columns(sorts)
        out += [f"(relation {name}{RAW} ({' '.join(raw)}))",
                f"(rule (({name}{RAW} {' '.join(names)})) (({name} {' '.join(columns)}))"
                f" :ruleset {LOAD_ROWS})"]
    return out


def _row_columns(sorts) -> tuple[list[str], list[str], list[str]]:
    """For a twin row of columns of ``sorts``: its variables, the columns they make (a term
    column's number as the reference it names) and the twin's sorts (a term's number an i64)."""
    names = [f"v{i}" for i in range(len(sorts))]
    columns = [f"({s}Ref__ {v})" if s in _TERM_SORTS else v for s, v in zip(sorts, names)]
    return names, columns, ["i64" if s in _TERM_SORTS else s for s in sorts]


# Where the rows' files go: a memory-backed folder where the system has one with room to
# spare (writing and closing a dozen small files per program cost about 1 ms on this
# machine's disk-backed /tmp, a sixth of that on /dev/shm; a container's /dev/shm may be as
# small as 64 MiB, so at least MEMORY_FREE must be free), else the temporary folder. Each
# program's files replace the last one's, so a folder holds one program's rows at a time.
_MEMORY_FOLDER = "/dev/shm"
MEMORY_FREE = 1 << 30


def rows_folder(prefix: str) -> tempfile.TemporaryDirectory:
    """A new temporary folder for :func:`load_commands`' files, removed with the object.

    Its name holds the process id (``<prefix><pid>-<random>``). A process killed by a signal
    (an exploration's database process stopped at its time limit, a worker killed at its
    deadline) removes nothing, and in a memory-backed folder what it leaves takes memory; so
    each new folder first removes those of its prefix whose process no longer runs."""
    memory = None
    try:
        if os.access(_MEMORY_FOLDER, os.W_OK | os.X_OK):
            free = os.statvfs(_MEMORY_FOLDER)
            if free.f_bavail * free.f_frsize >= MEMORY_FREE:
                memory = _MEMORY_FOLDER
    except OSError:   # no such folder (not Linux) or not readable: the temporary folder
        pass
    parent = memory or tempfile.gettempdir()
    remove_orphans(parent, prefix)
    return tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-", dir=parent)


def remove_orphans(parent: str, prefix: str) -> list[str]:
    """Remove the folders ``<prefix><pid>-*`` in ``parent`` that this user owns and whose
    process ``pid`` no longer runs; their names."""
    removed = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(prefix):
            continue
        pid, dash, _ = name[len(prefix):].partition("-")
        if not (dash and pid.isdigit()) or _running(int(pid)):
            continue
        path = os.path.join(parent, name)
        try:
            if os.stat(path, follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(name)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:   # it runs (as another user)
        return True
    return True


def load_commands(rows: dict[str, list[tuple]], folder: str) -> list[str]:
    """The commands loading ``rows`` (twin relation -> its rows' columns, terms as reference
    numbers), their files written into ``folder``; then the copying rules run once."""
    out = []
    for name, table in rows.items():
        path = os.path.join(folder, f"{name}.tsv")
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join("\t".join(map(str, row)) + "\n" for row in table))
        out.append(f'(input {name} "{path}")')
    return out + [f"(run {LOAD_ROWS} 1)"]
