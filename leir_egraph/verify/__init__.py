"""Equivalence checking of a transformed LEIR program against its original (docs/VERIFY.md).

    verify(before, after, target="llvm", trials=3, timeout=60.0, seed=0, timing=True)
        -> VerificationResult        (never raises; TVM work in a persistent worker process)
    verify_many(pairs, ..., workers=1) -> [VerificationResult]   (one worker, or several in parallel)
    check_independent(program) -> Independence        (static P/V/B claim check, no TVM)
"""

from .compare import TOLERANCE, compare
from .independence import Independence, check_independent
from .inputs import integer_ranges, random_inputs
from .result import LEVELS, VerificationResult
from .verifier import Verifier, verify, verify_many

__all__ = ["verify", "verify_many", "Verifier", "VerificationResult", "LEVELS",
           "check_independent", "Independence", "random_inputs", "integer_ranges", "compare",
           "TOLERANCE"]
