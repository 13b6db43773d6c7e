"""Single-step evaluation of a model (the paper's Table 2 and Figure 5; docs/SEARCH.md §4).

Cases are the chat JSONL the sampler writes (``chat/single.jsonl``: the user message is the
single-answer prompt, from which the program and its known tensors are read back) or a
corpus JSONL of programs (``leir``, ``signature``, ``name``), whose prompt is built with the
same wording. Answers come from a served model (``ChatClient``, ``k`` samples per case) or
from a JSONL of recorded answers (one line per case, ``{"answers": [...]}`` or
``{"answer": "..."}``, in case order).

Per answer, the paper's four levels, each implying the ones before:

* **Different**: the answer parses to LEIR that prints differently from the original;
* **Build**: it validates against the original's signature and compiles (TVM llvm);
* **Execute**: it runs;
* **Equal**: its outputs equal the original's on ``trials`` (3) random input sets.

``pass@k`` (per case, the unbiased estimator ``1 - C(n-c, k) / C(n, k)`` over its ``n``
answers of which ``c`` are Equal), and **strategy attribution**, which the paper could not
check: an Equal answer is attributed when it is among our engine's single steps of the
strategy it claims, up to renaming (``leir.canonical``). The claimed strategies of Equal
answers are tallied by category and difficulty class (the paper's Figure 5).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..dataset.chat import single_prompt
from ..leir.analysis import writes
from ..leir.canonical import canonical_text
from ..leir.parser import LeirSyntaxError, parse
from ..leir.program import Program
from ..leir.signature import Signature
from ..search.answers import AnswerError, jsonl_rows, parse_answer

LEVELS = ("different", "build", "execute", "equal")


class CaseError(ValueError):
    """A case file line that is not a usable test case (the message names file:line)."""


@dataclass(frozen=True)
class Case:
    number: int
    program: Program          # the original, in LEIR (for a TIR case: its record's)
    prompt: str
    group: tuple[tuple[str, str], ...] = ()   # (("split", "test"), ("variant", "full"))
    original_tir: str | None = None   # a TIR case's original as its prompt shows it


@dataclass
class Scored:
    case: int
    answer: int
    level: str                 # "none" or one of LEVELS
    reason: str | None
    strategy: str = ""
    attributed: bool | None = None
    representation: str = "leir"   # "tir": a TIR answer (not attributed)

    def passed(self, level: str) -> bool:
        return self.level != "none" and LEVELS.index(self.level) >= LEVELS.index(level)


@dataclass
class Report:
    answers: list[Scored]
    cases: int
    k: int
    rates: dict[str, float] = field(default_factory=dict)
    pass_at: dict[int, float] = field(default_factory=dict)
    attribution: dict[str, Any] = field(default_factory=dict)
    categories: dict[str, int] = field(default_factory=dict)
    classes: dict[str, int] = field(default_factory=dict)
    groups: dict[str, "Report"] = field(default_factory=dict)   # per split / variant

    def to_dict(self) -> dict[str, Any]:
        return {"cases": self.cases, "answers": len(self.answers), "k": self.k,
                "groups": {g: {"cases": r.cases, "answers": len(r.answers), "rates": r.rates,
                               "pass_at": {str(k): v for k, v in r.pass_at.items()}}
                           for g, r in self.groups.items()},
                "rates": self.rates, "pass_at": {str(k): v for k, v in self.pass_at.items()},
                "attribution": self.attribution, "categories": self.categories,
                "classes": self.classes,
                "scored": [dict(s.__dict__) for s in self.answers]}

    def table(self) -> str:
        lines = ["| level | pass rate |", "|---|---|"]
        lines += [f"| {lvl} | {self.rates[lvl]:.1%} |" for lvl in LEVELS]
        lines += ["", "| k | pass@k (Equal) |", "|---|---|"]
        lines += [f"| {k} | {v:.1%} |" for k, v in self.pass_at.items()]
        a = self.attribution
        lines += ["", f"strategy attribution: {a.get('attributed', 0)} of {a.get('equal', 0)} "
                      f"Equal answers are a single step of the strategy they claim "
                      f"({a.get('unknown', 0)} claim no known strategy"
                      + (f", {a['tir']} in TIR are not checked" if a.get("tir") else "") + ")"]
        if self.categories:
            lines.append("categories: " + ", ".join(f"{k} {v}" for k, v in
                                                     sorted(self.categories.items())))
            lines.append("classes: " + ", ".join(f"{k} {v}" for k, v in
                                                  sorted(self.classes.items())))
        if self.groups:
            ks = list(range(1, self.k + 1))
            lines += ["", "| group | cases | " + " | ".join(LEVELS) + " | " +
                      " | ".join(f"pass@{k}" for k in ks) + " |",
                      "|---|---|" + "---|" * (len(LEVELS) + len(ks))]
            for name, r in self.groups.items():
                lines.append(f"| {name} | {r.cases} | " +
                             " | ".join(f"{r.rates[lvl]:.1%}" for lvl in LEVELS) + " | " +
                             " | ".join(f"{r.pass_at.get(k, 0.0):.1%}" for k in ks) + " |")
        return "\n".join(lines)


# ---------------------------------------------------------------- cases

_PROMPT = re.compile(r"Give the following IR of (?P<name>.*?): '(?P<ir>[^']*)', where the known "
                     r"variables are (?P<known>.*?)\. Do not change", re.S)
_KNOWN = re.compile(r"'(?P<n>[A-Za-z][A-Za-z0-9]*)' with the dtype torch\.(?P<d>\w+) and shape "
                    r"\[(?P<s>[0-9, ]*)\]")


def program_from_prompt(prompt: str) -> Program:
    """The original program of a single-answer prompt: its IR and known tensors; the known
    tensors it writes are the outputs, the others inputs."""
    m = _PROMPT.search(prompt)
    if not m:
        raise CaseError("the prompt is not a Step-TP single-answer prompt")
    leir = parse(m.group("ir"))
    written = writes(leir)
    inputs, outputs = [], []
    for t in _KNOWN.finditer(m.group("known")):
        spec = {"name": t.group("n"), "dtype": t.group("d"),
                "shape": [int(x) for x in t.group("s").split(",") if x.strip()]}
        (outputs if spec["name"] in written else inputs).append(spec)
    if not outputs:
        raise CaseError("no known tensor of the prompt is written by the program")
    return Program(leir, Signature.from_dict({"inputs": inputs, "outputs": outputs}),
                   m.group("name"))


def _sidecar(path: str | Path) -> list[dict[str, Any]]:
    """The sampler's ``NAME.meta.jsonl`` beside a chat file ``NAME.jsonl`` (empty if none)."""
    from ..outside import OutsideInputError, jsonl_objects
    meta = Path(path).with_suffix(".meta.jsonl")
    if Path(path).suffix != ".jsonl" or not meta.is_file():
        return []
    try:
        return [row for _, row in jsonl_objects(meta)]
    except OutsideInputError as err:
        raise CaseError(str(err)) from None


def _group(row: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(row[k])) for k in ("split", "variant") if row.get(k))


def load_cases(path: str | Path, limit: int | None = None, start: int = 0) -> list[Case]:
    """Cases from a chat JSONL (``messages``) or a program JSONL (``leir`` + ``signature``),
    numbered from ``start``, read through the bounded outside-input path. A case's split and
    variant come from the row (the sampler's ``cases/<split>.jsonl``) or from the chat file's
    ``.meta.jsonl`` beside it. A chat case in TIR (the ``tir`` variant) takes its LEIR
    original from the run's dictionary record its meta line names (``run_records``)."""
    from ..outside import OutsideInputError, jsonl_objects
    cases: list[Case] = []
    meta = _sidecar(path)
    rows = jsonl_objects(path)
    records: dict[str, dict[str, Any]] | None = None   # read at the first TIR case
    while limit is None or len(cases) < limit:
        try:
            n, row = next(rows)
        except StopIteration:
            break
        except OutsideInputError as err:
            raise CaseError(str(err)) from None
        tir = None
        try:
            if "messages" in row:
                prompt = next(m["content"] for m in row["messages"] if m["role"] == "user")
                where = meta[len(cases)] if len(cases) < len(meta) else {}
                if "@T.prim_func" in prompt:
                    records = records if records is not None else run_records(path)
                    program, tir = tir_original(prompt, where, records)
                else:
                    program = program_from_prompt(prompt)
            else:
                program = Program.parse(row["leir"], row["signature"], row.get("name", ""))
                prompt = single_prompt(program.name or "the program", program.text,
                                       program.signature)
                where = row
        except (KeyError, TypeError, StopIteration, CaseError, LeirSyntaxError,
                ValueError) as err:
            raise CaseError(f"{path}:{n}: {type(err).__name__}: {err}") from None
        cases.append(Case(start + len(cases), program, prompt, _group(where), tir))
    return cases


def run_records(path: str | Path) -> dict[str, dict[str, Any]]:
    """The dictionary records (by id) of the sampler run a chat file belongs to: the
    ``dictionary/part-*.jsonl`` of the nearest folder above it that has one (a TIR case's
    original LEIR program is read from its record)."""
    from ..outside import OutsideInputError, jsonl_objects
    for folder in list(Path(path).resolve().parents)[:5]:
        parts = sorted((folder / "dictionary").glob("part-*.jsonl"))
        if parts:
            keep = ("before_leir", "before_tir", "signature", "program")
            try:
                return {row["id"]: {k: row.get(k) for k in keep}
                        for part in parts for _, row in jsonl_objects(part) if "id" in row}
            except OutsideInputError as err:
                raise CaseError(str(err)) from None
    raise CaseError("a TIR case's original is read from the dictionary/ of its sampler run, "
                    "and no folder above the file has one")


def tir_original(prompt: str, where: dict[str, Any], records: dict[str, dict[str, Any]]
                 ) -> tuple[Program, str]:
    """The LEIR original and the TIR text of a TIR prompt, from the record its ``.meta.jsonl``
    line names (``ids``); the record's ``before_tir`` must be the prompt's."""
    ids = where.get("ids") or []
    if not ids:
        raise CaseError("a TIR prompt without its .meta.jsonl line (the record ids)")
    record = records.get(ids[0])
    if record is None:
        raise CaseError(f"record {ids[0]} is not in the run's dictionary")
    if not record.get("before_tir") or f"'{record['before_tir']}'" not in prompt:
        raise CaseError(f"the prompt's TIR is not the original TIR of record {ids[0]}")
    signature = record["signature"]   # the records' JSON text
    signature = Signature.from_json(signature) if isinstance(signature, str) else signature
    program = Program.parse(record["before_leir"], signature, record["program"])
    return program, record["before_tir"]


def load_answers(path: str | Path, n_cases: int | None = None, *,
                 limited: bool = False) -> list[list[str]]:
    """Recorded answers, one line per case: ``{"answers": [...]}`` or ``{"answer": "..."}``,
    each optionally with ``"case": N`` (the case's number, 0-based, as in the report).

    With ``case`` numbers on every line the answers go to the cases they name (a case named
    twice, or no line for a case, is an error); without them, line ``i`` answers case ``i``.
    Given ``n_cases``, answers for cases beyond them are an error unless ``limited`` (the
    cases were cut with ``--limit``): nothing is scored against the wrong case, nothing is
    dropped without a word."""
    from ..outside import OutsideInputError
    rows: list[tuple[int, int | None, list[str]]] = []
    try:
        for n, row in jsonl_rows(path):
            answers = row.get("answers", [row.get("answer")] if "answer" in row else None)
            if not isinstance(answers, list):
                raise CaseError(f"{path}:{n}: expected 'answers' (a list) or 'answer'")
            case = row.get("case")
            if case is not None and (type(case) is not int or case < 0):
                raise CaseError(f"{path}:{n}: 'case' must be a case number >= 0, got {case!r}")
            rows.append((n, case, [a if isinstance(a, str) else "" for a in answers]))
    except OutsideInputError as err:
        raise CaseError(str(err)) from None
    numbered = [r for r in rows if r[1] is not None]
    if numbered and len(numbered) != len(rows):
        line = next(n for n, case, _ in rows if case is None)
        raise CaseError(f"{path}:{line}: no 'case' number, while other lines have one (give "
                        "it on every line or on none)")
    if numbered:
        by_case: dict[int, list[str]] = {}
        for n, case, answers in rows:
            if case in by_case:
                raise CaseError(f"{path}:{n}: a second answer line for case {case}")
            if n_cases is not None and case >= n_cases and not limited:
                raise CaseError(f"{path}:{n}: case {case} does not exist ({n_cases} cases)")
            by_case[case] = answers
        total = n_cases if n_cases is not None else max(by_case) + 1
        missing = [c for c in range(total) if c not in by_case]
        if missing:
            raise CaseError(f"{path}: no answer line for case {missing[0]} ({len(missing)} "
                            "case(s) without one)")
        return [by_case[c] for c in range(total)]
    out = [answers for _, _, answers in rows]
    if n_cases is not None and len(out) > n_cases and not limited:
        raise CaseError(f"{path}: {len(out)} answer lines for {n_cases} cases; line "
                        f"{rows[n_cases][0]} and after answer no case (number lines with "
                        "'case', or pass --limit to score the first cases only)")
    return out


def ask_model(cases: list[Case], client, k: int = 1) -> list[list[str]]:
    """``k`` answers per case from a served model (failures become empty answers)."""
    from ..search.llm import ChatError
    out = []
    for case in cases:
        try:
            out.append(client.complete(case.prompt, n=k))
        except ChatError as err:
            out.append([f"<error>{err}</error>"] * k)
    return out


# ---------------------------------------------------------------- scoring

def _level(case: Case, answer: str, verifier, trials: int, seed: int, timeout: float
           ) -> tuple[str, str | None, str, Program | None]:
    """The level one answer reaches: its text read (size-capped) and, for a LEIR answer,
    parsed and checked against the signature within ``timeout`` seconds; verified in the
    worker within ``timeout`` (a TIR answer is parsed there too)."""
    from ..outside import OutsideInputError, bounded
    overrun = f"parsing took over {timeout:g} s (--timeout)"
    try:
        ir, strategy = bounded(lambda: parse_answer(answer)[0], timeout, overrun)
    except AnswerError as err:
        return "none", f"unparsable answer: {err}", "", None
    except OutsideInputError as err:
        raise _OverTime(str(err)) from None
    if case.original_tir is not None:
        r = verifier.verify_tir(case.program, ir, case.original_tir, trials=trials,
                                timeout=timeout, seed=seed)
        return _LEVEL_NAMES.get(r.level, "different"), r.reason, strategy, None
    try:
        after = bounded(lambda: Program(parse(ir), case.program.signature, case.program.name,
                                        case.program.values), timeout, overrun)
    except LeirSyntaxError as err:
        return "none", f"not LEIR: {err}", strategy, None
    except OutsideInputError as err:
        raise _OverTime(str(err)) from None
    except (RecursionError, MemoryError) as err:
        return "none", f"not usable LEIR: {type(err).__name__}", strategy, None
    if after.text == case.program.text:
        return "none", "same as the original", strategy, None
    r = verifier.verify(case.program, after, trials=trials, seed=seed, timing=False,
                        timeout=timeout)
    return _LEVEL_NAMES.get(r.level, "different"), r.reason, strategy, after


# verification levels -> the paper's (a LEIR answer's Independent is Equal here)
_LEVEL_NAMES = {"none": "none", "diff": "different", "build": "build", "exec": "execute",
                "equal": "equal", "independent": "equal"}


class _OverTime(Exception):
    """An answer whose reading took over the per-answer time bound (scored none)."""


def _attributed(case: Case, after: Program, strategy: str, known: dict) -> bool | None:
    """Whether ``after`` is one of the engine's single steps of ``strategy`` (None: unknown
    strategy name)."""
    from ..egraph import single_steps
    sid = strategy.strip().replace(" ", "_")
    if sid not in known:
        return None
    key = canonical_text(after)
    return any(canonical_text(t.after) == key for t in single_steps(case.program, known[sid]))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from ``n`` samples with ``c`` correct."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def evaluate(cases: list[Case], answers: list[list[str]], *, trials: int = 3, seed: int = 0,
             verifier=None, attribution: bool = True, strategies=None, timeout: float = 60.0,
             warn=None) -> Report:
    """Score ``answers[i]`` (the answers to ``cases[i]``). An answer is attributed to the
    strategy it names among ``strategies`` (Strategy objects; None: the built-in ones, pass
    ``load_strategies(dir)`` to include yours); a name outside them counts as unknown, and a
    TIR answer is not attributed (it counts as unknown: the engine's steps are LEIR).
    ``timeout`` bounds each answer's parsing and its verification; an answer over it is
    scored none and ``warn`` (a callable taking one line) is told, the batch going on."""
    from ..egraph.steps import default_strategies
    from ..verify import Verifier
    if len(answers) < len(cases):
        raise CaseError(f"{len(cases)} cases but answers for only {len(answers)}")
    known = {s.id: s for s in (default_strategies() if strategies is None else strategies)}
    own = verifier is None
    verifier = verifier or Verifier()
    scored: list[Scored] = []
    try:
        for case, group in zip(cases, answers):
            for j, answer in enumerate(group):
                try:
                    level, reason, strategy, after = _level(case, answer, verifier, trials,
                                                            seed, timeout)
                except _OverTime as err:
                    level, reason, strategy, after = "none", str(err), "", None
                    if warn is not None:
                        warn(f"case {case.number} answer {j}: {err}; scored none")
                s = Scored(case.number, j, level, reason, strategy,
                           representation="leir" if case.original_tir is None else "tir")
                if attribution and level == "equal" and after is not None:
                    s.attributed = _attributed(case, after, strategy, known)
                scored.append(s)
    finally:
        if own:
            verifier.close()
    k = max((len(g) for g in answers[:len(cases)]), default=0)
    report = summarize(scored, len(cases), k, known)
    report.groups = grouped(cases, scored, k, known)
    return report


def grouped(cases: list[Case], scored: list[Scored], k: int, known: dict) -> dict[str, Report]:
    """The report per split and variant of the cases (none when no case names one)."""
    names: dict[int, str] = {c.number: " ".join(f"{a}={b}" for a, b in c.group) for c in cases
                             if c.group}
    out: dict[str, Report] = {}
    for name in sorted(set(names.values())):
        members = [c for c in cases if names.get(c.number) == name]
        numbers = {c.number for c in members}
        out[name] = summarize([s for s in scored if s.case in numbers], len(members), k, known)
    return out


def summarize(scored: list[Scored], n_cases: int, k: int, known: dict) -> Report:
    total = max(len(scored), 1)
    rates = {lvl: sum(s.passed(lvl) for s in scored) / total for lvl in LEVELS}
    by_case: dict[int, list[Scored]] = {}
    for s in scored:
        by_case.setdefault(s.case, []).append(s)
    pass_at = {}
    for kk in range(1, k + 1):
        vals = [pass_at_k(len(g), sum(x.passed("equal") for x in g), kk)
                for g in by_case.values() if len(g) >= kk]
        pass_at[kk] = sum(vals) / len(vals) if vals else 0.0
    equal = [s for s in scored if s.passed("equal")]
    tir = sum(s.representation == "tir" for s in equal)
    attribution = {"equal": len(equal), "attributed": sum(bool(s.attributed) for s in equal),
                   "unknown": sum(s.attributed is None for s in equal) - tir,
                   "tir": tir}
    categories: Counter = Counter()
    classes: Counter = Counter()
    for s in equal:
        strat = known.get(s.strategy.strip().replace(" ", "_"))
        categories[strat.category if strat else "unknown"] += 1
        classes[strat.difficulty if strat else "unknown"] += 1
    return Report(scored, n_cases, k, rates, pass_at, attribution, dict(categories),
                  dict(classes))


__all__ = ["Case", "CaseError", "Report", "Scored", "evaluate", "load_cases", "load_answers",
           "run_records", "tir_original",
           "ask_model", "program_from_prompt", "pass_at_k", "LEVELS"]
