"""The canonical form up to renaming (leir/canonical.py): a renaming of intermediates and loop
indices never changes it, anything else does, and it is itself a valid, equal program."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from leir_egraph.leir import Program, check, parse, to_text
from leir_egraph.leir.ast import Bin, Idx, IName, Leir, LoopNest, Neg, Num, Var
from leir_egraph.leir.canonical import (CanonicalNests, canonical, canonical_kernel,
                                        canonical_text, exact_canonical_text, is_hardware_index)
from leir_egraph.leir.names import index_name_supply, tensor_name_supply
from leir_egraph.leir.traverse import rebuild, replaced, walk


def _random_renaming(program: Program, rng: random.Random, tensors: bool = True) -> Program:
    """Rename intermediates (unless ``tensors`` is false) and (per top-level nest) loop indices
    at random, keeping hardware prefixes: a program that must have the same canonical form."""
    keep = set(program.signature.names)
    inter = sorted({n.name for n in walk(program.leir) if isinstance(n, Var)} - keep)
    inter = inter if tensors else []
    pool = [n for n, _ in zip((n for n in tensor_name_supply() if n not in keep), range(200))]
    tensors = dict(zip(inter, rng.sample(pool, len(inter))))
    nests = []
    for nest in program.leir.nests:
        olds = sorted({n.index for n in walk(nest) if hasattr(n, "index") and hasattr(n, "kind")})
        plain = [n for _, n in zip(range(300), index_name_supply())]
        free = rng.sample(plain, len(olds))
        env = {}
        for old, new in zip(olds, free):
            env[old] = (old[:2] + new) if is_hardware_index(old) else new

        def fn(node):
            if isinstance(node, (IName, Idx)) and node.name in env:
                return replace(node, name=env[node.name])
            if isinstance(node, Var) and node.name in tensors:
                return replace(node, name=tensors[node.name])
            if isinstance(node, LoopNest):
                return replace(node, loops=tuple(replace(l, index=env[l.index])
                                                 for l in node.loops))
            return None

        nests.append(rebuild(nest, fn))
    return program.with_leir(Leir(tuple(nests)))


@settings(max_examples=60, deadline=None)
@given(row=st.integers(0, 10_000), seed=st.integers(0, 2**32 - 1))
def test_renaming_never_changes_the_canonical_form(reference_rows, row, seed):
    r = reference_rows[row % len(reference_rows)]
    program = Program.parse(r["leir"], r["signature"])
    renamed = _random_renaming(program, random.Random(seed))
    assert canonical_text(renamed) == canonical_text(program)
    once = canonical(program)
    assert canonical_text(once) == once.text  # idempotent
    assert to_text(parse(once.text)) == once.text


@settings(max_examples=40, deadline=None)
@given(row=st.integers(0, 10_000), seed=st.integers(0, 2**32 - 1))
def test_canonical_nests_memoised_equal_canonical(reference_rows, row, seed):
    """``CanonicalNests`` (one memo over many programs sharing nests, as an exploration's
    successors do) gives exactly ``canonical`` and its text: for a program, for renamings of
    it, and for programs made of its nests in other orders -- where a nest's intermediates get
    other new names, so a memoised nest must not be reused."""
    r = reference_rows[row % len(reference_rows)]
    program = Program.parse(r["leir"], r["signature"])
    rng = random.Random(seed)
    memo = CanonicalNests(program.signature.names)
    nests = list(program.leir.nests)
    # canonical(program): nests already canonical, which the memo keeps without rebuilding
    variants = [program, _random_renaming(program, rng), canonical(program)]
    for _ in range(3):
        order = nests[:]
        rng.shuffle(order)
        variants.append(program.with_leir(Leir(tuple(order[:rng.randint(1, len(order))]))))
    for p in variants:
        made = memo(p, [(to_text(n), n) for n in p.leir.nests])
        expected = canonical(p)
        assert made.leir == expected.leir
        assert made.text == expected.text == canonical_text(p)


@settings(max_examples=30, deadline=None)
@given(row=st.integers(0, 10_000), seed=st.integers(0, 2**32 - 1))
def test_replaced_is_dataclasses_replace(reference_rows, row, seed):
    """``traverse.replaced`` (what rebuilding and canonical renaming make nodes with) gives
    what ``dataclasses.replace`` gives, for every node of a program and a change of each of
    its fields to another node's value of that field (spelling, positions and equality
    included, and a hash of its own), and ``Program.with_leir`` what ``replace`` gives."""
    r = reference_rows[row % len(reference_rows)]
    program = Program.parse(r["leir"], r["signature"], name="p")
    rng = random.Random(seed)
    nodes = list(walk(program.leir))
    for node in nodes:
        hash(node)   # a kept hash (ast._hash_once) must not pass to the new node
        names = list(vars(replace(node)))
        others = [n for n in nodes if type(n) is type(node)]
        changes = {k: getattr(rng.choice(others), k) for k in rng.sample(names, rng.randint(0, len(names)))}
        made, expected = replaced(node, **changes), replace(node, **changes)
        assert type(made) is type(expected) and vars(made) == vars(expected)
        assert made == expected and hash(made) == hash(expected)
    other = program.with_leir(Leir(tuple(reversed(program.leir.nests))))
    expected = replace(program, leir=other.leir)
    assert vars(other) == vars(expected) and other == expected and hash(other) == hash(expected)
    assert dict(other.values) == dict(expected.values) and other.text == expected.text


@settings(max_examples=60, deadline=None)
@given(row=st.integers(0, 10_000), seed=st.integers(0, 2**32 - 1))
def test_canonical_kernels_compose_the_canonical_program(reference_rows, row, seed):
    """Once the tensors are canonical, the canonical program is its kernels' canonical forms
    side by side (the factored exploration's keys), renamed or already canonical alike."""
    r = reference_rows[row % len(reference_rows)]
    program = canonical(Program.parse(r["leir"], r["signature"]))
    kernels = Leir(tuple(canonical_kernel(n) for n in program.leir.nests))
    assert to_text(kernels) == program.text        # already canonical: left as it is
    only_indices = _random_renaming(program, random.Random(seed), tensors=False)
    kernels = Leir(tuple(canonical_kernel(n) for n in only_indices.leir.nests))
    assert to_text(kernels) == canonical_text(only_indices) == program.text


def test_canonical_programs_stay_valid_and_keep_the_signature(reference_rows):
    for r in reference_rows[::7]:
        program = Program.parse(r["leir"], r["signature"])
        try:
            check(program)
        except Exception:
            continue  # the corpus' three add_add programs are invalid to begin with
        check(canonical(program))
        names = {n.name for n in walk(canonical(program).leir) if isinstance(n, Var)}
        assert set(program.signature.names) & names == \
            set(program.signature.names) & {n.name for n in walk(program.leir) if isinstance(n, Var)}


SIG = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 8]}],
       "outputs": [{"name": "C", "dtype": "float32", "shape": [4, 8]}]}


def test_only_names_are_identified():
    base = "B^{4}_{tx=0}L^{8}_{q=0}[Z^{f32,g}_{tx,q}=A^{f32,g}_{tx,q}*2;];" \
           "B^{4}_{tx=0}L^{8}_{q=0}[C^{f32,g}_{tx,q}=Z^{f32,g}_{tx,q}+1;];"
    same = base.replace("Z^", "Q^").replace("q", "w").replace("tx", "txc")
    other_scope = base.replace("Z^{f32,g}", "Z^{f32,l}")
    other_binding = base.replace("tx", "ty")
    other_order = "L^{8}_{q=0}B^{4}_{tx=0}[Z^{f32,g}_{tx,q}=A^{f32,g}_{tx,q}*2;];" \
                  "B^{4}_{tx=0}L^{8}_{q=0}[C^{f32,g}_{tx,q}=Z^{f32,g}_{tx,q}+1;];"
    key = canonical_text(Program.parse(base, SIG))
    assert canonical_text(Program.parse(same, SIG)) == key
    assert canonical_text(Program.parse(base, SIG)).startswith("B^{4}_{tx=0}L^{8}_{a=0}[D^")
    for text in (other_scope, other_binding, other_order):
        assert canonical_text(Program.parse(text, SIG)) != key, text


def test_nested_nests_continue_their_parents_names():
    text = ("L^{4}_{q=0}[C^{f32,g}_{q,0}=0;L^{8}_{w=0}[C^{f32,g}_{q,w}=A^{f32,g}_{q,w};];"
            "L^{8}_{k=0}[C^{f32,g}_{q,k}=C^{f32,g}_{q,k}*2;];];")
    out = canonical_text(Program.parse(text, SIG))
    assert out == ("L^{4}_{a=0}[C^{f32,g}_{a,0}=0;L^{8}_{c=0}[C^{f32,g}_{a,c}=A^{f32,g}_{a,c};];"
                   "L^{8}_{c=0}[C^{f32,g}_{a,c}=C^{f32,g}_{a,c}*2;];];")


# ---------------------------------------------------------------- exact identities

def _exact_variant(program: Program, rng: random.Random) -> Program:
    """``program`` with exact IEEE identities applied at random, each the opposite way round
    from the normal form: operands of ``+``/``*`` swapped, ``a+(-b)`` written ``a-b``, a sign
    pulled into an operand of ``*``/``/``, a double negation added; in float equations a
    product with or quotient by one, and whole float literals written as integers."""
    def fn(node):
        if isinstance(node, Bin) and node.op in ("+", "*") and rng.random() < 0.5:
            node = Bin(node.op, node.rhs, node.lhs)
        if isinstance(node, Bin) and node.op == "+" and isinstance(node.rhs, Neg) \
                and rng.random() < 0.5:
            return Bin("-", node.lhs, node.rhs.operand)
        if isinstance(node, Neg) and isinstance(node.operand, Bin) \
                and node.operand.op in ("*", "/") and rng.random() < 0.5:
            inner = node.operand
            return Bin(inner.op, Neg(inner.lhs), inner.rhs)
        if isinstance(node, Bin) and rng.random() < 0.1:   # (a Var may be a gather index)
            return Neg(Neg(node))
        return node

    def in_float(node):   # in a float equation also: a product with or quotient by one
        node = fn(node)     # (1 or 1.0), and a whole literal written as an integer
        if isinstance(node, Bin) and rng.random() < 0.1:
            one = Num(rng.choice(["1", "1.0"]))
            return rng.choice([Bin("*", node, one), Bin("*", one, node), Bin("/", node, one)])
        if isinstance(node, Num) and node.text.endswith(".0") and rng.random() < 0.5:
            return Num(node.text[:-2])
        return node

    def value(eq):   # an accumulation X=X+e keeps its form: only e varies
        v, step = eq.value, in_float if eq.target.dtype.startswith("f") else fn
        if isinstance(v, Bin) and v.lhs == eq.target:
            return replace(v, rhs=rebuild(v.rhs, step))
        return rebuild(v, step)

    def walk_nest(nest):
        body = tuple(walk_nest(i) if isinstance(i, LoopNest)
                     else replace(i, value=value(i)) for i in nest.body)
        return replace(nest, body=body)

    return program.with_leir(Leir(tuple(walk_nest(n) for n in program.leir.nests)))


@settings(max_examples=60, deadline=None)
@given(row=st.integers(0, 10_000), seed=st.integers(0, 2**32 - 1))
def test_exact_identities_never_change_the_exact_canonical_form(reference_rows, row, seed):
    r = reference_rows[row % len(reference_rows)]
    program = Program.parse(r["leir"], r["signature"])
    variant = _exact_variant(_random_renaming(program, random.Random(seed)),
                             random.Random(seed))
    assert exact_canonical_text(variant) == exact_canonical_text(program)
    assert to_text(parse(variant.text)) == variant.text     # still a printable program


def test_exact_variants_compute_the_same_bits_on_tvm(golden_rows):
    """What the exact canonical form identifies is identical bit for bit: golden programs and
    random exact variants of them, built for the exact target (no FMA contraction)."""
    import numpy as np

    from leir_egraph.lower import run
    from leir_egraph.verify.session import equal_target

    from conftest import golden_program
    rng = random.Random(7)
    rows = [r for r in golden_rows if r["dtype"] == "float32"][::17]
    compared = 0
    for r in rows:
        program = golden_program(r)
        if r["name"] == "add_add":     # the corpus' add_add programs are invalid LEIR
            continue
        variant = _exact_variant(program, rng)
        if variant.text == program.text:
            continue
        inputs = {s.name: np.random.default_rng(0).standard_normal(s.shape).astype(s.dtype)
                  for s in program.signature.inputs if s.name not in program.values}
        target = equal_target()
        want, got = run(program, inputs, target), run(variant, inputs, target)
        for name in want:
            assert np.array_equal(want[name], got[name], equal_nan=True), (r["id"], name)
        compared += 1
    assert compared >= 8


def test_exact_form_associates_index_sums_and_the_programs_agree_on_tvm():
    """A substitution g -> g+2 under c+g prints c+(g+2) in our rules and c+g+2 in the
    reference's string code: integer index sums associate exactly, so one exact canonical form,
    and the two programs compute the same bits on TVM."""
    import numpy as np

    from leir_egraph.leir.signature import Signature
    from leir_egraph.lower import run
    sig = Signature.from_short("A:f32[4,8] -> C:f32[4,4]")
    ours = Program.parse("B^{4}_{tx=0}L^{2}_{a=0}L^{2}_{g=0}"
                         "[C^{f32,g}_{tx,a*2+g}=A^{f32,g}_{tx,a*2+(g+2)}*2;];", sig)
    theirs = Program.parse("B^{4}_{tx=0}L^{2}_{a=0}L^{2}_{g=0}"
                           "[C^{f32,g}_{tx,a*2+g}=A^{f32,g}_{tx,a*2+g+2}*2;];", sig)
    assert ours.text != theirs.text
    assert exact_canonical_text(ours) == exact_canonical_text(theirs)
    x = {"A": np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)}
    assert np.array_equal(run(ours, x)["C"], run(theirs, x)["C"])
    other = Program.parse("B^{4}_{tx=0}L^{2}_{a=0}L^{2}_{g=0}"
                          "[C^{f32,g}_{tx,a*2+g}=A^{f32,g}_{tx,(a*2+g)*1+2}*2;];", sig)
    assert exact_canonical_text(other) != exact_canonical_text(ours)
