"""Building blocks of level-2 programs: a head op (GEMM, matmul, convolution, transposed
convolution) followed by a chain of steps (activations, bias/scale/divide, clamps, norms,
pooling, reductions, residual adds).

Each step is a small ``nn.Module`` written the way KernelBench writes it (``x = x / self.divisor``,
``torch.min(x, dim=1, keepdim=True)[0]``), so tracing it exercises the same torch.fx nodes.
``STEPS[name](shape, dtype, rng)`` builds a step for an input of ``shape``; ``step.out_shape``
is its output shape and ``accepts(name, shape)`` says whether it applies.

    Chain(Gemm(8, 16), [steps "swish", "divide", "clamp", "tanh", "clamp"])
      -> forward: x = gemm(x); x = x*sigmoid(x); x = x/2.0; x = clamp(x,-1,1); ...
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Step(nn.Module):
    """A chain step: ``forward(x, saved)`` where ``saved`` is ``(input, head output)``."""

    out_shape: tuple[int, ...]

    def __init__(self, shape):
        super().__init__()
        self.out_shape = tuple(shape)


# ---------------------------------------------------------------- heads

class Gemm(Step):
    def __init__(self, shape, out_features, bias=True):
        super().__init__(shape[:-1] + (out_features,))
        self.gemm = nn.Linear(shape[-1], out_features, bias=bias)

    def forward(self, x, saved=None):
        return self.gemm(x)


class MatmulT(Step):
    """``torch.matmul(x, self.weight.T)`` with a raw weight parameter."""

    def __init__(self, shape, out_features):
        super().__init__(shape[:-1] + (out_features,))
        self.weight = nn.Parameter(torch.randn(out_features, shape[-1]) / math.sqrt(shape[-1]))

    def forward(self, x, saved=None):
        return torch.matmul(x, self.weight.T)


def conv_out(size, k, stride=1, padding=0, dilation=1):
    return (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1


class Conv(Step):
    def __init__(self, shape, out_channels, kernel, stride=1, padding=0, bias=False, groups=1):
        n = len(shape) - 2
        spatial = tuple(conv_out(s, kernel, stride, padding) for s in shape[2:])
        super().__init__((shape[0], out_channels) + spatial)
        cls = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[n]
        self.conv = cls(shape[1], out_channels, kernel, stride=stride, padding=padding, bias=bias,
                        groups=groups)

    def forward(self, x, saved=None):
        return self.conv(x)


class ConvTranspose(Step):
    def __init__(self, shape, out_channels, kernel, stride=1, padding=0, output_padding=0,
                 bias=False):
        n = len(shape) - 2
        spatial = tuple((s - 1) * stride - 2 * padding + (kernel - 1) + output_padding + 1
                        for s in shape[2:])
        super().__init__((shape[0], out_channels) + spatial)
        cls = {1: nn.ConvTranspose1d, 2: nn.ConvTranspose2d, 3: nn.ConvTranspose3d}[n]
        self.conv_transpose = cls(shape[1], out_channels, kernel, stride=stride, padding=padding,
                                  output_padding=output_padding, bias=bias)

    def forward(self, x, saved=None):
        return self.conv_transpose(x)


# ---------------------------------------------------------------- element-wise steps

class Fn(Step):
    """A shape-preserving function of x."""

    def __init__(self, shape, fn: Callable):
        super().__init__(shape)
        self.fn = fn

    def forward(self, x, saved=None):
        return self.fn(x)


def _channel_shape(shape):
    """Broadcast shape of a per-channel parameter: (C,1,1) for images, (F,) for features."""
    return (shape[1],) + (1,) * (len(shape) - 2) if len(shape) > 2 else (shape[-1],)


class ParamOp(Step):
    """``x (+|-|*) self.param`` with a per-channel parameter (KernelBench's bias/scale)."""

    def __init__(self, shape, op, init="randn"):
        super().__init__(shape)
        pshape = _channel_shape(shape)
        value = torch.randn(pshape) if init == "randn" else torch.ones(pshape)
        self.param = nn.Parameter(value)
        self.op = op

    def forward(self, x, saved=None):
        if self.op == "+":
            return x + self.param
        if self.op == "-":
            return x - self.param
        return x * self.param


class ConstOp(Step):
    """``x (op) self.value`` with a 0-d constant tensor attribute (KernelBench's divisor)."""

    def __init__(self, shape, op, value, dtype):
        super().__init__(shape)
        self.value = torch.tensor(value, dtype=dtype)
        self.op = op

    def forward(self, x, saved=None):
        if self.op == "+":
            return x + self.value
        if self.op == "-":
            return x - self.value
        if self.op == "*":
            return x * self.value
        if self.op == "/":
            return x / self.value
        return torch.min(x, self.value)


class Clamp(Step):
    def __init__(self, shape, lo, hi):
        super().__init__(shape)
        self.lo, self.hi = lo, hi

    def forward(self, x, saved=None):
        return torch.clamp(x, min=self.lo, max=self.hi)


class ResidualAdd(Step):
    """``x + head`` (the GEMM/conv output) when shapes agree, else ``x + x``."""

    def __init__(self, shape, head_shape):
        super().__init__(shape)
        self.use_head = tuple(shape) == tuple(head_shape)

    def forward(self, x, saved=None):
        return x + saved[1] if self.use_head else x + x


# ---------------------------------------------------------------- norms

class Norm(Step):
    def __init__(self, shape, kind, groups=1):
        super().__init__(shape)
        c = shape[1]
        rank = len(shape)
        if kind == "batch":
            self.norm = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d,
                         5: nn.BatchNorm3d}[rank](c)
        elif kind == "group":
            self.norm = nn.GroupNorm(groups, c)
        elif kind == "instance":
            self.norm = {3: nn.InstanceNorm1d, 4: nn.InstanceNorm2d,
                         5: nn.InstanceNorm3d}[rank](c, affine=True)
        else:
            self.norm = nn.LayerNorm(shape[-1])
        with torch.no_grad():  # non-trivial affine parameters; a bias centred on a small
            # positive value keeps a following mean + ReLU from zeroing every row
            for name, p in self.norm.named_parameters():
                if name == "weight":
                    p.add_(0.1 * torch.randn_like(p))
                else:
                    p.add_(0.5 + 0.5 * torch.randn_like(p))

    def forward(self, x, saved=None):
        return self.norm(x)


# ---------------------------------------------------------------- shape-changing steps

class Pool(Step):
    def __init__(self, shape, kind, k):
        n = len(shape) - 2
        self.flat = n == 0  # a feature vector: pool along the features as a 1-d signal
        if self.flat:
            out = shape[:-1] + (shape[-1] // k,)
        else:
            out = shape[:2] + tuple(s // k for s in shape[2:])
        super().__init__(out)
        cls = {"max": (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d),
               "avg": (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)}[kind]
        self.pool = cls[max(n, 1) - 1](k)

    def forward(self, x, saved=None):
        if self.flat:
            return self.pool(x.unsqueeze(1)).squeeze(1)
        return self.pool(x)


class GlobalAvgPool(Step):
    def __init__(self, shape):
        super().__init__(shape[:2] + (1,) * (len(shape) - 2))
        self.dims = tuple(range(2, len(shape)))

    def forward(self, x, saved=None):
        return torch.mean(x, dim=self.dims, keepdim=True)


class Reduce(Step):
    """``torch.<kind>(x, dim, keepdim)``; ``dim`` may be a tuple (sum and mean only)."""

    def __init__(self, shape, kind, dim=1, keepdim=True):
        dims = [d % len(shape) for d in (dim if isinstance(dim, (tuple, list)) else [dim])]
        out = [1 if k in dims else s for k, s in enumerate(shape)
               if keepdim or k not in dims]
        super().__init__(tuple(out))
        self.kind, self.keepdim = kind, keepdim
        self.dim = tuple(dim) if isinstance(dim, (tuple, list)) else dim

    def forward(self, x, saved=None):
        if self.kind == "sum":
            return torch.sum(x, dim=self.dim, keepdim=self.keepdim)
        if self.kind == "mean":
            return torch.mean(x, dim=self.dim, keepdim=self.keepdim)
        if self.kind == "max":
            return torch.max(x, dim=self.dim, keepdim=self.keepdim)[0]
        if self.kind == "min":
            return torch.min(x, dim=self.dim, keepdim=self.keepdim)[0]
        return torch.logsumexp(x, dim=self.dim, keepdim=self.keepdim)


class Softmax(Step):
    def __init__(self, shape, dim=1, log=False):
        super().__init__(shape)
        self.dim, self.log = dim, log

    def forward(self, x, saved=None):
        return torch.log_softmax(x, dim=self.dim) if self.log else torch.softmax(x, dim=self.dim)


class SubtractMean(Step):
    """``x - x.mean(dim=1, keepdim=True)``."""

    def forward(self, x, saved=None):
        return x - x.mean(dim=1, keepdim=True)


class SubtractSpatialMean(Step):
    """``x - torch.mean(x, dim=(2, ...), keepdim=True)``."""

    def forward(self, x, saved=None):
        return x - torch.mean(x, dim=tuple(range(2, x.dim())), keepdim=True)


class ResidualInput(Step):
    """``x + original_x`` (the forward input), broadcasting."""

    def __init__(self, shape, input_shape):
        super().__init__(tuple(torch.broadcast_shapes(shape, input_shape)))

    def forward(self, x, saved=None):
        return x + saved[0]


class SqueezeSpatial(Step):
    """``x.squeeze(-1).squeeze(-1)`` after a global pool."""

    def __init__(self, shape):
        out = list(shape)
        while len(out) > 2 and out[-1] == 1:
            out.pop()
        super().__init__(tuple(out))
        self.n = len(shape) - len(out)

    def forward(self, x, saved=None):
        for _ in range(self.n):
            x = x.squeeze(-1)
        return x


class ClampItem(Step):
    """``torch.clamp(x, self.lo.item(), self.hi.item())`` with 0-d tensor bounds."""

    def __init__(self, shape, lo, hi, dtype):
        super().__init__(shape)
        self.lo = torch.tensor(lo, dtype=dtype)
        self.hi = torch.tensor(hi, dtype=dtype)

    def forward(self, x, saved=None):
        return torch.clamp(x, self.lo.item(), self.hi.item())


# ---------------------------------------------------------------- the step table

def _act(fn):
    return lambda shape, dtype, rng: Fn(shape, fn)


def _swish(x):
    return x * torch.sigmoid(x)


def _manual_hardswish(x):
    return x * torch.clamp((x + 3) / 6, 0, 1)


def _softplus_tanh(x):
    return torch.multiply(torch.tanh(F.softplus(x)), x)


def _value(rng, lo, hi):
    return round(float(rng.uniform(lo, hi)), 3)


STEPS: dict[str, Callable] = {
    "ReLU": _act(torch.relu),
    "LeakyReLU": lambda s, d, r: Fn(s, nn.LeakyReLU(_value(r, 0.01, 0.3))),
    "GELU": _act(F.gelu),
    "GELUTanh": _act(lambda x: F.gelu(x, approximate="tanh")),
    "Sigmoid": _act(torch.sigmoid),
    "Tanh": _act(torch.tanh),
    "Swish": _act(_swish),
    "Mish": _act(F.mish),
    "HardSwish": _act(F.hardswish),
    "HardSwishManual": _act(_manual_hardswish),
    "Hardtanh": lambda s, d, r: Fn(s, nn.Hardtanh(-_value(r, 0.5, 2.0), _value(r, 0.5, 2.0))),
    "Softplus": _act(F.softplus),
    "SoftplusTanh": _act(_softplus_tanh),
    "ELU": _act(F.elu),
    "SELU": _act(torch.selu),
    "HardSigmoid": _act(F.hardsigmoid),
    "ReLU6": _act(F.relu6),
    "Softsign": _act(F.softsign),
    "Exp": _act(torch.exp),
    "Abs": _act(torch.abs),
    "BiasAdd": lambda s, d, r: ParamOp(s, "+"),
    "Add": lambda s, d, r: ConstOp(s, "+", _value(r, -1.0, 1.0), d),
    "Subtract": lambda s, d, r: ConstOp(s, "-", _value(r, 0.0, 1.0), d),
    "SubtractParam": lambda s, d, r: ParamOp(s, "-"),
    "Multiply": lambda s, d, r: ParamOp(s, "*"),
    "Scale": lambda s, d, r: ConstOp(s, "*", _value(r, 0.1, 3.0), d),
    "ScaleParam": lambda s, d, r: ParamOp(s, "*", init="ones"),
    "Divide": lambda s, d, r: ConstOp(s, "/", _value(r, 1.0, 4.0), d),
    "MinConst": lambda s, d, r: ConstOp(s, "min", _value(r, 0.0, 1.0), d),
    "Clamp": lambda s, d, r: Clamp(s, -_value(r, 0.5, 1.5), _value(r, 0.5, 1.5)),
    "ResidualAdd": lambda s, d, r, head=None: ResidualAdd(s, head or s),
    "BatchNorm": lambda s, d, r: Norm(s, "batch"),
    "GroupNorm": lambda s, d, r: Norm(s, "group", _groups(s[1], r)),
    "InstanceNorm": lambda s, d, r: Norm(s, "instance"),
    "LayerNorm": lambda s, d, r: Norm(s, "layer"),
    "MaxPool": lambda s, d, r: Pool(s, "max", 2),
    "AvgPool": lambda s, d, r: Pool(s, "avg", 2),
    "GlobalAvgPool": lambda s, d, r: GlobalAvgPool(s),
    "Sum": lambda s, d, r: Reduce(s, "sum"),
    "Mean": lambda s, d, r: Reduce(s, "mean"),
    "Max": lambda s, d, r: Reduce(s, "max"),
    "Min": lambda s, d, r: Reduce(s, "min"),
    "LogSumExp": lambda s, d, r: Reduce(s, "logsumexp"),
    "Softmax": lambda s, d, r: Softmax(s),
    "LogSoftmax": lambda s, d, r: Softmax(s, log=True),
    "SubtractMean": lambda s, d, r: SubtractMean(s),
    "SubtractSpatialMean": lambda s, d, r: SubtractSpatialMean(s),
    "Double": _act(lambda x: x + x),
    "MishMul": _act(lambda x: x * F.mish(x)),
    "SqueezeSpatial": lambda s, d, r: SqueezeSpatial(s),
    "ClampItem": lambda s, d, r: ClampItem(s, -_value(r, 0.0, 1.0), _value(r, 0.5, 1.5), d),
    "Dropout": lambda s, d, r: Fn(s, nn.Dropout(0.2)),
}

# Steps that take arguments in a program's definition: ("Reduce", {"kind": "sum", ...}).
PARAMETRIC: dict[str, Callable] = {
    "Reduce": lambda s, d, r, **kw: Reduce(s, **kw),
    "Softmax": lambda s, d, r, **kw: Softmax(s, **kw),
    "LeakyReLU": lambda s, d, r, negative_slope: Fn(s, nn.LeakyReLU(negative_slope)),
    "Clamp": lambda s, d, r, lo, hi: Clamp(s, lo, hi),
    "Divide": lambda s, d, r, value: ConstOp(s, "/", value, d),
    "Scale": lambda s, d, r, value: ConstOp(s, "*", value, d),
}

ACTIVATIONS = ["ReLU", "LeakyReLU", "GELU", "GELUTanh", "Sigmoid", "Tanh", "Swish", "Mish",
               "HardSwish", "Hardtanh", "Softplus", "ELU", "SELU", "HardSigmoid", "ReLU6",
               "Softsign"]
ARITHMETIC = ["BiasAdd", "Add", "Subtract", "SubtractParam", "Multiply", "Scale", "Divide",
              "MinConst", "Clamp", "ResidualAdd"]
NORMS = ["BatchNorm", "GroupNorm", "InstanceNorm", "LayerNorm"]
POOLS = ["MaxPool", "AvgPool", "GlobalAvgPool"]
REDUCTIONS = ["Sum", "Mean", "Max", "Min", "LogSumExp", "Softmax", "LogSoftmax"]


def _groups(channels: int, rng) -> int:
    choices = [g for g in (2, 4, 8) if channels % g == 0] or [1]
    return int(choices[int(rng.integers(len(choices)))])


def accepts(name: str, shape: tuple[int, ...]) -> bool:
    """Whether step ``name`` applies to a tensor of ``shape`` (and leaves a usable one)."""
    rank = len(shape)
    if name in ("MaxPool", "AvgPool"):
        return all(s >= 2 for s in (shape[2:] if rank > 2 else shape[-1:]))
    if name == "GlobalAvgPool":
        return rank > 2
    if name in ("InstanceNorm",):
        return rank > 2 and math.prod(shape[2:]) > 1
    if name == "BatchNorm":
        return rank >= 2 and shape[0] * math.prod(shape[2:]) > 1
    if name == "GroupNorm":
        return rank >= 2
    if name == "LayerNorm":
        return shape[-1] > 1
    if name in REDUCTIONS:
        return rank >= 2 and shape[1] > 1
    return True


class Chain(nn.Module):
    """A head op and its steps; ``forward(x, *extra)`` applies them in order."""

    def __init__(self, head: Step, steps: list[Step]):
        super().__init__()
        self.head = head
        self.steps = nn.ModuleList(steps)

    def forward(self, x):
        h = self.head(x)
        y = h
        for step in self.steps:
            y = step(y, (x, h))
        return y


def chain(head: Step, names: list, dtype, rng: np.random.Generator,
          input_shape: tuple[int, ...] = ()) -> Chain:
    """Build the steps ``names`` (a name, or ``(name, kwargs)``) after ``head``, threading
    shapes through."""
    steps, shape = [], head.out_shape
    for name in names:
        if isinstance(name, tuple):
            step = PARAMETRIC[name[0]](shape, dtype, rng, **name[1])
        elif name == "ResidualAdd":
            step = ResidualAdd(shape, head.out_shape)
        elif name == "ResidualInput":
            step = ResidualInput(shape, input_shape)
        else:
            step = STEPS[name](shape, dtype, rng)
        steps.append(step)
        shape = step.out_shape
    return Chain(head, steps)
