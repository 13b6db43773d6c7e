"""Held-out splits: whole program kinds to train / validation / test, and a leakage check.

**Assignment.** The unit is the program's *kind* -- its ``name``: the zoo kind, the file stem,
the corpus line's name -- so every instance, dtype and shape draw of a kind lands in one split.
A kind's split is a function of the kind's name and the seed only (``sha256(seed|name)`` read as
a number in [0, 1), cut at the cumulative fractions), never of its position in a list: adding
kinds to the zoo moves no existing kind to another split.

**The Step-TP multi-step workloads** (``workloads/steptp.py``: the paper's 100 held-out test
programs, which map to zoo kinds) are kept out of training by default: their kinds form a
fourth split, ``steptp``, which is neither trained on nor part of the single-step test set, as
the paper holds them out for multi-step search (``hold_steptp=False`` lets them be drawn like
any other kind).

**Kinds that are one program.** Some kinds are the same program up to shape (the zoo's
square, standard and tall-skinny matrix multiplications; MQA and GQA variants): by name they
may land in two splits, and the leakage check then refuses the run. ``merge`` (the sampler's
``--merge-equal-kinds``) makes such kinds one unit (``kind_splits``).

**Leakage check.** Two programs leak when their *shape-free form* is the same: the canonical
form up to renaming of intermediates and loop indices (``leir/canonical.py``) with every loop
extent, every integer constant of a subscript, every number literal and every dtype replaced by
a placeholder -- so a renamed, reshaped or retyped copy of a test program (a mean's ``/256``
is a reshaped ``/128``) is found whatever its kind is called. ``check_leaks`` raises
:class:`SplitLeakError` when one form occurs in two splits, naming the programs; the sampler
refuses to write the chat sets of such a run (its shards stay in the folder, for inspection).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from functools import lru_cache
from typing import Any, Iterable

SPLITS = ("train", "validation", "test")
STEPTP = "steptp"
ALL_SPLITS = (*SPLITS, STEPTP)
DEFAULT_FRACTIONS = (0.8, 0.1, 0.1)


class SplitLeakError(ValueError):
    """The same program (up to renaming, extents, constants and dtypes) in two splits."""


def parse_fractions(text: str) -> tuple[float, float, float]:
    """``"0.8,0.1,0.1"`` (or percentages ``"80,10,10"``) as three fractions summing to 1."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 3 or any(not v >= 0 for v in values) or not sum(values) > 0:
        raise ValueError(f"expected TRAIN,VALIDATION,TEST as three non-negative numbers, got "
                         f"{text!r}")
    total = sum(values)
    return tuple(v / total for v in values)  # type: ignore[return-value]


def unit_interval(seed: int, name: str) -> float:
    """``name``'s position in [0, 1) for ``seed``: the first 8 bytes of sha256(seed|name)."""
    digest = hashlib.sha256(f"{seed}|{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


@lru_cache(maxsize=None)
def steptp_kinds() -> frozenset[str]:
    """The zoo kinds of the paper's 100 multi-step test workloads (empty when the list is not
    installed: then nothing can be held out, and ``assign`` says so in its result)."""
    from ..workloads import steptp
    try:
        entries = steptp.load()
    except OSError:
        return frozenset()
    kinds = set()
    for entry in entries:
        m = steptp.mapping(entry)
        if isinstance(m, steptp.Mapping):
            kinds.add(m.kind)
    return frozenset(kinds)


def split_of(name: str, seed: int, fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
             hold_steptp: bool = True) -> str:
    """The split of the kind ``name``."""
    if hold_steptp and name in steptp_kinds():
        return STEPTP
    x, edge = unit_interval(seed, name), 0.0
    for split, share in zip(SPLITS, fractions):
        edge += share
        if x < edge:
            return split
    return next(s for s, f in zip(reversed(SPLITS), reversed(fractions)) if f > 0)


def assign(names: Iterable[str], seed: int, fractions: tuple[float, float, float],
           hold_steptp: bool = True) -> dict[str, str]:
    """Kind name -> split, for every distinct name."""
    return {n: split_of(n, seed, fractions, hold_steptp) for n in sorted(set(names))}


def equal_kinds(programs: Iterable[dict[str, Any]]) -> list[list[str]]:
    """The kinds of ``programs`` (summaries with ``program`` and ``leir``) grouped so that two
    kinds with a program of one shape-free form are in one group (transitively); each group
    sorted, the groups by their first name."""
    parent: dict[str, str] = {}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n
    first: dict[str, str] = {}
    for p in programs:
        parent.setdefault(p["program"], p["program"])
        if not p.get("leir"):
            continue
        a = root(first.setdefault(shape_free_form(p["leir"]), p["program"]))
        b = root(p["program"])
        parent[max(a, b)] = min(a, b)
    groups: dict[str, list[str]] = {}
    for n in sorted(parent):
        groups.setdefault(root(n), []).append(n)
    return [groups[r] for r in sorted(groups)]


def kind_splits(programs: list[dict[str, Any]], seed: int,
                fractions: tuple[float, float, float], hold_steptp: bool = True,
                merge: bool = False) -> dict[str, str]:
    """Kind name -> split for the kinds of ``programs``. With ``merge`` the unit is a group of
    ``equal_kinds``: held out when one of its kinds is a multi-step workload's, else the split
    of its first name (so a group's kinds can never leak into each other; a kind moves only
    when a kind of its form with a smaller name joins the run)."""
    if not merge:
        return assign((p["program"] for p in programs), seed, fractions, hold_steptp)
    out = {}
    for group in equal_kinds(programs):
        held = hold_steptp and any(k in steptp_kinds() for k in group)
        split = STEPTP if held else split_of(group[0], seed, fractions, hold_steptp=False)
        out.update({k: split for k in group})
    return out


# ---------------------------------------------------------------- the leakage check

@lru_cache(maxsize=1024)
def shape_free_form(leir_text: str) -> str:
    """The canonical text of a program with every tensor (known ones too) and loop index
    renamed in order of appearance, and loop extents, subscript constants, number literals and
    dtypes replaced by placeholders (module docstring)."""
    from ..leir.ast import IConst, Loop, Num, Var
    from ..leir.canonical import canonical_leir
    from ..leir.parser import parse
    from ..leir.printer import to_text
    from ..leir.traverse import rebuild

    def blank(node):
        if isinstance(node, Loop):
            return replace(node, extent=1)
        if isinstance(node, IConst):
            return IConst(0)
        if isinstance(node, Num):
            return Num("0")
        if isinstance(node, Var):
            return replace(node, dtype="f32")
        return None
    return to_text(rebuild(canonical_leir(parse(leir_text), ()), blank))


def checked_splits(programs: list[dict[str, Any]], config) -> dict[str, str]:
    """Kind name -> split for the run's program summaries (``program_id``, ``program``,
    ``leir``) under ``config``'s split options, after ``check_leaks`` found no leak (raises
    :class:`SplitLeakError`). Runs before the expensive work, so that a leak is refused
    before anything is enumerated, verified or searched."""
    split = kind_splits(programs, config.seed, config.split, config.hold_steptp,
                        config.merge_equal_kinds)
    check_leaks(programs, split)
    return split


def check_leaks(programs: Iterable[dict[str, Any]], split: dict[str, str]) -> dict[str, int]:
    """Refuse a leak: ``programs`` are the run's program summaries (``program_id``,
    ``program``, ``leir``), ``split`` maps a kind name to its split. Returns the number of
    distinct shape-free forms per split; raises :class:`SplitLeakError` naming the first
    programs whose form occurs in two splits."""
    first: dict[str, tuple[str, str]] = {}   # form -> (split, program_id)
    forms: dict[str, set[str]] = {}
    leaks: list[str] = []
    for p in programs:
        if not p.get("leir"):
            continue   # a program that never became LEIR has no data in any split
        where = split[p["program"]]
        form = shape_free_form(p["leir"])
        forms.setdefault(where, set()).add(form)
        seen = first.setdefault(form, (where, p["program_id"]))
        if seen[0] != where:
            leaks.append(f"{p['program_id']} ({where}) is {seen[1]} ({seen[0]}) up to renaming, "
                         "extents, constants and dtypes")
    if leaks:
        more = f" (and {len(leaks) - 1} more)" if len(leaks) > 1 else ""
        raise SplitLeakError(f"split leak: {leaks[0]}{more}; drop one of the two from the "
                             "programs, or choose a --seed that puts both kinds in one split")
    return {s: len(forms.get(s, ())) for s in ALL_SPLITS if s in forms}


# ---------------------------------------------------------------- what the sampler writes

def _dtypes(signature: dict[str, Any]) -> tuple[str, str]:
    """(float dtypes, integer/bool dtypes) of a signature's tensors, each joined by '+'."""
    seen = [t["dtype"] for t in signature["inputs"] + signature["outputs"]]
    floats = sorted({d for d in seen if d.startswith(("float", "bfloat"))})
    others = sorted({d for d in seen if not d.startswith(("float", "bfloat"))})
    return "+".join(floats) or "-", "+".join(others)


def _shapes(signature: dict[str, Any]) -> str:
    return ";".join(f"{t['name']}{list(t['shape'])}"
                    for t in signature["inputs"] + signature["outputs"])


def test_case(program: dict[str, Any], split: str) -> dict[str, Any]:
    """One line of ``cases/<split>.jsonl``: an original program (a case of ``leir eval``)."""
    floats, ints = _dtypes(program["signature"])
    return {"program_id": program["program_id"], "name": program["program"], "split": split,
            "leir": program["leir"], "signature": program["signature"], "dtypes": floats,
            "integer_tensors": ints}


def split_file(programs: list[dict[str, Any]], split_of: dict[str, str],
               forms: dict[str, int], config) -> dict[str, Any]:
    """``splits.json``: how the split was made and where every kind went."""
    kinds: dict[str, str] = {}
    for p in programs:
        kinds[p["program"]] = split_of[p["program_id"]]
    merged = [g for g in equal_kinds(programs) if len(g) > 1] if config.merge_equal_kinds else []
    return {"seed": config.seed, "fractions": dict(zip(SPLITS, config.split)),
            "hold_steptp": config.hold_steptp, "steptp_kinds": len(steptp_kinds()),
            "merge_equal_kinds": config.merge_equal_kinds, "merged": merged,
            "shape_free_forms": forms, "kinds": dict(sorted(kinds.items()))}


def split_table(programs: list[dict[str, Any]], split_of: dict[str, str],
                verified: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per split and float dtype: kinds, programs (test cases), programs with integer inputs,
    distinct shapes, and verified transitions."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    n_verified: dict[str, int] = {}
    for r in verified:
        n_verified[r["program_id"]] = n_verified.get(r["program_id"], 0) + 1
    for p in programs:
        if p["status"] != "ok":
            continue
        split = split_of[p["program_id"]]
        floats, ints = _dtypes(p["signature"])
        row = rows.setdefault((split, floats), {"split": split, "dtypes": floats, "kinds": set(),
                                                "programs": 0, "integer_tensors": 0,
                                                "shapes": set(), "verified": 0})
        row["kinds"].add(p["program"])
        row["programs"] += 1
        row["integer_tensors"] += bool(ints)
        row["shapes"].add((p["program"], _shapes(p["signature"])))
        row["verified"] += n_verified.get(p["program_id"], 0)
    out = []
    for key in sorted(rows, key=lambda k: (ALL_SPLITS.index(k[0]), k[1])):
        row = rows[key]
        out.append({**row, "kinds": len(row["kinds"]), "shapes": len(row["shapes"])})
    return out


def chat_count(variant, split: str | None, records: list[dict[str, Any]], single: list,
               multi: list) -> dict[str, Any]:
    """The size of one chat set and its difficulty classes (occurrences: single-answer
    examples plus the answers of multi-answer examples)."""
    classes: dict[str, int] = {}
    for r in list(single) + [a for e in multi for a in e.answers]:
        classes[r["difficulty"]] = classes.get(r["difficulty"], 0) + 1
    return {"variant": variant.name or "-", "describe": variant.describe(), "split": split or "-",
            "verified": len(records), "single": len(single), "multi": len(multi),
            "classes": {c: classes.get(c, 0) for c in ("difficult", "medium", "easy")}}
