"""The worker half of a verification: parse and validate, build, run, compare, check
independence, time.

``evaluate(job, report)`` runs in the worker process (or in-process for debugging). It reports
progress through ``report`` as it goes -- the stage it is entering, each level passed and each
piece of evidence -- so that when the process crashes or is killed on a timeout, the parent
still knows how far ``after`` got.

A job is plain data (LEIR text, signature dict, numpy values), never TVM objects.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from ..leir.ast import Leir
from ..leir.parser import LeirSyntaxError, parse
from ..leir.program import Program
from ..leir.signature import Signature
from ..leir.validate import LeirValidationError, check
from ..lower.build import build, build_counts, build_for_timing, build_many, run, time_pair
from ..lower.targets import exact_target, target_kind
from .compare import compare, value_scale
from .gathers import gather_problem
from .independence import check_independent
from .inputs import DATASET_FAMILY, integer_ranges, random_inputs, special_inputs
from .soundness import exposed, in_float64, rewritten, special_trial, with_float_dtype

Report = Callable[..., None]

# The reverse-order check compares two runs bit for bit (one directed build, lower/build.py);
# without LLVM optimisation both directions evaluate each iteration with the same instructions
# (no contraction or vectorisation that could differ between them), and it compiles several
# times faster.
# Equality is judged on unoptimised builds too: both programs run with the same (exactly
# IEEE-ordered) code, and LLVM's lazy JIT compiles them 1.5-4x faster than at opt-level 3.
# Only timing uses the optimised host target. These builds keep each operation's own rounding
# (no FMA contraction), with hardware float16 conversions (lower.targets.exact_target).
def equal_target() -> dict:
    return exact_target(**{"opt-level": 0})


# ... and on the build the reverse-order check runs forward: P/V/B loops serial, in order, and
# intermediates poisoned with NaN before their first write. A correct program gives the same
# outputs as with parallel loops and uninitialised intermediates; a program that reads an
# intermediate before writing it shows the poison (stricter than before), and one whose
# parallel claims are wrong is caught deterministically by the Independent level (a race in a
# parallel run might or might not have shown at Equal). One build then serves both levels, so
# a verified transition costs two compilations of ``after`` instead of three -- and one, since
# the forward and reverse runs share a directed build (lower/build.py, _DIRECTED).
EQUAL_OPTIONS = {"serial": True, "poison": True}
# verify(timing=True) times before and after back to back in this many interleaved rounds
# (lower.build.time_pair; the search's judge uses 31 and confirms with 61)
TIMING_ROUNDS = 15


def describe_error(err: BaseException) -> str:
    """One line: TVM errors keep their last line (the check that failed), others their first."""
    text = str(err).strip()
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    if not lines:
        return type(err).__name__
    module = type(err).__module__ or ""
    line = lines[-1] if module.startswith("tvm") or "Traceback" in text else lines[0]
    line = line if len(line) <= 300 else line[:297] + "..."
    return f"{type(err).__name__}: {line}"


def warm_up() -> None:
    """Make the process-wide state every job needs first: the LEIR parser, the answers of the
    host CPU's target queries (``lower.targets``) and TVM's thread pool (``lower.threads``).
    The worker does this before it says it is ready, while its parent is still busy with
    what comes before the first request (``Worker.launch``); each is cached, so a job finds
    the same state it would have made itself."""
    from ..lower.targets import cpu_target
    from ..lower.threads import configure
    parse("L^{1}_{a=0}[A^{f32,g}_{a}=A^{f32,g}_{a};];")   # builds the cached parser
    cpu_target()
    equal_target()
    configure()


@lru_cache(maxsize=128)
def _parsed(text: str) -> Leir:
    """The AST of a program's text: the jobs of one original share its parse (ASTs are
    immutable), and a candidate parsed by a prebuild job is not parsed again by its
    verification."""
    return parse(text)


def program_of(spec: dict[str, Any], values: dict[str, Any]) -> Program:
    return Program(_parsed(spec["text"]), Signature.from_dict(spec["signature"]),
                   spec.get("name", ""), values)


def after_of(spec: dict[str, Any], job: dict[str, Any], before: Program) -> Program:
    """A candidate of ``job`` (its ``after``, or one of a prebuild's ``afters``): its text,
    with its own signature or the original's. Raises LeirSyntaxError."""
    signature = spec.get("signature") or job["before"]["signature"]
    return Program(_parsed(spec["text"]), Signature.from_dict(signature),
                   spec.get("name") or before.name, job.get("values") or {})


def has_parallel_claims(program: Program) -> bool:
    from ..leir.analysis import nest_loops
    return any(loop.kind in ("P", "V", "B") and loop.extent > 1
               for nest in program.leir.nests for loop in nest_loops(nest))


def reverse_order_check(program: Program, inputs: dict[str, np.ndarray]) -> str | None:
    """Run every P/V/B loop serially forward, then in reverse (intermediates poisoned with NaN
    in both); ``None`` when the outputs are bitwise identical, else what differs."""
    if not has_parallel_claims(program):
        return None
    forward = run(program, inputs, equal_target(), **EQUAL_OPTIONS)
    backward = run(program, inputs, equal_target(), reverse_parallel=True, poison=True)
    for name, a in forward.items():
        b = backward[name]
        if a.tobytes() != b.tobytes():
            differs = ~((a == b) | (np.isnan(a) & np.isnan(b))) if a.dtype.kind == "f" else a != b
            count = int(np.sum(differs))
            first = np.unravel_index(int(np.argmax(differs)), differs.shape) if a.ndim else ()
            at = ",".join(str(int(i)) for i in first)
            return (f"running the P/V/B loops in reverse order changes {name} at {count} of "
                    f"{a.size} element(s), first [{at}]: forward {a[first]}, reverse {b[first]}")
    return None


class _BeforeCache:
    """What the original program gives, shared by every transition verified against it: its
    outputs per trial, its independence verdict and its time. Inputs depend only on the
    original, the seed and the trial number, so these are facts about (original, seed)."""

    def __init__(self, size: int = 8):
        self._entries: OrderedDict[tuple, dict[str, Any]] = OrderedDict()
        self._size = size

    def entry(self, before: Program, seed: int) -> dict[str, Any]:
        digest = hashlib.sha256()
        for name in sorted(before.values):
            array = np.ascontiguousarray(before.values[name])
            digest.update(name.encode() + str(array.dtype).encode() + array.tobytes())
        key = (before.text, before.signature.to_json(), digest.hexdigest(), seed)
        if key in self._entries:
            self._entries.move_to_end(key)
        else:
            self._entries[key] = {"outputs": {}}
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return self._entries[key]


_BEFORE = _BeforeCache()


def evaluate(job: dict[str, Any], report: Report | None = None) -> dict[str, Any]:
    """Verify ``job['after']`` (LEIR text, optionally its own signature) against
    ``job['before']``; returns VerificationResult fields. The original is always built and run
    before ``after``, so a defect of the original (``before_problem``) is never taken for
    ``after``'s. A job with ``kind="time"`` only times the pair (``time_job``); one with
    ``kind="prebuild"`` compiles candidates ahead of their verifications (``prebuild_job``);
    one with ``kind="tir"`` verifies a TIR answer (``tir_answer.tir_job``).
    Every answer carries ``cpu_s``: the CPU time of this process (all its threads) for the job."""
    report = report or (lambda **_: None)
    start = time.process_time()
    if job.get("kind") == "time":
        fields = time_job(job, report)
    elif job.get("kind") == "prebuild":
        fields = prebuild_job(job)
    elif job.get("kind") == "outputs":
        fields = outputs_job(job)
    elif job.get("kind") == "tir":
        from .tir_answer import tir_job
        fields = tir_job(job, report)
    else:
        fields = _Evaluation(job, report).run()
    fields["cpu_s"] = time.process_time() - start
    return fields


def prebuild_job(job: dict[str, Any]) -> dict[str, Any]:
    """Compile ``job['before']`` and its candidates ``job['afters']`` (specs like a
    verification's ``after``) for the Equal and Independent levels, all in one module
    (``lower.build.build_many``): their verifications then find the builds in this process's
    cache. With ``job['timing']``, instead, each alone as ``time_job`` times it
    (``lower.build.build_for_timing``): a pair's timing then compiles nothing. Nothing is
    judged here; a candidate that does not parse or lower is left to its verification or
    timing, which says why."""
    before = program_of(job["before"], job.get("values") or {})
    programs = [before]
    for spec in job["afters"]:
        try:
            programs.append(after_of(spec, job, before))
        except LeirSyntaxError:
            continue
    if not job.get("timing"):
        return {"kind": "prebuild",
                "compiled": build_many(programs, equal_target(), **EQUAL_OPTIONS)}
    compiled = build_counts()["compiled"]
    for program in programs:
        try:
            build_for_timing(program)
        except Exception:  # noqa: BLE001 -- the timing builds it again and says why
            continue
    return {"kind": "prebuild", "compiled": build_counts()["compiled"] - compiled}


def outputs_job(job: dict[str, Any]) -> dict[str, Any]:
    """The outputs of each program of ``job['programs']`` (specs) on each input set of
    ``job['inputs']``, on the build the Equal level uses; a program that does not parse, build
    or run gives its error text instead of its list of outputs (``Verifier.outputs``)."""
    out: list[Any] = []
    for spec in job["programs"]:
        try:
            program = program_of(spec, {})
            out.append([run(program, inputs, equal_target(), **EQUAL_OPTIONS)
                        for inputs in job["inputs"]])
        except Exception as err:  # noqa: BLE001 -- reported per program
            out.append(describe_error(err))
    return {"kind": "outputs", "outputs": out}


def time_job(job: dict[str, Any], report: Report) -> dict[str, Any]:
    """``job['after']`` and ``job['before']`` timed back to back (``lower.build.time_pair``,
    ``job['rounds']`` interleaved rounds) on the first random input set of ``job['seed']`` --
    the inputs a verification with that seed times on. No equivalence is checked: the pair is
    expected to be verified already. Both optimised builds come from the worker's build cache
    when they were compiled before (``compiled`` says how many were not)."""
    values = job.get("values") or {}
    before = program_of(job["before"], values)
    after = after_of(job["after"], job, before)
    inputs = random_inputs(before, int(job.get("seed", 0)), 0, integer_ranges(before))
    report(stage="timing before and after, interleaved")
    paired = time_pair(before, after, inputs, rounds=int(job.get("rounds", 31)))
    return {"kind": "time", **paired.to_dict()}


class _Evaluation:
    def __init__(self, job: dict[str, Any], report: Report):
        self.job, self.report = job, report
        self.fields: dict[str, Any] = {}
        self.level = "none"

    def note(self, **fields):
        self.fields.update(fields)
        self.report(fields=fields)

    def stage(self, activity: str, program: str | None = None):
        """Report what the worker does now, structured: the activity and which program
        ("before", "after" or None); ``stage`` is the sentence for messages."""
        self.report(stage=f"{activity} {program}" if program else activity, activity=activity,
                    program=program)

    def special_values(self, before, after, before_out, after_out, seed, ranges,
                       inputs) -> str | None:
        """The exactness of the normal trials, and one special-value input set within the
        job's ``domain`` (docs/VERIFY.md "Special values"): NaN and ±inf where the original has
        them, within the declared ``ulps`` (at the job's ``scale``: the output's largest
        magnitude, or for ``"values"`` that of every value the original reads or writes, from
        a run of ``soundness.exposed(before)``). A strategy that declares ULPs is held to them
        at the tensors the rewrite writes (``soundness.rewritten``, run as extra outputs of
        both programs), and the outputs computed from them to Equal's tolerance; the bound is
        judged against a float64 evaluation of the original's tensors (``after`` at most N
        ULPs further from it than ``before``: ``soundness.beyond_bound``), or where that cannot
        judge, 2N ULPs from ``before``. Notes ``domain``, ``bitwise``, ``ulps`` (the largest
        difference from ``before``) and ``special_s``; returns why ``after`` fails, or
        ``None``."""
        job = self.job
        domain, declared = job["domain"], job.get("ulps")
        by_values = job.get("scale") == "values"
        local = rewritten(before, after) if declared else ()
        shown_before = exposed(before) if by_values else exposed(before, local)
        shown_after = exposed(after, local)
        # the float64 evaluation of the original's tensors: after may be N ULPs further from
        # it than before is (soundness.beyond_bound), as in the rule-file check
        reference = with_float_dtype(shown_before, "f64") if declared else None
        bound = f"{declared} ulp{' of values' if by_values else ''}"
        judged = [True]   # every trial judged against the reference (else: 2N from before)

        def values(trial_inputs, b_out, a_out):
            """``(before's, after's, scale, reference)`` of one input set: the outputs, with the
            tensors the rewrite writes (and for ``"values"`` every value before computes)."""
            b_seen, a_seen = b_out, a_out
            if shown_before is not before:
                b_seen = run(shown_before, trial_inputs, equal_target(), **EQUAL_OPTIONS)
            if shown_after is not after:
                a_seen = run(shown_after, trial_inputs, equal_target(), **EQUAL_OPTIONS)
            r_seen = None if reference is None else run(
                reference, in_float64(trial_inputs), equal_target(), **EQUAL_OPTIONS)
            scale = value_scale([*trial_inputs.values(), *b_seen.values()]) if by_values else 0.0
            return {n: b_seen[n] for n in a_seen}, a_seen, scale, r_seen

        def trial(trial_inputs, b_out, a_out):
            try:
                b_seen, a_seen, scale, r_seen = values(trial_inputs, b_out, a_out)
                return special_trial(b_seen, a_seen, scale, local, r_seen, declared or 0, bound)
            except Exception:  # noqa: BLE001 -- then the outputs alone: the stricter judgement
                judged[0] = False
                scale = value_scale([*trial_inputs.values(), *b_out.values()]) if by_values \
                    else 0.0
                return special_trial(b_out, a_out, scale)

        bitwise, worst = True, 0.0
        for trial_inputs, b_out, a_out in zip(inputs, before_out, after_out):
            same, ulps, problem = trial(trial_inputs, b_out, a_out)
            bitwise, worst = bitwise and same, max(worst, ulps)
            if problem is not None:   # an output beyond Equal's tolerance there: reported below
                break
        start = time.perf_counter()
        family = DATASET_FAMILY[domain]
        self.stage(f"comparing on special values ({family})")
        special = special_inputs(before, family, seed, 0, ranges)
        if problem is None and _gather_problem(before, [special]) is None:
            try:
                b_out = run(before, special, equal_target(), **EQUAL_OPTIONS)
            except Exception:  # noqa: BLE001 -- the original traps on them: nothing to judge
                b_out = None
            if b_out is not None:
                try:
                    a_out = run(after, special, equal_target(), **EQUAL_OPTIONS)
                    same, ulps, problem = trial(special, b_out, a_out)
                    bitwise, worst = bitwise and same, max(worst, ulps)
                    if problem is not None:
                        problem = f"special values ({family}, domain {domain}): {problem}"
                except Exception as err:  # noqa: BLE001
                    problem = (f"special values ({family}, domain {domain}): after fails: "
                               f"{describe_error(err)}")
        elif problem is not None:
            problem = f"normal inputs: {problem}"
        self.note(domain=domain, bitwise=bitwise, ulps=worst,
                  special_s=time.perf_counter() - start)
        if problem is not None:
            return f"equal: {problem}"
        if declared and judged[0]:   # the bound was judged against the reference already
            return None
        at = f" at {', '.join(local)}" if local else ""
        broken = _exactness_problem(bitwise, worst, declared, " of values" if by_values else "")
        return None if broken is None else f"equal: {broken}{at}"

    def passed(self, level: str):
        self.level = level
        self.report(passed=level)

    def result(self, reason: str | None, cause: str | None = None) -> dict[str, Any]:
        return {"level": self.level, "reason": reason, "cause": cause, **self.fields}

    def run(self) -> dict[str, Any]:
        job = self.job
        target = job.get("target", "llvm")
        trials, seed = int(job.get("trials", 3)), int(job.get("seed", 0))
        self.note(trials=trials, target=target_kind(target))
        values = job.get("values") or {}
        before = program_of(job["before"], values)
        before_problem = job.get("before_problem")

        # ---- diff and the static checks (here, so that the call's timeout bounds them too)
        self.stage("parsing", "after")
        spec = job["after"]
        try:
            after = after_of(spec, job, before)
        except LeirSyntaxError as err:
            return self.result(f"after does not parse: {err}", "parse")
        if after.text == before.text:
            return self.result("no change: after prints the same as before", "unchanged")
        self.passed("diff")
        if after.signature != before.signature:
            return self.result("build: after's signature differs from before's "
                               f"({after.signature.to_json()} vs {before.signature.to_json()})",
                               "signature")
        self.stage("validating", "after")
        try:
            check(after)
        except LeirValidationError as err:
            return self.result(f"build: invalid LEIR: {err}", "invalid")
        if before_problem is None:
            self.stage("validating", "before")
            try:
                check(before)
            except LeirValidationError as err:
                before_problem = f"before is invalid LEIR: {err}"

        # ---- build: the original first, so that a crash while building it is its own
        if before_problem is None:
            self.stage("building", "before")
            try:
                self.note(build_s_before=build(before, equal_target(), **EQUAL_OPTIONS).seconds)
            except Exception as err:  # noqa: BLE001
                before_problem = f"before does not build: {describe_error(err)}"
        self.stage("building", "after")
        try:
            seconds = build(after, equal_target(), **EQUAL_OPTIONS).seconds
            if target_kind(target) != "llvm":
                seconds += build(after, target).seconds  # the device build; runs use the CPU one
            self.note(build_s_after=seconds)
        except Exception as err:  # noqa: BLE001 -- every failure is a verdict, not a crash
            if before_problem is not None:
                self.note(before_problem=before_problem)
            return self.result(f"build: {describe_error(err)}", "build")
        self.passed("build")

        # ---- exec: again the original first (a trap or a crash in it is not after's)
        known = _BEFORE.entry(before, seed)
        ranges = integer_ranges(before)
        inputs = [random_inputs(before, seed, t, ranges) for t in range(max(trials, 1))]

        def run_before(t: int):
            if t not in known["outputs"]:
                known["outputs"][t] = run(before, inputs[t], equal_target(), **EQUAL_OPTIONS)
            return known["outputs"][t]

        if before_problem is None:
            self.stage("checking the gathers of", "before")
            oob = _gather_problem(before, inputs)
            if oob is not None:
                before_problem = f"before reads out of bounds: {oob}"
        if before_problem is None:
            self.stage("running", "before")
            try:
                before_out = [run_before(0)]
            except Exception as err:  # noqa: BLE001
                before_problem = f"before fails to run: {describe_error(err)}"
        if before_problem is not None:
            self.note(before_problem=before_problem)
        self.stage("checking the gathers of", "after")
        oob = _gather_problem(after, inputs)
        if oob is not None:
            return self.result(f"exec: after reads out of bounds: {oob}", "exec")
        self.stage("running", "after")
        try:
            after_out = [run(after, inputs[0], equal_target(), **EQUAL_OPTIONS)]
        except Exception as err:  # noqa: BLE001
            return self.result(f"exec: {describe_error(err)}", "exec")
        self.passed("exec")
        if before_problem is not None:
            return self.result(f"equal: cannot compare, {before_problem}", "before")

        # ---- equal
        max_abs = max_rel = 0.0
        informative = {name: False for name in after_out[0]}
        for t in range(trials):
            self.stage(f"comparing trial {t + 1} of {trials}")
            if t > 0:
                try:
                    after_out.append(run(after, inputs[t], equal_target(), **EQUAL_OPTIONS))
                except Exception as err:  # noqa: BLE001
                    return self.result(f"equal: trial {t + 1}: after fails: "
                                       f"{describe_error(err)}", "exec")
                before_out.append(run_before(t))
            for name in before_out[t]:
                c = compare(before_out[t][name], after_out[t][name], name)
                max_abs, max_rel = max(max_abs, c.max_abs_err), max(max_rel, c.max_rel_err)
                self.note(max_abs_err=max_abs, max_rel_err=max_rel)
                if not c.equal:
                    return self.result(f"equal: trial {t + 1}: {c.problem}", "mismatch")
                informative[name] = informative[name] or c.informative
        blank = [name for name, seen in informative.items() if not seen]
        if blank:
            return self.result(f"equal: not established: {', '.join(blank)} is all zero or "
                               f"non-finite in every trial", "uninformative")
        if job.get("domain") is not None:
            problem = self.special_values(before, after, before_out, after_out, seed, ranges,
                                          inputs)
            if problem is not None:
                return self.result(problem, "mismatch")
        self.passed("equal")

        # ---- independent
        self.stage("checking independence of", "after")
        problem = _independence_problem(after, inputs[0])
        reason = None if problem is None else f"independent: {problem}"
        if problem is None:
            self.passed("independent")
        else:
            self.report(reason=reason)
        self.stage("checking independence of", "before")
        if "independence" not in known:
            known["independence"] = _independence_problem(before, inputs[0])
        before_issue = known["independence"]
        self.note(before_independent=before_issue is None)
        if before_issue is not None:
            self.note(before_problem=f"before is not Independent: {before_issue}")
            if reason is not None:
                reason += " (before is not Independent either, so after cannot be blamed)"
                self.report(reason=reason)

        # ---- timing
        if job.get("timing", True):
            # before and after back to back (docs/VERIFY.md "Timing"): a speedup measured
            # minutes apart from the original's time would measure the machine's load too
            self.stage("timing", "before and after")
            paired = time_pair(before, after, inputs[0], rounds=TIMING_ROUNDS)
            speedup = paired.speedup
            self.note(time_before_ms=paired.before_median_ms,
                      time_after_ms=paired.after_median_ms,
                      speedup=speedup if speedup == speedup else None,
                      threads=paired.threads)
        return self.result(reason, None if reason is None else "independence")


def _exactness_problem(bitwise: bool, ulps: float, declared: int | None,
                       of: str = "") -> str | None:
    """Why a measured exactness breaks the declared one (``None``: within it). A bound of N
    ULPs from the exact result lets two programs differ by 2N ULPs from each other."""
    if declared is None:
        return None
    if declared == 0 and not bitwise:
        return (f"not bitwise identical ({ulps:.3g} ULP apart) where the strategy declares "
                "exact = \"bitwise\"")
    if declared > 0 and ulps > 2 * declared:
        return f"{ulps:.3g} ULP apart where the strategy declares exact = \"{declared} ulp{of}\""
    return None


def _gather_problem(program: Program, inputs: list[dict[str, np.ndarray]]) -> str | None:
    """The first out-of-bounds gather of ``program`` over the input sets of every trial."""
    for t, trial in enumerate(inputs):
        found = gather_problem(program, trial)
        if found is not None:
            return found + (f" (trial {t + 1})" if t else "")
    return None


def _independence_problem(program: Program, inputs) -> str | None:
    static = check_independent(program)
    if not static.ok:
        return static.reason
    try:
        return reverse_order_check(program, inputs)
    except Exception as err:  # noqa: BLE001
        return f"reverse-order run failed: {describe_error(err)}"
