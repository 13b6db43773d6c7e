"""Outputs against expected values at the golden tolerance (rtol = atol), NumPy only.

``golden.check_entry`` compares the LLVM build's outputs with it, and the GPU device check
(benchmarks/cuda_device_check.py) loads this file by path on a machine without TVM to compare
the CUDA kernels' outputs the same way.

    >>> import numpy as np
    >>> compare_outputs({"C": np.ones(3)}, {"C": np.ones(3) + 1e-7}, ["C"], 1e-5)
    ('equal', '', 1.0000000005838672e-07)
"""

from __future__ import annotations

import numpy as np


def compare_outputs(got, want, names, rtol: float) -> tuple[str, str, float | None]:
    """``(status, detail, max_abs_err)``: ``equal`` or ``mismatch``; an output whose shape, NaN
    positions or infinities differ is a mismatch with no error figure."""
    worst = 0.0
    for name in names:
        g, w = np.asarray(got[name]).astype(np.float64), np.asarray(want[name]).astype(np.float64)
        if g.shape != w.shape:
            return "mismatch", f"{name}: shape {g.shape} vs {w.shape}", None
        if not np.array_equal(np.isnan(g), np.isnan(w)):
            return "mismatch", f"{name}: NaN at different positions", None
        if not (np.array_equal(np.isposinf(g), np.isposinf(w))
                and np.array_equal(np.isneginf(g), np.isneginf(w))):
            return "mismatch", f"{name}: inf at different positions", None
        finite = np.isfinite(g)
        diff = np.abs(g - w)[finite]
        worst = max(worst, float(diff.max()) if diff.size else 0.0)
        bad = diff > rtol + rtol * np.abs(w[finite])
        if bad.any():
            return "mismatch", (f"{name}: {int(bad.sum())} element(s) beyond rtol=atol={rtol:g}, "
                                f"max abs error {worst:.3g}"), worst
    return "equal", "", worst
