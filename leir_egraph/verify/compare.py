"""The Equal level's tolerance policy (docs/VERIFY.md).

``after`` matches ``before`` element-wise when, with ``b`` the before value, ``a`` the after
value and ``scale = max(1, max |finite b|)`` over that output in that trial::

    |a - b| <= atol * scale + rtol * |b|          (floats, compared in float64)
    a == b                                        (integers and bool)

NaN positions must be identical, and so must +inf and -inf positions. ``scale`` makes the
absolute part follow the output's magnitude, so that a reassociated sum whose result
cancels to near zero is judged against the size of its terms, not of its result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# dtype name -> (rtol, atol); wide enough for a reassociated reduction in that dtype,
# tight enough that an off-by-one element or a dropped term fails.
TOLERANCE = {
    "float16": (1e-2, 1e-2),
    "bfloat16": (5e-2, 5e-2),
    "float32": (1e-4, 1e-5),
    "float64": (1e-9, 1e-12),
}


@dataclass(frozen=True)
class Comparison:
    """Outcome of comparing one output in one trial."""
    equal: bool
    max_abs_err: float
    max_rel_err: float
    informative: bool          # has at least one finite non-zero element
    problem: str | None = None


def tolerance(dtype: np.dtype) -> tuple[float, float]:
    return TOLERANCE.get(np.dtype(dtype).name, (0.0, 0.0))


def compare(before: np.ndarray, after: np.ndarray, name: str = "output") -> Comparison:
    """Compare one output of ``after`` against ``before`` under the policy above."""
    if before.shape != after.shape:
        return Comparison(False, np.inf, np.inf, False,
                          f"{name} has shape {list(after.shape)}, before has {list(before.shape)}")
    b = before.astype(np.float64)
    a = after.astype(np.float64)
    finite_b = np.isfinite(b)
    informative = bool(np.any(finite_b & (b != 0)))
    rtol, atol = tolerance(before.dtype)
    if rtol == 0 and atol == 0:  # integers, bool
        wrong = a != b
        diff = np.abs(a - b)
        max_abs = float(diff.max()) if diff.size else 0.0
        max_rel = float((diff / np.maximum(np.abs(b), 1)).max()) if diff.size else 0.0
        if wrong.any():
            return Comparison(False, max_abs, max_rel, informative,
                              f"{name} differs at {int(wrong.sum())} of {wrong.size} elements, "
                              f"first at {_where(wrong)}: before {before[_first(wrong)]}, after "
                              f"{after[_first(wrong)]}")
        return Comparison(True, max_abs, max_rel, informative)
    for label, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        mismatch = test(a) != test(b)
        if mismatch.any():
            return Comparison(False, np.inf, np.inf, informative,
                              f"{name} has {label} at different positions ({int(mismatch.sum())} "
                              f"elements, first at {_where(mismatch)}: before "
                              f"{before[_first(mismatch)]}, after {after[_first(mismatch)]})")
    both = finite_b & np.isfinite(a)
    scale = max(1.0, float(np.abs(b[finite_b]).max())) if finite_b.any() else 1.0
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(both, np.abs(a - b), 0.0)
    bound = atol * scale + rtol * np.abs(np.where(both, b, 0.0))
    floor = np.maximum(np.abs(np.where(both, b, 0.0)), atol * scale)
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / floor).max()) if diff.size else 0.0
    wrong = diff > bound
    if wrong.any():
        at = _first(wrong)
        return Comparison(False, max_abs, max_rel, informative,
                          f"{name} differs beyond tolerance (rtol {rtol:g}, atol {atol:g} x "
                          f"{scale:.3g}) at {int(wrong.sum())} of {wrong.size} elements, first at "
                          f"{_where(wrong)}: before {before[at]}, after {after[at]}")
    return Comparison(True, max_abs, max_rel, informative)


def _first(mask: np.ndarray):
    return np.unravel_index(int(np.argmax(mask)), mask.shape) if mask.ndim else ()


def _where(mask: np.ndarray) -> str:
    return f"[{','.join(str(int(i)) for i in _first(mask))}]"


# ---------------------------------------------------------------- exactness in ULPs

@dataclass(frozen=True)
class Exactness:
    """How close ``after`` is to a reference, for one output (docs/VERIFY.md "Exactness").

    ``problem`` is set when NaN or ±inf positions differ (no ULP count can excuse that);
    otherwise ``ulps`` is the largest finite difference in units in the last place of the
    output's dtype at the output's scale (its largest finite reference magnitude), and
    ``bitwise`` says whether every element has the same bits (NaN payloads aside)."""
    bitwise: bool
    ulps: float
    problem: str | None = None


def ulp_at(dtype: np.dtype, scale: float) -> float:
    """The spacing of ``dtype`` values at magnitude ``scale`` (its smallest subnormal at 0; at
    its largest finite value for a larger scale -- a float64 value beyond the dtype's range --
    so that a count of ULPs is never NaN)."""
    if np.dtype(dtype).kind == "f" and abs(scale) >= float(np.finfo(dtype).max):
        largest = np.finfo(dtype).max
        return float(largest) - float(np.nextafter(largest, np.zeros((), dtype)))
    return float(np.spacing(np.abs(np.asarray(scale).astype(dtype))).astype(np.float64))


def exactness(reference: np.ndarray, after: np.ndarray, dtype=None,
              name: str = "output", scale: float = 0.0) -> Exactness:
    """``after`` against ``reference`` (same shape), in ULPs of ``dtype`` (default: after's).
    The reference may be a float64 evaluation of the original: it is compared as a value, its
    special positions as they are. The ULPs are those at the output's largest finite reference
    magnitude, or at ``scale`` where that is larger (``"N ulp of values"``: the largest
    magnitude of any value the program reads or writes, ``value_scale``)."""
    dtype = np.dtype(after.dtype if dtype is None else dtype)
    if reference.shape != after.shape:
        return Exactness(False, np.inf, f"{name} has shape {list(after.shape)}, the reference "
                                        f"has {list(reference.shape)}")
    if dtype.kind not in "fV" and dtype.name != "bfloat16":   # integers and bool: exact only
        same = bool(np.array_equal(reference, after))
        return Exactness(same, 0.0 if same else np.inf,
                         None if same else f"{name} differs (integer output)")
    r = reference.astype(np.float64)
    a = after.astype(np.float64)
    for label, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        mismatch = test(a) != test(r)
        if mismatch.any():
            at = _first(mismatch)
            return Exactness(False, np.inf,
                             f"{name} has {label} at different positions "
                             f"({int(mismatch.sum())} element(s), first at {_where(mismatch)}: "
                             f"expected {reference[at]}, after {after[at]})")
    finite = np.isfinite(r)
    scale = max(float(np.abs(r[finite]).max()) if finite.any() else 0.0, scale)
    with np.errstate(invalid="ignore"):
        diff = np.where(finite, np.abs(a - r), 0.0)
    largest = float(diff.max()) if diff.size else 0.0
    ulps = largest / ulp_at(dtype, scale) if largest else 0.0
    same_bits = bool(np.array_equal(np.signbit(r[finite]), np.signbit(a[finite]))
                     and largest == 0.0) if reference.dtype == after.dtype else largest == 0.0
    return Exactness(same_bits, ulps)


def value_scale(arrays) -> float:
    """The largest finite magnitude among ``arrays`` (float ones; 0 when there is none): the
    scale of an ``"N ulp of values"`` bound, over the inputs, intermediates and outputs of one
    run of the original."""
    scale = 0.0
    for array in arrays:
        a = np.asarray(array)
        if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
            a = a.astype(np.float64)
            finite = a[np.isfinite(a)]
            if finite.size:
                scale = max(scale, float(np.abs(finite).max()))
    return scale


def worst_place(reference: np.ndarray, after: np.ndarray) -> tuple:
    """The index of the first element whose NaN/inf kind or sign differs, else of the largest
    finite difference (for reports)."""
    r, a = reference.astype(np.float64), after.astype(np.float64)
    kind = (np.isnan(r) != np.isnan(a)) | (np.isposinf(r) != np.isposinf(a)) | \
        (np.isneginf(r) != np.isneginf(a))
    if kind.any():
        return _first(kind)
    with np.errstate(invalid="ignore"):
        diff = np.where(np.isfinite(r) & np.isfinite(a), np.abs(a - r), -1.0)
    if diff.size and diff.max() == 0:
        signs = np.signbit(r) != np.signbit(a)
        return _first(signs) if signs.any() else _first(diff == 0)
    return _first(diff == diff.max()) if diff.size else ()
