"""Random inputs for one verification trial.

* floats: standard normal, cast to the dtype;
* integers used as a gather subscript: uniform over the valid positions of the dimension they
  index (``H_{C_{tx}}`` with H of size 10 -> C in 0..9; ``X_{C_{tx}+1}`` shifts the range);
* integers compared with a loop index (``if_then_else(c==C_{tx},...)``): uniform over that
  index's range;
* other integers: small, non-zero (-4..4 without 0, unsigned 1..8) so that integer division
  by an input cannot trap;
* bool: fair coin;
* inputs with a stored value (``program.values``) use that value.

Trial ``t`` of seed ``s`` draws from ``numpy.random.default_rng([s, t])``.

Special-value input sets (``special_inputs``) replace the float inputs of such a set by one
family of values a rewrite must survive (docs/VERIFY.md "Special values"); each family belongs
to a *domain* (``DOMAIN_ORDER``): ``bounded`` families hold finite numbers far from overflow,
``finite`` ones add near-overflow magnitudes, ``float`` ones ±inf and NaN. A rule file is
tried on the families of its declared domain only.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..leir.analysis import affine, equation_sites, index_range, intermediate_shapes
from ..leir.ast import Compare, IBin, Idx, Var
from ..leir.program import Program
from ..leir.traverse import walk
from ..lower.build import numpy_dtype

Range = tuple[int, int]


def integer_ranges(program: Program) -> dict[str, Range]:
    """Inclusive value range for integer inputs whose use implies one."""
    sig = program.signature
    shapes = {t.name: t.shape for t in sig.tensors}
    shapes.update(intermediate_shapes(program.leir, set(shapes)))
    inputs = {t.name for t in sig.inputs if t.code[0] in "iu"}
    gather: dict[str, Range] = {}
    compared: dict[str, Range] = {}
    for site in equation_sites(program.leir):
        env = site.loop_ranges
        for node in walk(site.equation):
            if isinstance(node, Var) and node.name in shapes:
                for dim, sub in enumerate(node.subscripts):
                    found = _gather_offset(sub, inputs, env)
                    if found is None or dim >= len(shapes[node.name]):
                        continue
                    name, (lo, hi) = found
                    r = (0 - lo, shapes[node.name][dim] - 1 - hi)
                    old = gather.get(name)
                    gather[name] = r if old is None else (max(old[0], r[0]), min(old[1], r[1]))
            elif isinstance(node, Compare):
                _compared_ranges(node, inputs, env, compared)
    out = dict(compared)
    out.update(gather)  # a gather's bounds are a hard constraint, comparisons only a hint
    return {k: v for k, v in out.items() if v[0] <= v[1]}


def _gather_offset(sub, inputs, env):
    """``(name, range of the rest)`` if ``sub`` is ``G``, ``G+e``, ``e+G`` or ``G-e`` with G an
    integer input and e affine in loop indices (``G-e`` as ``G+(-e)``)."""
    if isinstance(sub, Var) and sub.name in inputs:
        return sub.name, (0, 0)
    if not (isinstance(sub, IBin) and sub.op in ("+", "-")):
        return None
    pairs = [(sub.lhs, sub.rhs)] + ([(sub.rhs, sub.lhs)] if sub.op == "+" else [])
    for gather, rest in pairs:
        if isinstance(gather, Var) and gather.name in inputs:
            r = index_range(rest, env)
            if r is None:
                return None
            return gather.name, (r if sub.op == "+" else (-r[1], -r[0]))
    return None


def _compared_ranges(node: Compare, inputs, env, out: dict[str, Range]) -> None:
    operands = node.operands
    for a, b in zip(operands, operands[1:]):
        for tensor, other in ((a, b), (b, a)):
            if not (isinstance(tensor, Var) and tensor.name in inputs):
                continue
            if not any(isinstance(n, Idx) for n in walk(other)) or affine(other) is None:
                continue
            r = index_range(other, env)
            if r is not None:
                old = out.get(tensor.name)
                out[tensor.name] = r if old is None else (min(old[0], r[0]), max(old[1], r[1]))


def random_inputs(program: Program, seed: int, trial: int,
                  ranges: Mapping[str, Range] | None = None) -> dict[str, np.ndarray]:
    """One input set: every signature input, stored values as they are."""
    rng = np.random.default_rng([seed, trial])
    ranges = integer_ranges(program) if ranges is None else ranges
    out: dict[str, np.ndarray] = {}
    for spec in program.signature.inputs:
        if spec.name in program.values:
            out[spec.name] = np.asarray(program.values[spec.name])
            continue
        dtype = numpy_dtype(spec.dtype)
        code = spec.code
        if code == "bool":
            out[spec.name] = rng.random(spec.shape) < 0.5
        elif code[0] == "f" or code == "bf16":
            out[spec.name] = rng.standard_normal(spec.shape).astype(dtype)
        elif spec.name in ranges:
            lo, hi = ranges[spec.name]
            out[spec.name] = rng.integers(lo, hi + 1, spec.shape).astype(dtype)
        elif code[0] == "u":
            out[spec.name] = rng.integers(1, 9, spec.shape).astype(dtype)
        else:
            magnitude = rng.integers(1, 5, spec.shape)
            sign = np.where(rng.random(spec.shape) < 0.5, -1, 1)
            out[spec.name] = (magnitude * sign).astype(dtype)
    return out


# Domains a rule file may declare, narrowest first: "bounded" (finite inputs of moderate
# magnitude -- zeros, or magnitudes from 1e-3 up to the dtype's exp range, 40 in f32 -- on
# which no sum, product or exponential of the program's values overflows or underflows: what
# the value splits and the sympy forms assume), "finite", "float" (any IEEE value). A family
# belongs to its narrowest domain and every wider one.
DOMAIN_ORDER = ("bounded", "finite", "float")
SPECIAL_FAMILIES = {
    "zeros": "bounded",         # every other element exactly +0 or -0 (divisions read them)
    "positive": "bounded",      # all positive, magnitudes 1e-3 .. the dtype's exp range
    "negative": "bounded",      # all negative, the same magnitudes
    "cancelling": "bounded",    # ±1.5 within 2^-10 relative, the sign a checkerboard
    "subnormal": "finite",      # subnormal magnitudes of the dtype, both signs
    "near_overflow": "finite",  # magnitudes from a quarter of the largest value to the largest
    "infinities": "float",      # every other element +inf or -inf, the others normal
    "nan": "float",             # every other element NaN, the others normal
    "mixed": "float",           # normal, ±0, subnormal, near-overflow, ±inf, NaN in turn
}
# Each family's place in the seed of its draws: fixed, so that a family added later does not
# change the others' values.
_SEED_ORDER = ("infinities", "mixed", "nan", "near_overflow", "negative", "positive",
               "subnormal", "zeros", "cancelling")
# The one special-value set a dataset verification adds (docs/VERIFY.md), per domain.
DATASET_FAMILY = {"float": "mixed", "finite": "mixed_finite", "bounded": "mixed_bounded"}
_MIXED_KINDS = {"mixed": ("normal", "zero", "subnormal", "huge", "inf", "nan"),
                "mixed_finite": ("normal", "zero", "subnormal", "huge"),
                "mixed_bounded": ("normal", "zero")}


def families(domain: str) -> tuple[str, ...]:
    """The special-value families within a declared domain (``bounded``, ``finite`` or
    ``float``)."""
    rank = DOMAIN_ORDER.index(domain)
    return tuple(f for f, d in SPECIAL_FAMILIES.items() if DOMAIN_ORDER.index(d) <= rank)


def _limits(dtype: np.dtype) -> tuple[float, float]:
    """(largest finite, smallest positive subnormal) of a float dtype."""
    try:
        info = np.finfo(dtype)
    except ValueError:  # bfloat16 (ml_dtypes)
        import ml_dtypes
        info = ml_dtypes.finfo(dtype)
    return float(info.max), float(info.smallest_subnormal)


def _moderate(dtype: np.dtype) -> float:
    """The largest magnitude of a ``bounded`` input: the dtype's exp range (leir.ranges)."""
    from ..leir.ranges import FORMATS
    code = {"float16": "f16", "bfloat16": "bf16", "float64": "f64"}.get(np.dtype(dtype).name, "f32")
    return FORMATS[code].exp_arg


def _special_values(family: str, shape, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    largest, tiny = _limits(dtype)
    normal = rng.standard_normal(shape)
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    kinds = {
        "normal": normal,
        "zero": sign * 0.0,
        "subnormal": sign * tiny * rng.integers(1, 64, shape),
        "huge": sign * largest * rng.uniform(0.25, 1.0, shape),
        "inf": sign * np.inf,
        "nan": np.full(shape, np.nan),
    }
    # every other element (a checkerboard over the flat index, its phase random) holds the
    # family's special value, so that even a 4-element input holds both kinds
    every_other = (np.arange(int(np.prod(shape))).reshape(shape) + rng.integers(0, 2)) % 2 == 0
    with np.errstate(over="ignore"):
        if family == "zeros":
            out = np.where(every_other, kinds["zero"], normal)
        elif family == "subnormal":
            out = kinds["subnormal"]
        elif family == "near_overflow":
            out = kinds["huge"]
        elif family in ("positive", "negative"):
            out = 10.0 ** rng.uniform(-3, np.log10(_moderate(dtype)), shape) * \
                (1 if family == "positive" else -1)
        elif family == "cancelling":
            # one magnitude, 1.5, perturbed within 2^-10 relative; the sign a checkerboard over
            # every dimension (positive where the indices sum to an even number): two inputs
            # read at one position nearly cancel where one is subtracted from the other (a
            # value minus its mean, 3*(A-D)), and a sum along any one dimension nearly cancels
            # (a mean of mixed signs) -- where a rewrite that rounds at the scale of the
            # terms, not of their small result, shows
            parity = np.indices(shape).sum(axis=0) % 2 if len(shape) else np.zeros(())
            out = np.where(parity == 0, 1.5, -1.5) * (1 + 2.0 ** -10 * rng.uniform(-1, 1, shape))
        elif family in ("infinities", "nan"):
            out = np.where(every_other, kinds["inf" if family == "infinities" else "nan"], normal)
        elif family in _MIXED_KINDS:
            names = _MIXED_KINDS[family]
            order = rng.permutation(len(names))
            pick = order[(np.arange(int(np.prod(shape))).reshape(shape)) % len(names)]
            out = np.choose(pick, [np.broadcast_to(kinds[n], np.shape(normal)) for n in names])
        else:
            raise ValueError(f"unknown special-value family '{family}'; known: "
                             f"{', '.join(list(SPECIAL_FAMILIES) + list(_MIXED_KINDS))}")
        return np.asarray(out).astype(dtype)


def special_inputs(program: Program, family: str, seed: int, trial: int = 0,
                   ranges: Mapping[str, Range] | None = None) -> dict[str, np.ndarray]:
    """An input set whose float inputs are drawn from a special-value ``family``
    (``SPECIAL_FAMILIES``, or ``mixed_finite`` / ``mixed_bounded``: the kinds of ``mixed``
    within that domain); integer, bool
    and stored inputs as in :func:`random_inputs`. Seeded by ``(seed, trial, family)``."""
    out = random_inputs(program, seed, trial, ranges)
    rng = np.random.default_rng([seed, trial, 1 + _SEED_ORDER.index(family)
                                 if family in SPECIAL_FAMILIES else 0])
    for spec in program.signature.inputs:
        if spec.name in program.values or not (spec.code[0] == "f" or spec.code == "bf16"):
            continue
        out[spec.name] = _special_values(family, spec.shape, numpy_dtype(spec.dtype), rng)
    return out
