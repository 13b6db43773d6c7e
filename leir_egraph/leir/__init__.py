"""The LEIR language: grammar, AST, parser, printer, signatures, programs, validation, analyses."""

from .ast import (Bin, Call, Compare, Equation, IBin, IConst, Idx, IfThenElse, IName, Leir, Logic,
                  Loop, LoopNest, Neg, Num, Var)
from .parser import LeirSyntaxError, parse
from .printer import to_text
from .program import Program
from .signature import Signature, TensorSpec
from .validate import LeirValidationError, Problem, check, problems

__all__ = [
    "Bin", "Call", "Compare", "Equation", "IBin", "IConst", "Idx", "IfThenElse", "IName", "Leir",
    "Logic", "Loop", "LoopNest", "Neg", "Num", "Var", "LeirSyntaxError", "parse", "to_text",
    "Program", "Signature", "TensorSpec", "LeirValidationError", "Problem", "check", "problems",
]
