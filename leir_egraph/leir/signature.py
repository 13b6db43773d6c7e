"""Signatures: which tensors a LEIR text reads and writes, in call order, with dtype and shape.

JSON form (docs/LEIR.md section 2)::

    {"inputs":  [{"name": "A", "dtype": "float32", "shape": [16, 32]}],
     "outputs": [{"name": "D", "dtype": "float32", "shape": [16, 32]}]}
"""

from __future__ import annotations

import json
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


def dtype_code(name: str) -> str:
    """``float32`` (or ``torch.float32``) -> ``f32``."""
    name = name.removeprefix("torch.")
    if name not in DTYPE_CODES_BY_NAME:
        raise ValueError(f"unsupported dtype '{name}'; supported: {', '.join(DTYPE_CODES_BY_NAME)}")
    return DTYPE_CODES_BY_NAME[name]


def is_float(code: str) -> bool:
    return code in ("f16", "f32", "f64", "bf16")


@dataclass(frozen=True)
class TensorSpec:
    """One known tensor: name, NumPy dtype name, shape (``()`` for a 0-d scalar)."""
    name: str
    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self):
        dtype_code(self.dtype)  # validates
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    @property
    def code(self) -> str:
        return dtype_code(self.dtype)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "TensorSpec":
        try:
            return TensorSpec(str(d["name"]), str(d["dtype"]), tuple(d["shape"]))
        except KeyError as missing:
            raise ValueError(f"tensor entry {d!r} lacks the key {missing}") from None


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
        if not isinstance(d, dict) or "inputs" not in d or "outputs" not in d:
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
