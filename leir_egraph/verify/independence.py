"""Static half of the Independent level (docs/LEIR.md §4): does every P/V/B loop keep its
promise that two different iterations never write the same element?

The analysis is ``leir.analysis.write_conflicts`` (pure LEIR, shared with the CUDA lowering,
which refuses a B loop whose iterations may write one element: a race between the GPU's
threads); here its sentences become the verifier's verdict::

    P^{16}_{a=0}L^{8}_{c=0}[X_{a*8+c}=...]    rest' - rest in [-7, 7], c = 8  -> independent
    P^{16}_{a=0}L^{8}_{c=0}[X_{c}=...]         X does not depend on a           -> dependent
    B^{128}_{tx=0}L^{1}_{a=0}[H=H+F_{tx,a};]   scalar written by every tx       -> dependent

A write through a gather cannot be decided and counts as not independent. Reads are left to
the dynamic check (reverse-order execution, see ``session.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..leir.analysis import ENUMERATION_LIMIT, write_conflicts
from ..leir.program import Program

__all__ = ["ENUMERATION_LIMIT", "Independence", "check_independent"]


@dataclass(frozen=True)
class Independence:
    """Outcome of the static check: ``ok`` and one sentence per broken or undecidable claim."""
    ok: bool
    problems: tuple[str, ...] = field(default=())

    def __bool__(self) -> bool:
        return self.ok

    @property
    def reason(self) -> str | None:
        return "; ".join(self.problems) if self.problems else None


def check_independent(program: Program) -> Independence:
    """Statically check every P/V/B loop of ``program`` (pure Python, no TVM).

    >>> p = Program.parse("P^{4}_{a=0}L^{8}_{c=0}[X^{f32,g}_{c}=A^{f32,g}_{a,c};];", sig)  # doctest: +SKIP
    >>> check_independent(p).reason                                                     # doctest: +SKIP
    "every iteration of P^{4}_{a=0} writes X^{f32,g}_{c}: its subscript does not depend on a"
    """
    problems = write_conflicts(program.leir)
    return Independence(not problems, tuple(problems))
