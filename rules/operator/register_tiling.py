"""Fact provider of register_tiling (rules/operator/register_tiling.toml).

* ``TileableReduction n a c op e`` (guard reduction_axis): the nest is one accumulation
  ``X=X op e`` (``op`` one of ``+ - * max min``; max and min of a floating-point X only, whose
  implicit initialisation is -inf or inf) that never
  reads X in ``e``; its innermost loop ``c`` is a serial reduction axis (X's subscripts do not
  name it) and the only loop that does not pick X's element: every other loop's index is one of
  X's subscripts on its own, and ``a``, the loop just outside ``c``, is X's last subscript (the
  unit-stride axis of the row-major output). So each element of X is written by exactly one
  iteration of the loops around ``c``, and its terms arrive in the order of ``c``;
* ``LaneTile n w`` (guard loop_range_factorization): a loop of ``n`` iterations holds at least
  one tile of ``w`` vector lanes, ``w`` in LANE_WIDTHS up to ``n``: ``n//w`` tiles, and the
  ``n%w`` iterations left over (the remainder) keep the original nest;
* ``RowTile n r`` (guard loop_range_factorization): the loop just outside the lane loop (the
  output rows) has ``n`` iterations, a multiple of ``r`` in ROW_TILES: ``n//r``
  tiles of ``r`` rows x ``w`` lanes.

A pure function of the program.
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.egraph.encoding import encode_value
from leir_egraph.egraph.vocabulary import Fact, GuardExtension, LoadedProgram, Relation
from leir_egraph.leir.analysis import index_names
from leir_egraph.leir.ast import IName
from leir_egraph.leir.scheduling import factorizable_reduction
from leir_egraph.leir.signature import is_float

# 8 f32 lanes fill an AVX2 register, 16 an AVX-512 one; 32 and 64 lanes are 2-8 registers,
# independent accumulator chains that hide the latency of the fused multiply-add.
LANE_WIDTHS = (8, 16, 32, 64)
# Output rows of a 2-D tile: each iteration of the reduction loop loads one vector of the
# operand that does not depend on the row and uses it for every row (rows x lanes
# accumulators, 16 registers of AVX2 hold 4 x 32 f32 lanes).
ROW_TILES = (2, 4)
# identities 0, 0, 1, -inf, inf: what the lowering's implicit initialisation starts from
TILED_OPS = ("+", "-", "*", "max", "min")
SERIAL = ("L", "U")


def tileable(nest) -> tuple[str, str, str, object] | None:
    """``(a, c, op, e)`` when ``nest`` may be register-tiled (module docstring), else None.

    ``B^{4}_{tx=0}L^{16}_{a=0}L^{5}_{c=0}[D_{tx,a}=D_{tx,a}+A_{tx,c}*C_{c,a};]`` ->
    ``('a', 'c', '+', A_{tx,c}*C_{c,a})``."""
    found = factorizable_reduction(nest)
    if found is None or len(nest.loops) < 2:
        return None
    op, operand, _ = found
    target = nest.body[0].target
    if op not in TILED_OPS or target.dtype == "bool":
        return None
    if op in ("max", "min") and not is_float(target.dtype):   # an integer has no inf to start from
        return None
    *outer, tile, red = nest.loops
    subs = target.subscripts
    named = [s.name for s in subs if isinstance(s, IName)]
    if red.kind not in SERIAL or red.index in _names_in(subs):
        return None
    if not subs or subs[-1] != IName(tile.index) or tile.kind == "V":
        return None
    picking = outer + [tile]
    if len(set(named)) != len(named):
        return None
    for loop in picking:
        # the loop's index is a subscript of X on its own and used in no other subscript
        if loop.index not in named or sum(loop.index in _names_in([s]) for s in subs) != 1:
            return None
        if loop.kind == "V":
            return None
    return tile.index, red.index, op, operand


def row_loop(nest):
    """The loop just outside the lane loop of a tileable nest (module docstring): the output
    rows of a 2-D tile, or None when the lane loop is outermost."""
    found = tileable(nest)
    if found is None:
        return None
    at = [l.index for l in nest.loops].index(found[0])
    return nest.loops[at - 1] if at >= 1 else None


def _names_in(subs) -> set[str]:
    return set().union(*(index_names(s) for s in subs))


def _tileable_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for term, nest, _ in loaded.distinct_nests():
        found = tileable(nest)
        if found is not None:
            a, c, op, operand = found
            yield TILEABLE_REDUCTION(term, a, c, op, encode_value(operand))


def _lane_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    extents = set()
    for nest in loaded.nests:
        found = tileable(nest)
        if found is not None:
            extents.update(l.extent for l in nest.loops if l.index == found[0])
    for n in sorted(extents):
        for w in LANE_WIDTHS:
            if w <= n:
                yield LANE_TILE(n, w)


def _row_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    extents = set()
    for nest in loaded.nests:
        row = row_loop(nest)
        if row is not None:
            extents.add(row.extent)
    for n in sorted(extents):
        for r in ROW_TILES:
            if r <= n and n % r == 0:
                yield ROW_TILE(n, r)


TILEABLE_REDUCTION = Relation(
    "TileableReduction", ("Nest", "String", "String", "String", "Expr"),
    "{0} is one accumulation with {3} of {4}, which never reads the accumulated tensor; its "
    "innermost loop {2} is a serial reduction axis and every other loop picks the accumulated "
    "element, {1} its last (unit-stride) subscript, so each element's terms arrive in the "
    "order of {2} within one iteration of the loops around it")
LANE_TILE = Relation(
    "LaneTile", ("i64", "i64"),
    "a loop of {0} iterations runs as tiles of {1} vector lanes")

ROW_TILE = Relation(
    "RowTile", ("i64", "i64"),
    "a loop of {0} iterations runs as {0}/{1} tiles of {1} rows")

GUARD_EXTENSIONS = (
    GuardExtension(guard="reduction_axis", relations=(TILEABLE_REDUCTION,),
                   facts=_tileable_facts),
    GuardExtension(guard="loop_range_factorization", relations=(LANE_TILE, ROW_TILE),
                   facts=lambda loaded: (*_lane_facts(loaded), *_row_facts(loaded))),
)
