"""Level-1 program types: single operators, as in KernelBench level 1 (matmuls, activations,
norms, pooling, reductions, scans, convolutions, transposed convolutions, losses, attention).

Each kind is a ``make(dims, dtype) -> (module, inputs)``; ``small`` ranges keep CPU
verification fast, ``paper`` ranges follow the Step-TP model collection (dims up to 16,384).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .registry import Input, kind


def model(name: str, fn, arity: int = 1, **members) -> nn.Module:
    """A module class named ``name`` whose forward is ``fn(self, *inputs)`` (``arity`` inputs);
    ``members`` become attributes (submodules, parameters, constants)."""
    if arity == 1:
        def forward(self, x):
            return fn(self, x)
    elif arity == 2:
        def forward(self, a, b):
            return fn(self, a, b)
    else:
        def forward(self, a, b, c):
            return fn(self, a, b, c)
    cls = type(name, (nn.Module,), {"forward": forward})
    m = cls()
    for k, v in members.items():
        setattr(m, k, v)
    return m


ACT_SMALL = {"batch": (2, 4), "dim": (8, 64)}
ACT_PAPER = {"batch": (1, 1024), "dim": [16384]}


# ---------------------------------------------------------------- matrix products

def _mm(name, small, paper, shapes, fn, family="matmul", kinds=None):
    def make(d, dtype):
        plan = [Input(tuple(d[k] for k in shape), (kinds or {}).get(i, "randn"))
                for i, shape in enumerate(shapes)]
        return model(name, fn, len(shapes)), plan
    kind(name, family, 1, small, paper)(make)


_mm("Square_matrix_multiplication", {"N": (4, 16)}, {"N": (1, 2048)}, [("N", "N"), ("N", "N")],
    lambda s, a, b: torch.matmul(a, b))
_mm("Standard_matrix_multiplication", {"M": (2, 12), "K": (2, 12), "N": (2, 12)},
    {"M": (1, 1024), "K": (1, 4096), "N": (1, 4096)}, [("M", "K"), ("K", "N")],
    lambda s, a, b: torch.matmul(a, b))
_mm("Batched_matrix_multiplication", {"B": (2, 3), "M": (2, 8), "K": (2, 8), "N": (2, 8)},
    {"B": (1, 1024), "M": (1, 4096), "K": (1, 4096), "N": (1, 4096)},
    [("B", "M", "K"), ("B", "K", "N")], lambda s, a, b: torch.bmm(a, b))
_mm("Matrix_vector_multiplication", {"M": (2, 16), "K": (4, 32), "one": 1},
    {"M": (1, 1024), "K": (1, 16384), "one": 1}, [("M", "K"), ("K", "one")],
    lambda s, a, b: torch.matmul(a, b))
_mm("Matmul_with_large_K_dimension", {"M": (2, 6), "N": (2, 6), "K": (64, 256)},
    {"M": (1, 1024), "N": (1, 4096), "K": (4096, 16384)}, [("M", "K"), ("K", "N")],
    lambda s, a, b: torch.matmul(a, b))
_mm("Matmul_with_small_K_dimension", {"M": (8, 24), "N": (8, 24), "K": (1, 3)},
    {"M": (8, 1024), "N": (128, 4096), "K": (8, 128)}, [("M", "K"), ("K", "N")],
    lambda s, a, b: torch.matmul(a, b))
_mm("Matmul_with_irregular_shapes", {"M": [3, 5, 7, 11], "K": [5, 9, 13], "N": [2, 7, 10]},
    {"M": (1, 1024), "K": (1, 4096), "N": (1, 4096)}, [("M", "K"), ("K", "N")],
    lambda s, a, b: torch.matmul(a, b))
_mm("Tall_skinny_matrix_multiplication", {"M": (16, 32), "N": (1, 4)},
    {"M": (1, 16384), "N": (1, 64)}, [("M", "N"), ("N", "M")],
    lambda s, a, b: torch.matmul(a, b))
_mm("Matmul3D", {"N": (2, 3), "M": (2, 6), "K": (2, 6), "L": (2, 6)},
    {"N": (1, 1024), "M": (1, 4096), "K": (1, 4096), "L": (1, 4096)},
    [("N", "M", "K"), ("K", "L")], lambda s, a, b: torch.matmul(a, b))
_mm("Matmul4D", {"b": (1, 2), "i": (2, 4), "j": (2, 4), "l": (2, 6), "k": (2, 6)},
    {"b": (1, 64), "i": (1, 2048), "j": (1, 2048), "l": (1, 2048), "k": (1, 2048)},
    [("b", "i", "j", "l"), ("l", "k")], lambda s, a, b: torch.einsum("bijl,lk->bijk", a, b))
_mm("Matmul_with_diagonal_mat", {"N": (2, 12), "M": (2, 12)}, {"N": (1, 4096), "M": (1, 1024)},
    [("N",), ("N", "M")], lambda s, a, b: torch.diag(a) @ b)
_mm("Matmul_for_symmetric_matrices", {"N": (4, 16)}, {"N": (1, 4096)},
    [("N", "N"), ("N", "N")], lambda s, a, b: torch.matmul(a, b),
    kinds={0: "symmetric", 1: "symmetric"})
_mm("Matmul_for_upper_triangular_matrices", {"N": (4, 16)}, {"N": (1, 4096)},
    [("N", "N"), ("N", "N")], lambda s, a, b: torch.triu(torch.matmul(a, b)),
    kinds={0: "upper", 1: "upper"})
_mm("Matmul_for_lower_triangular_matrices", {"N": (4, 16)}, {"N": (1, 4096)},
    [("N", "N"), ("N", "N")],
    lambda s, a, b: torch.tril(torch.matmul(torch.tril(a), torch.tril(b))))
_mm("Matmul_with_transposed_A", {"M": (2, 12), "K": (2, 12), "N": (2, 12)},
    {"M": (1, 1024), "K": (1, 4096), "N": (1, 4096)}, [("K", "M"), ("K", "N")],
    lambda s, a, b: torch.matmul(a.T, b))
_mm("Matmul_with_transposed_B", {"M": (2, 12), "K": (2, 12), "N": (2, 12)},
    {"M": (1, 4096), "K": (1, 4096), "N": (1, 1024)}, [("M", "K"), ("N", "K")],
    lambda s, a, b: torch.matmul(a, b.T))
_mm("Matmul_with_transposed_both", {"M": (2, 12), "K": (2, 12), "N": (2, 12)},
    {"M": (1, 1024), "K": (1, 4096), "N": (1, 1024)}, [("K", "M"), ("N", "K")],
    lambda s, a, b: torch.matmul(a.T, b.T))


@kind("Matrix_scalar_multiplication", "matmul", 1, {"M": (2, 16), "N": (2, 16), "s": (0.1, 10.0)},
      {"M": (8, 16384), "N": (8, 4096), "s": (0.1, 10.0)})
def _scalar(d, dtype):
    """C = A * s for a Python float s."""
    s = d["s"]
    return model("Matrix_scalar_multiplication", lambda self, a: a * s), [Input((d["M"], d["N"]))]


# ---------------------------------------------------------------- activations

def _act(name, fn, small=ACT_SMALL, paper=ACT_PAPER, family="activation", **extra):
    def make(d, dtype):
        return model(name, fn), [Input((d["batch"], d["dim"]))]
    kind(name, family, 1, {**small, **extra}, {**paper, **extra})(make)


_act("ReLU", lambda s, x: torch.relu(x))
_act("Sigmoid", lambda s, x: torch.sigmoid(x))
_act("Tanh", lambda s, x: torch.tanh(x))
_act("softmax", lambda s, x: torch.softmax(x, dim=1))
_act("LogSoftmax", lambda s, x: torch.log_softmax(x, dim=1))
_act("Swish", lambda s, x: x * torch.sigmoid(x))
_act("GELU", lambda s, x: F.gelu(x))
_act("SELU", lambda s, x: torch.selu(x))
_act("HardSigmoid", lambda s, x: F.hardsigmoid(x))
_act("Softplus", lambda s, x: F.softplus(x))
_act("Softsign", lambda s, x: x / (1 + torch.abs(x)))
_act("HardTanh", lambda s, x: F.hardtanh(x, min_val=-1.0, max_val=1.0))
_act("MinGPTNewGelu", lambda s, x: 0.5 * x * (1.0 + torch.tanh(
    math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))))


@kind("LeakyReLU", "activation", 1, {**ACT_SMALL, "slope": (0.01, 0.3)},
      {**ACT_PAPER, "slope": (0.01, 0.3)})
def _leaky(d, dtype):
    slope = d["slope"]
    return (model("LeakyReLU", lambda s, x: F.leaky_relu(x, negative_slope=slope)),
            [Input((d["batch"], d["dim"]))])


@kind("ELU", "activation", 1, {**ACT_SMALL, "alpha": (0.5, 2.0)}, {**ACT_PAPER, "alpha": (0.5, 2.0)})
def _elu(d, dtype):
    alpha = d["alpha"]
    return model("ELU", lambda s, x: F.elu(x, alpha=alpha)), [Input((d["batch"], d["dim"]))]


# ---------------------------------------------------------------- norms

IMG_SMALL = {"batch": (2, 3), "features": (2, 4), "dim1": (2, 6), "dim2": (2, 6)}
IMG_PAPER = {"batch": (1, 64), "features": (1, 256), "dim1": (8, 512), "dim2": (8, 512)}


def _img(d):
    return [Input((d["batch"], d["features"], d["dim1"], d["dim2"]))]


@kind("BatchNorm", "norm", 1, IMG_SMALL, IMG_PAPER, train=True)
def _batch_norm(d, dtype):
    return model("BatchNorm", lambda s, x: s.bn(x), bn=nn.BatchNorm2d(d["features"])), _img(d)


@kind("InstanceNorm", "norm", 1, IMG_SMALL, IMG_PAPER)
def _instance_norm(d, dtype):
    return model("InstanceNorm", lambda s, x: s.inorm(x),
                 inorm=nn.InstanceNorm2d(d["features"], affine=True)), _img(d)


@kind("GroupNorm", "norm", 1, {**IMG_SMALL, "groups": [1, 2], "per_group": (1, 3)},
      {**IMG_PAPER, "groups": [2, 4, 8], "per_group": (1, 64)})
def _group_norm(d, dtype):
    c = d["groups"] * d["per_group"]
    gn = nn.GroupNorm(d["groups"], c)
    with torch.no_grad():
        gn.weight.normal_()
        gn.bias.normal_()
    return (model("GroupNorm", lambda s, x: s.gn(x), gn=gn),
            [Input((d["batch"], c, d["dim1"], d["dim2"]))])


@kind("LayerNorm", "norm", 1, IMG_SMALL, {**IMG_PAPER, "features": (1, 64)})
def _layer_norm(d, dtype):
    ln = nn.LayerNorm((d["features"], d["dim1"], d["dim2"]))
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    return model("LayerNorm", lambda s, x: s.ln(x), ln=ln), _img(d)


@kind("RMSNorm", "norm", 1, {**IMG_SMALL, "eps": (1e-6, 1e-3)}, {**IMG_PAPER, "eps": (1e-6, 1e-3)})
def _rms_norm(d, dtype):
    """x / sqrt(mean(x**2, dim=1, keepdim=True) + eps), KernelBench's spelled-out RMSNorm."""
    eps = d["eps"]
    return model("RMSNorm", lambda s, x: x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True)
                                                         + eps)), _img(d)


@kind("FrobeniusNorm", "norm", 1, IMG_SMALL, IMG_PAPER)
def _fro(d, dtype):
    return model("FrobeniusNorm", lambda s, x: x / torch.norm(x, p="fro")), _img(d)


@kind("L1Norm", "norm", 1, ACT_SMALL, ACT_PAPER)
def _l1(d, dtype):
    return (model("L1Norm", lambda s, x: x / torch.sum(torch.abs(x), dim=1, keepdim=True)),
            [Input((d["batch"], d["dim"]))])


@kind("L2Norm", "norm", 1, ACT_SMALL, ACT_PAPER)
def _l2(d, dtype):
    return (model("L2Norm", lambda s, x: x / torch.norm(x, p=2, dim=1, keepdim=True)),
            [Input((d["batch"], d["dim"]))])


# ---------------------------------------------------------------- pooling

def _pool(name, n, cls, small, paper, has_dilation, has_stride=True):
    def make(d, dtype):
        k = d["k"]
        pad = min(d.get("padding", 0), k // 2)
        dil = d.get("dilation", 1) if has_dilation else 1
        stride = d.get("stride", k) if has_stride else k
        need = dil * (k - 1) + 1
        spatial = [max(d[f"s{i}"], need) for i in range(n)]
        kwargs = {"kernel_size": k, "stride": stride, "padding": pad}
        if has_dilation:
            kwargs["dilation"] = dil
        pool = cls(**kwargs)
        return (model(name, lambda s, x: s.pool(x), pool=pool),
                [Input((d["batch"], d["channels"], *spatial))])
    kind(name, "pooling", 1, small, paper)(make)


def _pool_ranges(n, small_size, paper_size, **extra):
    small = {"batch": (1, 2), "channels": (1, 3), **{f"s{i}": small_size for i in range(n)},
             **extra}
    paper = {"batch": (1, 64), "channels": (1, 512), **{f"s{i}": paper_size for i in range(n)},
             **extra}
    return small, paper


_pool("Max_Pooling_1D", 1, nn.MaxPool1d,
      *_pool_ranges(1, (6, 20), (8, 4096), k=(2, 4), stride=(1, 3), padding=(0, 2),
                    dilation=(1, 3)), has_dilation=True)
_pool("Max_Pooling_2D", 2, nn.MaxPool2d,
      *_pool_ranges(2, (5, 10), (8, 1024), k=(2, 3), stride=(1, 2), padding=(0, 1),
                    dilation=(1, 3)), has_dilation=True)
_pool("Max_Pooling_3D", 3, nn.MaxPool3d,
      *_pool_ranges(3, (4, 7), (8, 128), k=(2, 3), stride=(1, 2), padding=(0, 1),
                    dilation=(1, 2)), has_dilation=True)
_pool("Average_Pooling_1D", 1, nn.AvgPool1d,
      *_pool_ranges(1, (6, 20), (64, 4096), k=(2, 4), stride=(1, 3), padding=(0, 2)),
      has_dilation=False)
_pool("Average_Pooling_2D", 2, nn.AvgPool2d, *_pool_ranges(2, (5, 10), (8, 1024), k=(2, 3)),
      has_dilation=False, has_stride=False)
_pool("Average_Pooling_3D", 3, nn.AvgPool3d,
      *_pool_ranges(3, (4, 7), (8, 128), k=(2, 3), stride=(1, 2), padding=(0, 1)),
      has_dilation=False)


# ---------------------------------------------------------------- reductions

RED_SMALL = {"batch": (2, 4), "dim1": (2, 8), "dim2": (2, 8), "dim": [0, 1, 2]}
RED_PAPER = {"batch": (1, 1024), "dim1": (1, 2048), "dim2": (1, 2048), "dim": [0, 1, 2]}


def _reduction(name, fn):
    def make(d, dtype):
        dim = d["dim"]
        return (model(name, lambda s, x: fn(x, dim)),
                [Input((d["batch"], d["dim1"], d["dim2"]))])
    kind(name, "reduction", 1, RED_SMALL, RED_PAPER)(make)


_reduction("Sum_reduction_over_a_dimension", lambda x, d: torch.sum(x, dim=d, keepdim=True))
_reduction("Mean_reduction_over_a_dimension", lambda x, d: torch.mean(x, dim=d))
_reduction("Max_reduction_over_a_dimension", lambda x, d: torch.max(x, dim=d)[0])
_reduction("Min_reduction_over_a_dimension", lambda x, d: torch.min(x, dim=d)[0])
_reduction("Product_reduction_over_a_dimension", lambda x, d: torch.prod(x, dim=d))
_reduction("Argmax_over_a_dimension", lambda x, d: torch.argmax(x, dim=d))
_reduction("Argmin_over_a_dimension", lambda x, d: torch.argmin(x, dim=d))


# ---------------------------------------------------------------- scans

SCAN_SMALL = {"batch": (2, 6), "length": (4, 24), "dim": [0, 1]}
SCAN_PAPER = {"batch": (1, 4096), "length": (1, 4096), "dim": [0, 1]}


def _scan(name, fn, arity=1):
    def make(d, dtype):
        dim = d["dim"]
        shape = (d["batch"], d["length"])
        plan = [Input(shape)] + ([Input(shape, "mask")] if arity == 2 else [])
        return model(name, (lambda s, x: fn(x, dim)) if arity == 1 else
                     (lambda s, x, m: fn(x, m, dim)), arity), plan
    kind(name, "scan", 1, SCAN_SMALL, SCAN_PAPER)(make)


_scan("cumsum", lambda x, d: torch.cumsum(x, dim=d))
_scan("cumprod", lambda x, d: torch.cumprod(x, dim=d))
_scan("cumsum_reverse", lambda x, d: torch.cumsum(x.flip(d), dim=d).flip(d))
_scan("cumsum_exclusive", lambda x, d: torch.cumsum(torch.cat(
    (torch.zeros_like(x.select(d, 0).unsqueeze(d)), x), dim=d)[:-1], dim=d))
_scan("masked_cumsum", lambda x, m, d: torch.cumsum(x * m, dim=d), arity=2)


# ---------------------------------------------------------------- convolutions

def _conv_kind(name, n, *, transposed=False, square_input=True, square_kernel=True,
               depthwise=False, strided=False, padded=False, dilated=False, grouped=False,
               pointwise=False, separable=False, paper_channels=(1, 512), paper_size=(8, 1024)):
    small = {"batch": (1, 2), "cin": (1, 3), "cout": (1, 4), "size": (4, 7) if n < 3 else (3, 5),
             "k": [1, 2, 3], "stride": [1, 2] if strided else [1],
             "padding": [0, 1, 2] if padded else [0], "dilation": [1, 2] if dilated else [1],
             "groups": [2] if grouped else [1]}
    paper = {"batch": (1, 64), "cin": paper_channels, "cout": paper_channels,
             "size": paper_size if n < 3 else (8, 128), "k": [1, 3, 5, 7],
             "stride": [1, 2, 3] if strided else [1], "padding": [0, 1, 2, 3] if padded else [0],
             "dilation": [1, 2, 3] if dilated else [1], "groups": [2, 4] if grouped else [1]}
    for i in range(n):
        small[f"extra{i}"] = 0 if square_input else (0, 3)
        paper[f"extra{i}"] = 0 if square_input else (0, 256)
        small[f"kextra{i}"] = 0 if square_kernel else [0, 1, 2]
        paper[f"kextra{i}"] = 0 if square_kernel else [0, 2, 4]

    def make(d, dtype):
        g = d["groups"]
        cin = d["cin"] * g
        cout = d["cout"] * g
        if depthwise:
            cout = cin = d["cin"]
            g = cin
        kernel = tuple(1 if pointwise else d["k"] + d[f"kextra{i}"] for i in range(n))
        stride, pad, dil = d["stride"], d["padding"], d["dilation"]
        if transposed:
            pad = min(pad, min(dil * (k - 1) for k in kernel))
            sizes = tuple(d["size"] + d[f"extra{i}"] for i in range(n))
            op = getattr(nn, f"ConvTranspose{n}d")(cin, cout, kernel, stride=stride, padding=pad,
                                                   dilation=dil, groups=g, bias=False)
        else:
            sizes = tuple(max(d["size"] + d[f"extra{i}"], dil * (k - 1) + 1 - 2 * pad)
                          for i, k in enumerate(kernel))
            op = getattr(nn, f"Conv{n}d")(cin, cout, kernel, stride=stride, padding=pad,
                                          dilation=dil, groups=g, bias=False)
        members = {"conv": op}
        if separable:
            members["pointwise"] = nn.Conv2d(cin, d["cout"] + 1, 1, bias=False)
            fn = lambda s, x: s.pointwise(s.conv(x))  # noqa: E731
        else:
            fn = lambda s, x: s.conv(x)  # noqa: E731
        return model(name, fn, **members), [Input((d["batch"], cin) + sizes)]

    kind(name, "conv_transpose" if transposed else "conv", 1, small, paper)(make)


_conv_kind("conv_standard_1D", 1)
_conv_kind("conv_standard_1D_dilated_strided", 1, strided=True, dilated=True)
_conv_kind("conv_standard_2D__square_input__square_kernel", 2)
_conv_kind("conv_standard_2D__square_input__asymmetric_kernel", 2, square_kernel=False)
_conv_kind("conv_standard_2D__asymmetric_input__square_kernel", 2, square_input=False)
_conv_kind("conv_standard_2D__asymmetric_input__asymmetric_kernel", 2, square_input=False,
           square_kernel=False)
_conv_kind("conv_standard_2D_square_input_asymmetric_kernel___dilated____padded", 2,
           square_kernel=False, dilated=True, padded=True)
_conv_kind("conv_standard_3D__square_input__square_kernel", 3, paper_channels=(1, 64))
_conv_kind("conv_standard_3D__square_input__asymmetric_kernel", 3, square_kernel=False,
           paper_channels=(1, 64))
_conv_kind("conv_standard_3D__asymmetric_input__square_kernel", 3, square_input=False,
           paper_channels=(1, 64))
_conv_kind("conv_standard_3D__asymmetric_input__asymmetric_kernel", 3, square_input=False,
           square_kernel=False, paper_channels=(1, 64))
_conv_kind("conv_depthwise_2D_square_input_square_kernel", 2, depthwise=True)
_conv_kind("conv_depthwise_2D_square_input_asymmetric_kernel", 2, depthwise=True,
           square_kernel=False)
_conv_kind("conv_depthwise_2D_asymmetric_input_square_kernel", 2, depthwise=True,
           square_input=False)
_conv_kind("conv_depthwise_2D_asymmetric_input_asymmetric_kernel", 2, depthwise=True,
           square_input=False, square_kernel=False, strided=True, padded=True, dilated=True)
_conv_kind("conv_depthwise_separable_2D", 2, depthwise=True, separable=True, padded=True)
_conv_kind("conv_pointwise_2D", 2, pointwise=True)
_conv_kind("conv_standard_2D_strided_padded_grouped", 2, strided=True, padded=True, grouped=True)

_conv_kind("conv_transposed_1D", 1, transposed=True)
_conv_kind("conv_transposed_1D_dilated", 1, transposed=True, dilated=True)
_conv_kind("conv_transposed_1D_asymmetric_input_square_kernel___padded____strided____dilated__", 1,
           transposed=True, padded=True, strided=True, dilated=True)
_conv_kind("conv_transposed_2D__square_input__square_kernel", 2, transposed=True)
_conv_kind("conv_transposed_2D__square_input__asymmetric_kernel", 2, transposed=True,
           square_kernel=False)
_conv_kind("conv_transposed_2D__asymmetric_input__square_kernel", 2, transposed=True,
           square_input=False)
_conv_kind("conv_transposed_2D__asymmetric_input__asymmetric_kernel", 2, transposed=True,
           square_input=False, square_kernel=False)
_conv_kind("conv_transposed_2D_asymmetric_input_asymmetric_kernel___padded__", 2,
           transposed=True, square_input=False, square_kernel=False, padded=True)
_conv_kind("conv_transposed_2D_asymmetric_input_square_kernel___dilated____padded____strided__",
           2, transposed=True, square_input=False, dilated=True, padded=True, strided=True)
_conv_kind("conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____"
           "dilated__", 2, transposed=True, square_input=False, square_kernel=False,
           strided=True, grouped=True, padded=True, dilated=True)
_conv_kind("conv_transposed_3D__square_input__square_kernel", 3, transposed=True,
           paper_channels=(1, 64))
_conv_kind("conv_transposed_3D__square_input__asymmetric_kernel", 3, transposed=True,
           square_kernel=False, paper_channels=(1, 64))
_conv_kind("conv_transposed_3D__asymmetric_input__square_kernel", 3, transposed=True,
           square_input=False, paper_channels=(1, 64))
_conv_kind("conv_transposed_3D__asymmetric_input__asymmetric_kernel", 3, transposed=True,
           square_input=False, square_kernel=False, paper_channels=(1, 64))
_conv_kind("conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_", 3,
           transposed=True, square_input=False, square_kernel=False, strided=True, padded=True,
           grouped=True, paper_channels=(1, 64))
_conv_kind("conv_transposed_3D_asymmetric_input_square_kernel__strided_padded__grouped", 3,
           transposed=True, square_input=False, strided=True, padded=True, grouped=True,
           paper_channels=(1, 64))
_conv_kind("conv_transposed_3D_square_input_square_kernel___padded____dilated____strided__", 3,
           transposed=True, padded=True, dilated=True, strided=True, paper_channels=(1, 64))


# ---------------------------------------------------------------- losses

LOSS_SMALL = {"batch": (2, 8), "dim": (4, 32)}
LOSS_PAPER = {"batch": (1, 1024), "dim": (1, 16384)}


def _loss(name, fn, plan_fn, small=LOSS_SMALL, paper=LOSS_PAPER, arity=2):
    def make(d, dtype):
        return model(name, fn, arity), plan_fn(d)
    kind(name, "loss", 1, small, paper)(make)


def _pair(d):
    return [Input((d["batch"], d["dim"])), Input((d["batch"], d["dim"]))]


_loss("MSELoss", lambda s, p, t: torch.mean((p - t) ** 2), _pair)
_loss("HuberLoss", lambda s, p, t: F.smooth_l1_loss(p, t), _pair)
_loss("Hingeloss", lambda s, p, t: torch.mean(torch.clamp(1 - p * t, min=0)),
      lambda d: [Input((d["batch"], d["dim"])), Input((d["batch"], d["dim"]), "sign")])
_loss("CosineSimilarityLoss",
      lambda s, p, t: torch.mean(1 - F.cosine_similarity(p, t, dim=1)), _pair)
_loss("KLDivLoss", lambda s, p, t: F.kl_div(torch.log(p), t, reduction="batchmean"),
      lambda d: [Input((d["batch"], d["dim"]), "probs"), Input((d["batch"], d["dim"]), "probs")])
_loss("CrossEntropyLoss", lambda s, p, t: F.cross_entropy(p, t),
      lambda d: [Input((d["batch"], d["dim"])), Input((d["batch"],), "labels", d["dim"])],
      small={"batch": (2, 8), "dim": (2, 10)}, paper={"batch": (1, 4096), "dim": (2, 1024)})
_loss("NLLLoss", lambda s, p, t: F.nll_loss(p, t),
      lambda d: [Input((d["batch"], d["dim"])), Input((d["batch"],), "labels", d["dim"])],
      small={"batch": (2, 8), "dim": (2, 10)}, paper={"batch": (1, 4096), "dim": (2, 4096)})


@kind("TripletMarginLoss", "loss", 1, {**LOSS_SMALL, "margin": (0.1, 2.0)},
      {**LOSS_PAPER, "margin": (0.1, 10.0)})
def _triplet(d, dtype):
    shape = (d["batch"], d["dim"])
    return (model("TripletMarginLoss", lambda s, a, p, n: s.loss_fn(a, p, n), 3,
                  loss_fn=nn.TripletMarginLoss(margin=d["margin"])),
            [Input(shape), Input(shape), Input(shape)])


# ---------------------------------------------------------------- attention

@kind("ScaledDotProductAttention", "attention", 1,
      {"batch": (1, 2), "heads": (1, 3), "seq": (2, 6), "depth": (2, 8)},
      {"batch": (1, 64), "heads": (1, 32), "seq": (16, 4096), "depth": [32, 64, 128]})
def _sdpa(d, dtype):
    shape = (d["batch"], d["heads"], d["seq"], d["depth"])
    return (model("ScaledDotProductAttention",
                  lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v), 3),
            [Input(shape), Input(shape), Input(shape)])
