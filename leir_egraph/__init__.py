"""leir-egraph: LEIR tensor programs, e-graph rewrites as rule files, TVM verification.

Public API (see README.md)::

    parse(text) -> Leir                      to_text(ast) -> str
    Signature.from_dict / to_dict            Program(leir, signature)
    lower(program, target) -> PrimFunc       run(program, inputs, target="llvm") -> outputs
    verify(before, after, target="llvm", trials=3) -> VerificationResult

TVM, egglog and torch are imported lazily: parsing and printing never pay for them.
"""

from .leir import (LeirSyntaxError, LeirValidationError, Program, Signature, TensorSpec, check,
                   parse, to_text)

_LAZY = {
    "lower": ("leir_egraph.lower", "lower"),
    "run": ("leir_egraph.lower", "run"),
    "verify": ("leir_egraph.verify", "verify"),
    "VerificationResult": ("leir_egraph.verify", "VerificationResult"),
    "from_torch": ("leir_egraph.frontend", "from_torch"),
    "UnsupportedOp": ("leir_egraph.frontend", "UnsupportedOp"),
    "load_strategies": ("leir_egraph.egraph", "load_strategies"),
    "single_steps": ("leir_egraph.egraph", "single_steps"),
    "undo_steps": ("leir_egraph.egraph", "undo_steps"),
    "sample_steps": ("leir_egraph.egraph", "sample_steps"),
    "applicable": ("leir_egraph.egraph", "applicable"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'leir_egraph' has no attribute {name!r}")


__all__ = ["parse", "to_text", "check", "Program", "Signature", "TensorSpec", "LeirSyntaxError",
           "LeirValidationError", *_LAZY]
