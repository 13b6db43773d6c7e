"""Signatures: which tensors a LEIR text reads and writes, in call order, with dtype and shape.

JSON form (docs/LEIR.md section 2)::

    {"inputs":  [{"name": "A", "dtype": "float32", "shape": [16, 32]}],
     "outputs": [{"name": "D", "dtype": "float32", "shape": [16, 32]}]}
"""

from __future__ import annotations

import json
import numbers
import re
from dataclasses import dataclass
from typing import Any, Iterable

_SHORT = re.compile(r"([A-Z][a-z]*):([a-z0-9]+)\[([\d,\s]*)\]")

# LEIR dtype code <-> NumPy dtype name.
DTYPE_NAMES = {
    "f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool",
}
DTYPE_CODES_BY_NAME = {name: code for code, name in DTYPE_NAMES.items()}


def dtype_name(code: str) -> str:
    """``f32`` -> ``float32``."""
    return DTYPE_NAMES[code]


def dtype_bytes(code: str) -> int:
    """Bytes of one element: ``f32`` -> 4 (``bf16``, which NumPy does not know: 2)."""
    import numpy as np
    return 2 if code == "bf16" else np.dtype(dtype_name(code)).itemsize


def dtype_code(name: str) -> str:
    """``float32`` (or ``torch.float32``) -> ``f32``."""
    name = name.removeprefix("torch.")
    if name not in DTYPE_CODES_BY_NAME:
        raise ValueError(f"unsupported dtype '{name}'; supported: {', '.join(DTYPE_CODES_BY_NAME)}")
    return DTYPE_CODES_BY_NAME[name]


def is_float(code: str) -> bool:
    return code in ("f16", "f32", "f64", "bf16")


def _shape(name: str, shape) -> tuple[int, ...]:
    """``shape`` as a tuple of ints, each at least 1 (a LEIR loop runs at least once, so a
    zero-size dimension can be neither written nor read; a fractional size is a mistake)."""
    dims = tuple(shape)
    for i, d in enumerate(dims):
        if isinstance(d, bool) or not isinstance(d, numbers.Integral):
            raise ValueError(f"tensor '{name}': shape {list(dims)}: size {d!r} of dimension {i} "
                             "is not an integer")
        if d < 1:
            raise ValueError(f"tensor '{name}': shape {list(dims)}: size {d} of dimension {i} "
                             "must be at least 1")
    return tuple(int(d) for d in dims)


@dataclass(frozen=True)
class TensorSpec:
    """One known tensor: name, NumPy dtype name, shape (``()`` for a 0-d scalar)."""
    name: str
    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self):
        try:
            dtype_code(self.dtype)
        except ValueError as err:
            raise ValueError(f"tensor '{self.name}': {err}") from None
        object.__setattr__(self, "shape", _shape(self.name, self.shape))

    @property
    def code(self) -> str:
        return dtype_code(self.dtype)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "TensorSpec":
        if not isinstance(d, dict):
            raise ValueError(f"a tensor entry is an object with name, dtype and shape, not {d!r}")
        try:
            name, dtype, shape = d["name"], d["dtype"], d["shape"]
        except KeyError as missing:
            raise ValueError(f"tensor entry {d!r} lacks the key {missing}") from None
        if not isinstance(name, str) or not re.fullmatch(r"[A-Z][a-z]*", name):
            raise ValueError(f"tensor name {name!r} is not a LEIR tensor name (a capital "
                             "letter and lowercase letters, e.g. A or Wq)")
        if not isinstance(shape, (list, tuple)):
            raise ValueError(f"tensor '{name}': shape must be a list of sizes, not {shape!r}")
        return TensorSpec(name, str(dtype), tuple(shape))


@dataclass(frozen=True)
class Signature:
    """Ordered inputs (forward inputs, then constants, then parameters) and outputs."""
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        names = [t.name for t in self.inputs + self.outputs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"signature lists {', '.join(duplicates)} more than once")
        if not self.outputs:
            raise ValueError("signature has no outputs")

    @property
    def tensors(self) -> tuple[TensorSpec, ...]:
        return self.inputs + self.outputs

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tensors)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.outputs)

    def spec(self, name: str) -> TensorSpec | None:
        return next((t for t in self.tensors if t.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"inputs": [t.to_dict() for t in self.inputs],
                "outputs": [t.to_dict() for t in self.outputs]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Signature":
        if (not isinstance(d, dict) or not isinstance(d.get("inputs"), (list, tuple))
                or not isinstance(d.get("outputs"), (list, tuple))):
            raise ValueError("a signature is an object with 'inputs' and 'outputs' lists")
        return Signature(tuple(TensorSpec.from_dict(t) for t in d["inputs"]),
                         tuple(TensorSpec.from_dict(t) for t in d["outputs"]))

    @staticmethod
    def from_json(text: str) -> "Signature":
        return Signature.from_dict(json.loads(text))

    @staticmethod
    def from_short(text: str) -> "Signature":
        """The compact form used in rule files and docs: ``"A:f32[16,32] C:f32[32] -> D:f32[16]"``
        (dtype codes or NumPy names; ``[]`` for a scalar)."""
        def specs(part: str) -> tuple[TensorSpec, ...]:
            out = []
            for item in part.split():
                m = _SHORT.fullmatch(item)
                if not m:
                    raise ValueError(f"bad tensor '{item}' in signature '{text}'; "
                                     "expected NAME:DTYPE[d0,d1,...]")
                name, dtype, dims = m.groups()
                shape = tuple(int(d) for d in dims.split(",") if d.strip())
                out.append(TensorSpec(name, DTYPE_NAMES.get(dtype, dtype), shape))
            return tuple(out)

        if "->" not in text:
            raise ValueError(f"signature '{text}' needs '->' between inputs and outputs")
        ins, outs = text.split("->", 1)
        return Signature(specs(ins), specs(outs))

    def to_short(self) -> str:
        def specs(ts):
            return " ".join(f"{t.name}:{t.code}[{','.join(map(str, t.shape))}]" for t in ts)
        return f"{specs(self.inputs)} -> {specs(self.outputs)}"

    @staticmethod
    def of(inputs: Iterable[tuple[str, str, Iterable[int]]],
           outputs: Iterable[tuple[str, str, Iterable[int]]]) -> "Signature":
        """Build from ``(name, dtype, shape)`` triples; dtype may be a code (``f32``) or a name."""
        def spec(name, dtype, shape):
            return TensorSpec(name, DTYPE_NAMES.get(dtype, dtype), tuple(shape))
        return Signature(tuple(spec(*t) for t in inputs), tuple(spec(*t) for t in outputs))
