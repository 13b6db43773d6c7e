"""The Step-TP paper's 100 multi-step test workloads (its Appendix C), mapped to zoo kinds.

``steptp_test_workloads.jsonl`` beside this module (package data: it ships in the wheel) lists
each test program by name and known tensors (LEIR name, dtype, shape), in the paper's order,
as its Appendix C writes them (tests/data/README.md says how the file was made). ``mapping(entry)`` finds the zoo kind of the name and reads
the kind's dimensions off the listed shapes; ``instantiate(entry, size)`` builds the module at

* ``"paper"``: the listed shapes exactly (inputs on the meta device: translating a 3 GB
  input costs nothing; parameters are real), for GPU runs;
* ``"cpu"``: every size-like dimension (batch, features, spatial sizes, channels, matrix
  dimensions, sequence length, head size) multiplied by one factor ``s <= 1``, the largest that
  keeps every tensor at or under ``CPU_MAX_ELEMENTS``; kernel sizes, strides, paddings,
  dilations, groups and head counts are kept, so the program has the same structure and the
  shapes keep their proportions (docs/SEARCH.md, "Test workloads").

The list gives no kernel sizes beyond the weights' shapes, no strides, paddings or constants:
strides and paddings are solved from the input and output shapes (the smallest that fit),
scalar constants are the zoo's seeded draws. Entries that no zoo kind reproduces are returned by
``mapping`` as ``Unmapped`` with the reason.

    >>> entries = load()
    >>> m = mapping(entries[1]); m.kind, m.dims
    ('Square_matrix_multiplication', {'N': 319})
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any, Callable

import torch

from . import components as C
from . import level2
from .registry import DTYPES, KINDS, Input, Kind, build, make_inputs, seed_for

CPU_MAX_ELEMENTS = 1 << 15
"""The CPU size keeps every tensor (input, parameter, output) at most this many elements."""

SCALED_KEYS = frozenset({"batch", "dim", "dim1", "dim2", "features", "M", "N", "K", "in_f",
                         "out", "seq", "head_dim", "s0", "s1", "s2", "channels", "cin", "cout",
                         "spatial", "size", "one_dim", "L"})


def default_path() -> Path:
    """The paper's list as the package ships it."""
    return Path(str(files(__package__) / "steptp_test_workloads.jsonl"))


@dataclass(frozen=True)
class Entry:
    """One line of the list: the paper's index and name, and its known tensors."""
    index: int
    name: str
    variables: tuple[tuple[str, str, tuple[int, ...]], ...]   # (LEIR name, torch dtype, shape)

    @property
    def dtype(self) -> str:
        return next((d for _, d, _ in self.variables if d.startswith("float")), "float32")

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        return [s for _, _, s in self.variables]


@dataclass(frozen=True)
class Mapping:
    """How an entry is built: the zoo kind, its dimensions at the paper's shapes, and the
    builder (``make(dims, dtype) -> (module, inputs)``)."""
    entry: Entry
    kind: str
    dims: dict = field(hash=False, compare=False)
    make: Callable = field(repr=False, hash=False, compare=False)
    note: str = ""


@dataclass(frozen=True)
class Unmapped:
    entry: Entry
    reason: str


def load(path: str | Path | None = None) -> list[Entry]:
    """The entries of the list, in the paper's order."""
    out = []
    with open(path or default_path()) as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                out.append(Entry(d["index"], d["name"], tuple(
                    (v["name"], v["dtype"], tuple(v["shape"])) for v in d["variables"])))
    return out


def kind_name(name: str) -> str:
    """The zoo's spelling of a paper name: ``Gemm Sigmoid Sum LogSumExp`` ->
    ``Gemm_Sigmoid_Sum_LogSumExp``; case-insensitive match against the zoo."""
    key = name.replace(" ", "_").lower()
    by_lower = {k.lower(): k for k in KINDS}
    aliases = {"matrix_multiplication": "Standard_matrix_multiplication",
               "mha_max": "MHA_max", "gqa_sum": "GQA_sum", "gqa_mean": "GQA_mean",
               "mha_mean": "MHA_mean", "mqa_mean": "MQA_mean", "gqa_gemm": "GQA_Gemm",
               "mha_gemm_relu_sum": "MHA_Gemm_ReLU_sum",
               "conv_depthwise_2d_square_input_square_kernel":
                   "conv_depthwise_2D_square_input_square_kernel"}
    return aliases.get(key) or by_lower.get(key, "")


# ---------------------------------------------------------------- dims from shapes

def _first(entry: Entry) -> tuple[int, ...]:
    return entry.shapes[0]


def _output(entry: Entry) -> tuple[int, ...]:
    """The output shape: the last variable (the list's usual order)."""
    return entry.shapes[-1]


def _act_dims(e: Entry, kind: str) -> dict:
    b, d = _first(e)
    extra = {"LeakyReLU": {"slope": 0.01}, "ELU": {"alpha": 1.0}}.get(kind, {})
    return {"batch": b, "dim": d, **extra}


def _img_dims(e: Entry, kind: str) -> dict:
    b, c, h, w = _first(e)
    return {"batch": b, "features": c, "dim1": h, "dim2": w}


def _reduction_dims(e: Entry, kind: str) -> dict:
    a, out = _first(e), _output(e)
    dim = next(i for i in range(3) if tuple(a[:i] + a[i + 1:]) == tuple(out)
               or tuple(a[:i] + (1,) + a[i + 1:]) == tuple(out))
    return {"batch": a[0], "dim1": a[1], "dim2": a[2], "dim": dim}


MATMUL_SHAPES = {
    "Square_matrix_multiplication": [("N", "N"), ("N", "N")],
    "Standard_matrix_multiplication": [("M", "K"), ("K", "N")],
    "Matrix_vector_multiplication": [("M", "K"), ("K", "one")],
    "Matmul_with_small_K_dimension": [("M", "K"), ("K", "N")],
    "Matmul_with_irregular_shapes": [("M", "K"), ("K", "N")],
    "Matmul_with_diagonal_mat": [("N",), ("N", "M")],
    "Matmul_for_upper_triangular_matrices": [("N", "N"), ("N", "N")],
    "Matmul_for_lower_triangular_matrices": [("N", "N"), ("N", "N")],
    "Matmul_with_transposed_B": [("M", "K"), ("N", "K")],
    "Matmul_with_transposed_both": [("K", "M"), ("N", "K")],
}


def _matmul_dims(e: Entry, kind: str) -> dict:
    dims: dict[str, int] = {}
    for names, shape in zip(MATMUL_SHAPES[kind], e.shapes):
        for n, v in zip(names, shape):
            if dims.setdefault(n, v) != v:
                raise ValueError(f"dimension {n} is {dims[n]} and {v}")
    return dims


def _scalar_dims(e: Entry, kind: str) -> dict:
    m, n = _first(e)
    return {"M": m, "N": n, "s": 3.5}


def _loss_dims(e: Entry, kind: str) -> dict:
    b, d = _first(e)
    return {"batch": b, "dim": d, **({"margin": 1.0} if kind == "TripletMarginLoss" else {})}


def _pool_dims(e: Entry, kind: str) -> dict:
    """Kernel, stride, padding (and dilation) solved from the input and output sizes, the
    smallest kernel first, within the zoo's ranges."""
    a, out = _first(e), _output(e)
    n = len(a) - 2
    has_dilation = kind.startswith("Max")
    for k in (2, 3, 4, 5, 6, 7):
        for stride in ((k,) if kind == "Average_Pooling_2D" else (1, 2, 3, k)):
            for pad in range(0, k // 2 + 1):
                for dil in ((1, 2, 3) if has_dilation else (1,)):
                    sizes = [C.conv_out(s, k, stride, pad, dil) for s in a[2:]]
                    if tuple(sizes) == tuple(out[2:]):
                        d = {"batch": a[0], "channels": a[1], "k": k, "stride": stride,
                             "padding": pad}
                        if has_dilation:
                            d["dilation"] = dil
                        d.update({f"s{i}": a[2 + i] for i in range(n)})
                        return d
    raise ValueError(f"no kernel/stride/padding maps {list(a[2:])} to {list(out[2:])}")


def _solve_conv(sizes, outs, k) -> tuple[int, int]:
    """(stride, padding) taking every input size to its output size with kernel ``k``."""
    for stride in (1, 2, 3):
        for pad in range(0, max(max(k), 2) + 1):
            if all(C.conv_out(s, kk, stride, pad) == o for s, o, kk in zip(sizes, outs, k)):
                return stride, pad
    raise ValueError(f"no stride/padding maps {list(sizes)} to {list(outs)} with kernel {list(k)}")


def _depthwise_dims(e: Entry, kind: str) -> dict:
    a, w, out = e.shapes[0], e.shapes[1], _output(e)
    k = w[2:]
    if len(set(k)) != 1:
        raise ValueError(f"kernel {list(k)} is not square")
    stride, pad = _solve_conv(a[2:], out[2:], k)
    h, wd = a[2:]
    # the separable kind's pointwise convolution has cout + 1 output channels
    cout = out[1] - 1 if kind == "conv_depthwise_separable_2D" else out[1]
    return {"batch": a[0], "cin": a[1], "cout": cout, "size": h, "extra0": 0,
            "extra1": wd - h, "k": k[0], "kextra0": 0, "kextra1": 0, "stride": stride,
            "padding": pad, "dilation": 1, "groups": 1}


def _attention_dims(e: Entry, kind: str) -> dict:
    """Batch, sequence and embedding from the input; key/value width from the k projection;
    the head split (not in the shapes) is our choice: MQA one key/value head of the k width,
    GQA two key/value heads when the width is even, MHA heads of the largest power of two
    up to 8 that divides the embedding."""
    b, t, emb = _first(e)
    style = kind[:3]
    two_d = [s for s in e.shapes[1:] if len(s) == 2]
    kv_width = next((s[0] for s in two_d if s[1] == emb and s[0] not in (emb, 3 * emb)), emb)
    if style == "MHA":
        heads = next(h for h in (8, 4, 2, 1) if emb % h == 0)
        hd, groups = emb // heads, 1
    elif style == "MQA":
        hd, groups = kv_width, 1
        heads = emb // hd
    else:
        groups = 2 if kv_width % 2 == 0 and emb % (kv_width // 2) == 0 else 1
        hd = kv_width // groups
        heads = emb // hd
    if heads * hd != emb:
        raise ValueError(f"embedding {emb} does not split into heads of {hd}")
    out = _output(e)[-1]
    return {"batch": b, "seq": t, "head_dim": hd, "heads": heads, "groups": groups, "out": out}


# ---------------------------------------------------------------- level-2 chains

_CHAINS = {name: (head, steps) for name, head, steps in level2.CHAINS}


def _chain_dims(e: Entry, kind: str, probe: bool = True) -> dict:
    """The chain's dims; a convolution head's stride and padding found by running the chain on
    meta tensors (``probe``; without it the kind's own: only ``is_mapped`` reads those)."""
    head, _ = _CHAINS[kind]
    a = _first(e)
    if head in ("gemm", "gemm_nobias", "gemm_square", "matmulT"):
        weight = next((s for s in e.shapes[1:-1] if len(s) == 2 and s[1] == a[1]), None)
        if weight is None:
            raise ValueError(f"no weight of shape [out, {a[1]}] among the variables")
        return {"batch": a[0], "in_f": a[1], "out": weight[0]}
    weight = next((s for s in e.shapes[1:] if len(s) == len(a) and s[1] == a[1]
                   and s != a), None)
    if weight is None:
        raise ValueError(f"no convolution weight [cout, {a[1]}, ...] among the variables")
    k = weight[2:]
    if len(set(k)) != 1:
        raise ValueError(f"kernel {list(k)} is not cubic/square")
    dims = {"batch": a[0], "cin": a[1], "spatial": list(a[2:]), "cout": weight[0], "k": k[0]}
    # the kind's own stride/padding first, then the smallest that reproduce the listed output
    default = (2, 1) if head == "conv3d_sp" else (1, 0)
    if not probe:
        return {**dims, "stride": default[0], "padding": default[1]}
    options = [default] + [(s, p) for s in (1, 2, 3) for p in range(k[0] + 1)]
    probe = Mapping(e, kind, {}, _chain_make(kind))
    for stride, pad in options:
        trial = {**dims, "stride": stride, "padding": pad}
        try:
            if _meta_shapes(probe, trial)[2] == _output(e):
                return trial
        except Exception:  # noqa: BLE001 -- a stride/padding the chain cannot take
            continue
    return {**dims, "stride": default[0], "padding": default[1]}


def _chain_make(kind: str) -> Callable:
    head, steps = _CHAINS[kind]

    def make(d: dict, dtype):
        if "in_f" in d:
            shape = (d["batch"], d["in_f"])
            h = {"gemm": lambda: C.Gemm(shape, d["out"]),
                 "gemm_nobias": lambda: C.Gemm(shape, d["out"], bias=False),
                 "gemm_square": lambda: C.Gemm(shape, shape[-1]),
                 "matmulT": lambda: C.MatmulT(shape, d["out"])}[head]()
        else:
            shape = (d["batch"], d["cin"]) + tuple(d["spatial"])
            h = C.Conv(shape, d["cout"], d["k"], stride=d["stride"], padding=d["padding"])
        rng = seed_for(kind, *sorted((k, str(v)) for k, v in d.items()))
        m = C.chain(h, steps, dtype, rng, input_shape=shape)
        m.__class__ = type(kind, (C.Chain,), {})
        return m, [Input(shape)]

    return make


# ---------------------------------------------------------------- the table

def _extractor(kind: str) -> tuple[Callable, Callable] | None:
    """(dims from an entry, make) for a zoo kind, or None if no rule reads its dims."""
    if kind in _CHAINS:
        return _chain_dims, _chain_make(kind)
    k = KINDS.get(kind)
    if k is None:
        return None
    if kind in MATMUL_SHAPES:
        return _matmul_dims, k.make
    if kind == "Matrix_scalar_multiplication":
        return _scalar_dims, k.make
    if k.family == "activation" or kind in ("L1Norm", "L2Norm"):
        return _act_dims, k.make
    if k.family == "norm":
        return _img_dims, k.make
    if k.family == "reduction":
        return _reduction_dims, k.make
    if k.family == "loss":
        return _loss_dims, k.make
    if k.family == "pooling":
        return _pool_dims, k.make
    if kind.startswith("conv_depthwise"):
        return _depthwise_dims, k.make
    if k.family == "attention" and kind[:3] in ("MHA", "MQA", "GQA"):
        return _attention_dims, k.make
    return None


UNMAPPABLE = {
    "BMM_InstanceNorm_Sum_ResidualAdd_Multiply":
        "the zoo kind's linear layer has 4*out4 outputs; the listed 497 is not a multiple of 4",
    "conv3d_conv3d_padding":
        "the listed weight [1,4,1,2,2] is not a cubic kernel and 14->8, 2013->2018, 9->9 need "
        "a different stride and padding per dimension; the zoo kind has one of each",
}


def mapping(entry: Entry) -> Mapping | Unmapped:
    """The zoo kind and paper-size dims of ``entry``, or why it cannot be mapped."""
    return _mapping(entry, probe=True)


def is_mapped(entry: Entry) -> bool:
    """Whether ``mapping(entry)`` maps it, decided without building any module: the shape
    checks that can refuse an entry come before the meta-tensor probes (a convolution head's
    stride and padding), which never do."""
    return not isinstance(_mapping(entry, probe=False), Unmapped)


def _mapping(entry: Entry, probe: bool) -> Mapping | Unmapped:
    kind = kind_name(entry.name)
    if not kind:
        return Unmapped(entry, f"no zoo kind named like '{entry.name}'")
    if kind in UNMAPPABLE:
        return Unmapped(entry, f"{kind}: {UNMAPPABLE[kind]}")
    rule = _extractor(kind)
    if rule is None:
        return Unmapped(entry, f"zoo kind {kind} has no rule reading its dimensions from shapes")
    dims_of, make = rule
    names = [n for n, _, _ in entry.variables]
    note = ""
    if len(names) != len(set(names)):
        note = "the list repeats variable names; the first set is used"
        entry = Entry(entry.index, entry.name, _first_set(entry.variables))
    try:
        dims = dims_of(entry, kind) if probe or dims_of is not _chain_dims else \
            _chain_dims(entry, kind, probe=False)
    except (ValueError, StopIteration) as err:
        return Unmapped(entry, f"{kind}: {err or 'the shapes do not fit the kind'}")
    return Mapping(entry, kind, dims, make, note)


def _first_set(variables):
    seen, out = set(), []
    for v in variables:
        if v[0] in seen:
            break
        seen.add(v[0])
        out.append(v)
    return tuple(out)


# ---------------------------------------------------------------- sizes

SPATIAL_KEYS = frozenset({"spatial", "s0", "s1", "s2", "size"})


def scaled(dims: dict, s: float) -> dict:
    """``dims`` with every size-like entry multiplied by ``s`` (at least 1); kernel sizes,
    strides, paddings, dilations, groups and head counts unchanged. A spatial size never
    drops below ``min(its value, 2*kernel + 2)``, so the convolution or pooling and the
    pooling after it still apply."""
    floor = 2 * dims["k"] + 2 if isinstance(dims.get("k"), int) else 1

    def one(key, v):
        low = min(v, floor) if key in SPATIAL_KEYS else 1
        return max(low, round(v * s))

    out = {}
    for k, v in dims.items():
        if k in SCALED_KEYS and isinstance(v, int):
            out[k] = one(k, v)
        elif k in SCALED_KEYS and isinstance(v, list):
            out[k] = [one(k, x) for x in v]
        else:
            out[k] = v
    if "extra1" in out and "size" in dims:   # asymmetric inputs keep their aspect ratio
        out["extra1"] = one("size", dims["size"] + dims["extra1"]) - out["size"]
    return out


def _meta_shapes(m: Mapping, dims: dict) -> tuple[list, list, tuple]:
    """(forward input shapes, parameter shapes, output shape) of the module, on meta tensors."""
    dtype = DTYPES[m.entry.dtype]
    with torch.device("meta"):
        module, plan = m.make(dims, dtype)
        module = module.to(dtype)
        xs = [torch.empty(p.shape, dtype=_input_dtype(p, dtype)) for p in plan]
        module.train(_trains(m.kind))
        try:
            with torch.no_grad():
                y = module(*xs)
        except RuntimeError:  # e.g. .item() on a meta tensor: run a real copy if it is small
            if max(math.prod(p.shape) for p in plan) > 1 << 24:
                raise
            y = None
    if y is None:
        module, plan = m.make(dims, dtype)
        module = module.to(dtype).train(_trains(m.kind))
        with torch.no_grad():
            y = module(*[torch.zeros(p.shape, dtype=_input_dtype(p, dtype)) for p in plan])
    params = [tuple(p.shape) for p in module.parameters()]
    return [tuple(p.shape) for p in plan], params, tuple(y.shape)


def _input_dtype(p: Input, dtype):
    return torch.int64 if p.kind == "labels" else torch.bool if p.kind == "mask" else dtype


def _trains(kind: str) -> bool:
    """BatchNorm kinds run with batch statistics (as the zoo and the reference do)."""
    if kind in KINDS:
        return KINDS[kind].train
    return any("BatchNorm" in str(s) for s in _CHAINS.get(kind, ("", []))[1])


def largest_tensor(m: Mapping, dims: dict) -> int:
    ins, params, out = _meta_shapes(m, dims)
    return max(math.prod(s) for s in ins + params + [out])


@lru_cache(maxsize=None)
def _cpu_factor(index: int, path: str | None) -> float:
    m = mapping(next(e for e in load(path) if e.index == index))
    lo, hi = 0.0, 1.0
    if largest_tensor(m, m.dims) <= CPU_MAX_ELEMENTS:
        return 1.0
    for _ in range(24):
        mid = (lo + hi) / 2
        try:
            ok = largest_tensor(m, scaled(m.dims, mid)) <= CPU_MAX_ELEMENTS
        except Exception:  # noqa: BLE001 -- a scale the module cannot take: go smaller
            ok = False
        lo, hi = (mid, hi) if ok else (lo, mid)
    # meta tensors do not check that a kernel fits its input: grow until a real run works
    if not _runs(m, scaled(m.dims, lo)):
        raise ValueError(f"workload {index} does not run at its CPU size")
    return lo


def _runs(m: Mapping, dims: dict) -> bool:
    """Whether the module runs on real (zero) inputs of these dims."""
    dtype = DTYPES[m.entry.dtype]
    try:
        module, plan = m.make(dims, dtype)
        module = module.to(dtype).train(_trains(m.kind))
        with torch.no_grad():
            module(*[torch.zeros(p.shape, dtype=_input_dtype(p, dtype)) for p in plan])
        return True
    except Exception:  # noqa: BLE001 -- any failure means "not at this size"
        return False


def dims_for(m: Mapping, size: str = "cpu", path: str | None = None) -> dict:
    """The dims at ``size`` (``paper``: as listed; ``cpu``: scaled, module docstring)."""
    if size == "paper":
        return dict(m.dims)
    if size != "cpu":
        raise ValueError(f"size {size!r}: use 'paper' or 'cpu'")
    return scaled(m.dims, _cpu_factor(m.entry.index, None if path is None else str(path)))


def shape_match(m: Mapping, dims: dict | None = None) -> str:
    """How the built module's tensors compare with the listed ones at the paper's shapes:
    ``exact`` (the same multiset of shapes, parameters included), ``io`` (forward inputs and
    the output are listed; parameters differ), or what differs."""
    ins, params, out = _meta_shapes(m, dims or m.dims)
    listed = sorted(m.entry.shapes)
    ours = sorted(ins + params + [out])
    if ours == listed:
        return "exact"
    missing = [s for s in ins + [out] if s not in listed]
    if not missing:
        return "io"
    return "differs: " + ", ".join(str(list(s)) for s in missing) + " not listed"


def instantiate(entry: Entry | int, size: str = "cpu", seed: int = 0, path: str | None = None):
    """``(module, example_inputs, meta)`` of a mapped entry (``entry`` or its index).

    ``paper`` inputs live on the meta device (translation only needs shapes); ``cpu`` inputs
    are real, drawn from ``seed``. Raises ``KeyError`` for an unmapped entry, with the reason.
    """
    if isinstance(entry, int):
        entry = next(e for e in load(path) if e.index == entry)
    m = mapping(entry)
    if isinstance(m, Unmapped):
        raise KeyError(f"workload {entry.index} ({entry.name}) is not mapped: {m.reason}")
    dims = dims_for(m, size, path)
    dtype = DTYPES[entry.dtype]
    kind = Kind(m.kind, "steptp", 2, m.make, train=_trains(m.kind))
    module, plan = build(kind, dims, dtype, int(seed_for(seed, m.kind, size).integers(2**31)))
    if size == "paper":
        inputs = [torch.empty(p.shape, dtype=_input_dtype(p, dtype), device="meta")
                  for p in plan]
    else:
        inputs = make_inputs(plan, dtype, int(seed_for(seed, "inputs", m.kind).integers(2**31)))
    meta = {"index": entry.index, "name": entry.name, "kind": m.kind, "size": size,
            "dims": dims, "dtype": entry.dtype, "note": m.note}
    return module, inputs, meta


def program(entry: Entry | int, size: str = "cpu", seed: int = 0, path: str | None = None):
    """The LEIR Program of a mapped entry (translated by the frontend), named after it."""
    from ..frontend import from_torch
    module, inputs, meta = instantiate(entry, size, seed, path)
    p = from_torch(module, inputs, name=meta["kind"])
    return p


def report(path: str | None = None) -> list[dict[str, Any]]:
    """One row per entry: kind, match with the listed shapes, cpu dims, or why unmapped."""
    rows = []
    for e in load(path):
        m = mapping(e)
        if isinstance(m, Unmapped):
            rows.append({"index": e.index, "name": e.name, "kind": None, "match": None,
                         "reason": m.reason})
            continue
        try:
            match = shape_match(m)
        except Exception as err:  # noqa: BLE001 -- reported, not raised
            match = f"differs: {type(err).__name__}: {err}"
        rows.append({"index": e.index, "name": e.name, "kind": m.kind, "match": match,
                     "note": m.note, "dims": m.dims})
    return rows


__all__ = ["Entry", "Mapping", "Unmapped", "load", "mapping", "is_mapped", "instantiate", "program",
           "report", "shape_match", "dims_for", "scaled", "CPU_MAX_ELEMENTS"]
