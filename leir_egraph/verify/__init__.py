"""Equivalence checking of a transformed LEIR program against its original (docs/VERIFY.md).

    verify(before, after, target="llvm", trials=3, timeout=60.0, seed=0, timing=True)
        -> VerificationResult        (never raises; TVM work in a persistent worker process)
    verify_many(pairs, ..., workers=1) -> [VerificationResult]   (one worker, or several in parallel)
    check_independent(program) -> Independence        (static P/V/B claim check, no TVM)
    time_pair(before, after, rounds=31) -> lower.build.PairedTiming   (interleaved timing;
        raises TimingError when the worker cannot time the pair)
    launch()    (start the process-wide worker now, without waiting for it)
    prepare(before, afters, timing=False)   (compile ahead: verifications' or timings' builds)
"""

from __future__ import annotations

from ..lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "TOLERANCE": "compare", "compare": "compare",
    "Independence": "independence", "check_independent": "independence",
    "integer_ranges": "inputs", "random_inputs": "inputs",
    "LEVELS": "result", "VerificationResult": "result",
    "Verifier": "verifier", "verify": "verifier", "verify_many": "verifier",
    "TimingError": "verifier", "time_pair": "verifier", "launch": "verifier",
    "prepare": "verifier",
})
