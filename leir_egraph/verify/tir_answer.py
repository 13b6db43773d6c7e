"""Verifying an answer written in TVMScript TIR (the paper's TIR variant) against the LEIR
original it transforms, in the verification worker (``Verifier.verify_tir``).

The answer is parsed by TVM (``tvm.script.from_source``), must be one ``PrimFunc`` whose
parameters are the original's known tensors (inputs then outputs, with their names, shapes and
dtypes: the calling convention of ``lower.tir.lower``), is compiled with ``tvm.compile`` for the
CPU target the Equal level builds the original for (``session.equal_target``: LLVM, each
floating-point operation rounded on its own), and is run on the same random input sets as the
original (``verify.inputs.random_inputs``), its outputs compared with ``verify.compare``. The
levels are the LEIR answers' (docs/VERIFY.md): ``diff`` (it parses and prints differently from
the original's TIR, both printed by TVM), ``build``, ``exec``, ``equal``. There is no
Independent level: TIR carries no P/V/B claims of LEIR's to check.
"""

from __future__ import annotations

from typing import Any

from ..lower.build import call_tensors, numpy_dtype, run
from ..lower.targets import target_dict
from ..lower.threads import configure as configure_threads
from .compare import compare
from .inputs import integer_ranges, random_inputs


def tir_job(job: dict[str, Any], report) -> dict[str, Any]:
    """``job['text']`` (TVMScript of a PrimFunc) against ``job['before']`` (a LEIR spec);
    ``job['original_tir']``: the original's TIR as the prompt showed it (for the Diff level).
    Returns VerificationResult fields."""
    from .session import EQUAL_OPTIONS, describe_error, equal_target, program_of
    passed: list[str] = []
    fields: dict[str, Any] = {"trials": int(job.get("trials", 3)), "target": "llvm"}

    def result(reason: str | None, cause: str | None) -> dict[str, Any]:
        return {"level": passed[-1] if passed else "none", "reason": reason, "cause": cause,
                **fields}

    def stage(activity: str, program: str | None = None) -> None:
        report(stage=f"{activity} {program}" if program else activity, activity=activity,
               program=program)

    def passing(level: str) -> None:
        passed.append(level)
        report(passed=level, fields=dict(fields))   # how far it got, should the job stop

    before = program_of(job["before"], job.get("values") or {})
    trials, seed = fields["trials"], int(job.get("seed", 0))
    stage("parsing", "after")
    try:
        func = _prim_func(job["text"])
    except Exception as err:  # noqa: BLE001 -- TVM's parser raises many kinds
        return result(f"the answer is not TVMScript TIR: {_parse_error(err)}", "parse")
    try:
        original = _prim_func(job.get("original_tir") or "").script()
    except Exception:  # noqa: BLE001 -- no usable original text: compare with our lowering
        from ..lower.tir import lower
        original = lower(before).script()
    if func.script() == original:
        return result("no change: the answer prints the same TIR as the original", "unchanged")
    passing("diff")
    sig = before.signature
    want = [(t.name, list(t.shape), str(numpy_dtype(t.dtype))) for t in sig.inputs + sig.outputs]
    got = [(p.name, [int(x) for x in p.shape], str(numpy_dtype(str(p.dtype))))
           for p in func.params]
    if got != want:
        return result(f"build: the answer's parameters {_params(got)} are not the known "
                      f"tensors {_params(want)}", "signature")
    stage("building", "after")
    try:
        import tvm
        configure_threads()
        executable = tvm.compile(func, target=target_dict(equal_target()))
    except Exception as err:  # noqa: BLE001
        return result(f"build: {describe_error(err)}", "build")
    passing("build")
    ranges = integer_ranges(before)
    inputs = [random_inputs(before, seed, t, ranges) for t in range(max(trials, 1))]
    max_abs = max_rel = 0.0
    for t in range(trials):
        stage("running", "before")
        before_out = run(before, inputs[t], equal_target(), **EQUAL_OPTIONS)
        stage("running", "after")
        try:
            args, outs = call_tensors(before, inputs[t])
            executable(*args, *outs)
        except Exception as err:  # noqa: BLE001
            return result(f"exec: trial {t + 1}: {describe_error(err)}", "exec")
        if t == 0:
            passing("exec")
        stage(f"comparing trial {t + 1} of {trials}")
        for spec, out in zip(sig.outputs, outs):
            c = compare(before_out[spec.name], out.numpy(), spec.name)
            max_abs, max_rel = max(max_abs, c.max_abs_err), max(max_rel, c.max_rel_err)
            fields.update(max_abs_err=max_abs, max_rel_err=max_rel)
            if not c.equal:
                return result(f"equal: trial {t + 1}: {c.problem}", "mismatch")
    passing("equal")
    return result("independent: not checked for a TIR answer", "independence")


def _prim_func(text: str):
    """The one PrimFunc of a TVMScript text (a PrimFunc, or an IRModule holding one)."""
    import tvm
    from tvm.script import from_source
    parsed = from_source(text)
    if isinstance(parsed, tvm.IRModule):
        funcs = list(parsed.functions.values())
        if len(funcs) != 1:
            raise ValueError(f"the module holds {len(funcs)} functions, not one PrimFunc")
        parsed = funcs[0]
    if type(parsed).__name__ != "PrimFunc":
        raise ValueError(f"the text is a {type(parsed).__name__}, not a PrimFunc")
    return parsed


def _params(params: list[tuple[str, list[int], str]]) -> str:
    return ", ".join(f"{n}{s} {d}" for n, s, d in params)


def _parse_error(err: BaseException) -> str:
    """One line for a TVMScript parse error: TVM's diagnostic (``error: ...``) and where
    (``line:col`` of the answer's IR text), else the error's own line."""
    from .session import describe_error
    lines = [line.strip() for line in str(err).splitlines()]
    first = next((line for line in lines if line.startswith("error:")), None)
    if first is None:
        return describe_error(err)
    where = next((line[3:].strip() for line in lines if line.startswith("-->")), "")
    return f"{first[len('error:'):].strip()}" + (f" at {where.replace('<str>:', 'line ')}"
                                                  if where else "")
