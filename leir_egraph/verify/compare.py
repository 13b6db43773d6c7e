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
