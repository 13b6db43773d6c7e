"""Size limits of LEIR programs (docs/LEIR.md, section Limits).

The parser refuses a program past a *depth* limit with a "too deep" error at its position;
parsing, printing and validation are iterative, but the e-graph encoding, the lowering, TVM's
own passes and structural equality of AST nodes recurse once per level, so depth has a ceiling
that every stage is tested at (tests/test_bad_inputs.py).

    MAX_EXPRESSION_DEPTH   nesting of tensor accesses, operators, calls, if_then_else,
                           comparisons and index arithmetic in one equation (a sum of n
                           terms is about n levels deep)
    MAX_NEST_DEPTH         loop nests nested inside loop nests

Breadth (top-level nests, equations, terms side by side) has no language limit. Rewriting
(``leir steps``, the sampler) has a size budget instead, ``STEPS_NODE_BUDGET`` AST nodes
(the largest program of the reference corpus has 770, of the zoo 689): enumeration on a larger
program is refused up front with :class:`ProgramTooLarge` rather than running for hours (the
number of rewrites, and the text of each, grow with the program).
"""

from __future__ import annotations

import sys

from .ast import Equation, Leir, LoopNest
from .traverse import children

MAX_EXPRESSION_DEPTH = 1000
MAX_NEST_DEPTH = 100
STEPS_NODE_BUDGET = 5_000
# Enough Python frames for a program at both depth limits in every stage (the deepest
# recursion is a few frames per level); the limits keep the C stack use far from its end.
RECURSION_LIMIT = 20_000


class ProgramTooLarge(ValueError):
    """A program past a size budget of an operation (the message names the budget)."""


def allow_deep_programs() -> None:
    """Raise this process's recursion limit so that programs within the depth limits go
    through every stage (called by the command-line entry points and worker processes)."""
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)


def depth_problem(leir: Leir) -> tuple[str, tuple[int, int] | None] | None:
    """``(message, (line, col))`` for the first place ``leir`` passes a depth limit, else
    ``None``. Iterative: any depth can be measured."""
    stack: list[tuple[object, int, int, object]] = [(n, 1, 0, n) for n in reversed(leir.nests)]
    while stack:
        node, nests, depth, anchor = stack.pop()
        if isinstance(node, LoopNest):
            if nests > MAX_NEST_DEPTH:
                return (f"loop nests nested more than {MAX_NEST_DEPTH} deep; LEIR allows at "
                        f"most {MAX_NEST_DEPTH} (docs/LEIR.md, section Limits)", node.pos)
            stack.extend((item, nests + (isinstance(item, LoopNest)), 0, item)
                         for item in reversed(node.body))
            continue
        if depth > MAX_EXPRESSION_DEPTH:
            return (f"expression nested more than {MAX_EXPRESSION_DEPTH} levels deep in this "
                    f"equation; LEIR allows at most {MAX_EXPRESSION_DEPTH} (docs/LEIR.md, section "
                    "Limits)", getattr(anchor, "pos", None))
        step = 0 if isinstance(node, Equation) else 1
        stack.extend((child, nests, depth + step, anchor) for child in children(node))
    return None


def node_count(leir: Leir) -> int:
    """Number of AST nodes (loops, equations, tensor accesses, operators, leaves)."""
    count, stack = 0, [leir]
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(children(node))
    return count


def check_steps_budget(leir: Leir, what: str, budget: int = STEPS_NODE_BUDGET) -> None:
    """Raise :class:`ProgramTooLarge` when ``leir`` is past the rewriting budget."""
    size = node_count(leir)
    if size > budget:
        raise ProgramTooLarge(f"{what}: the program has {size:,} AST nodes; enumerating its "
                              f"rewrites is limited to {budget:,} (docs/LEIR.md, section Limits)")
