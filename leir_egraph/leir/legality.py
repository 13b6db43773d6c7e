"""When may loop iterations or whole nests be reordered without changing results?

Pure, conservative dependence analyses used by the strategy guards (and by the verifier's
static independence check). "Conservative" means: a ``True`` answer is a proof for every input;
``False`` may also mean "could not prove it".

The central notion is which enclosing loops a write subscript *determines*: knowing the written
element pins down those loop values. ``D_{tx,a}`` determines ``tx`` and ``a``; ``D_{a*8+c}``
with ``c < 8`` determines both ``a`` and ``c``; ``D_{a+c}`` determines neither; ``D_{tx}`` under
loops ``tx, a`` determines only ``tx`` (``a`` is a reduction axis).
"""

from __future__ import annotations

from .analysis import EquationSite, affine, equation_reads, equation_sites
from .ast import Leir, Loop, LoopNest, Var


def determined_loops(var: Var, loops: tuple[Loop, ...]) -> frozenset[str]:
    """Loop indices whose values are fixed by the element ``var`` addresses.

    A subscript dimension affine in the not-yet-determined loops determines its loop with the
    largest coefficient when that coefficient exceeds the span of all the others (mixed radix,
    ``a*8+c`` with ``c in 0..7``); repeat until nothing changes.
    """
    extent = {l.index: l.extent for l in loops}
    known: set[str] = set()
    forms = [affine(s) for s in var.subscripts]
    changed = True
    while changed:
        changed = False
        for form in forms:
            if form is None:
                continue
            coef = {n: c for n, c in form[0].items() if n not in known}
            if not coef or any(n not in extent for n in coef):
                continue
            ordered = sorted(coef, key=lambda n: abs(coef[n]))
            # determine from the top: the biggest coefficient must exceed what the rest can add
            span = 0
            spans = []
            for name in ordered:
                spans.append(span)
                span += abs(coef[name]) * (extent[name] - 1)
            for name, below in reversed(list(zip(ordered, spans))):
                if abs(coef[name]) > below:
                    known.add(name)
                    changed = True
                else:
                    break
    return frozenset(known)


def _sites(nest: LoopNest) -> list[EquationSite]:
    return equation_sites(Leir((nest,)))


def _same_subscript_reads(sites: list[EquationSite]) -> bool:
    """Every read of a tensor written in these equations addresses exactly the element the
    writing equations address (no scan, no shifted or transposed self-reads)."""
    written: dict[str, set[Var]] = {}
    for site in sites:
        written.setdefault(site.equation.target.name, set()).add(site.equation.target)
    for forms in written.values():
        if len(forms) > 1:
            return False
    for site in sites:
        for var in equation_reads(site.equation):
            if var.name in written and var not in written[var.name]:
                return False
    return True


def independent_iterations(nest: LoopNest, index: str) -> bool:
    """May the iterations of loop ``index`` of ``nest`` run in any order or in parallel?

    True when every equation under that loop writes elements that determine ``index`` (two
    iterations never write the same element) and every read of a tensor written in the nest
    addresses the element written in the same iteration.

    ``B^{4}_{tx=0}L^{8}_{a=0}[D_{tx}=D_{tx}+A_{tx,a}]``: ``tx`` yes, ``a`` no (reduction).
    """
    sites = _sites(nest)
    if not _same_subscript_reads(sites):
        return False
    for site in sites:
        if index in (l.index for l in site.loops):
            if index not in determined_loops(site.equation.target, site.loops):
                return False
    return True


def loops_swappable(nest: LoopNest, first: str, second: str) -> bool:
    """May loops ``first`` and ``second`` of ``nest`` exchange their nesting positions?

    Exchanging the loops at positions ``i < k`` changes the relative order of every pair of
    loops it moves past each other: ``(i, k)``, and ``(i, m)``, ``(m, k)`` for each loop ``m``
    between them. That is safe -- every output bit unchanged -- when, for every written element,
    no two loops of such a pair both run over it (loops of one iteration order nothing). Two
    reduction loops of one accumulation are not reordered: even an order-free reduction
    (``+ - * max min``) would be reassociated, which rounds differently in another order (the
    dataset's verification found loop_reorder 1-2 ULP off on convolutions while it allowed
    that; ``L^{4}_{c}L^{2}_{d}L^{2}_{f}[C_{c}=C_{c}+A_{d,c+f}*D_{d,f};]`` exchanging ``c`` and
    ``f`` puts ``f`` outside ``d``: refused).
    """
    sites = _sites(nest)
    if not _same_subscript_reads(sites):
        return False
    for site in sites:
        order = [l.index for l in site.loops]
        if first not in order or second not in order:
            continue
        i, k = sorted((order.index(first), order.index(second)))
        target = site.equation.target
        free = ({l.index for l in site.loops if l.extent > 1}
                - determined_loops(target, site.loops))
        ends = {order[i], order[k]} & free
        if len(ends) == 2 or (ends and free & set(order[i + 1:k])):
            # two loops running over the same written element change their relative order:
            # an overwrite or scan changes its result, and an accumulation -- even order-free
            # in real arithmetic -- is reassociated (+ and * round differently in another
            # order; max and min pick another of -0 and +0), so the exchange is not bitwise
            return False
    return True


def fusible(producer: LoopNest, consumer: LoopNest) -> bool:
    """May ``consumer`` run inside ``producer``'s loops, iteration by iteration? (Whether the two
    nests have the same loops is a separate question, asked by the caller.)

    Every tensor flowing from producer to consumer must be read at exactly the element the
    producer wrote in that same iteration, and the producer must write each element exactly once
    (no reduction). The consumer may not write what the producer reads or writes.

    ``[J_{tx,a}=A_{tx,a}*2;]`` then ``[C_{tx,a}=J_{tx,a}+1;]``: fusible.
    ``[D_{tx}=max(D_{tx},A_{tx,a});]`` then ``[C_{tx,a}=A_{tx,a}-D_{tx};]``: not (reduction).
    ``B^{1}_{tx}[O=2;]`` then ``B^{1}_{tx}[Q=sqrt(O);]``: fusible (one iteration writes O once).
    """
    p_sites, c_sites = _sites(producer), _sites(consumer)
    p_reads = {v.name for s in p_sites for v in equation_reads(s.equation)}
    p_writes: dict[str, set[Var]] = {}
    for site in p_sites:
        p_writes.setdefault(site.equation.target.name, set()).add(site.equation.target)
        # a loop of one iteration writes its element once whatever the subscript
        repeated = {l.index for l in site.loops if l.extent > 1}
        if not repeated <= determined_loops(site.equation.target, site.loops):
            if any(site.equation.target.name in {v.name for v in equation_reads(c.equation)}
                   for c in c_sites):
                return False
    for site in c_sites:
        target = site.equation.target.name
        if target in p_reads or target in p_writes:
            return False
        for var in equation_reads(site.equation):
            if var.name in p_writes and p_writes[var.name] != {var}:
                return False
    return True
