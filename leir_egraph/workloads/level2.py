"""Level-2 program types: a GEMM or convolution followed by a chain of element-wise ops, norms,
pooling and reductions (KernelBench level 2 and the Step-TP collection), plus paired programs
(two GEMMs/convolutions/element-wise ops combined) and the seeded composer.

Names spell the chain: ``Gemm_Swish_Divide_Clamp_Tanh_Clamp`` is ``x = gemm(x)`` followed by
``x*sigmoid(x)``, ``x/2.0``, ``clamp(x,-1,1)``, ``tanh(x)``, ``clamp(x,-1,1)``.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from . import components as C
from .level1 import model
from .registry import Input, Kind, register

GEMM_SMALL = {"batch": (2, 4), "in_f": (4, 12), "out4": (1, 4)}
GEMM_PAPER = {"batch": (1, 1024), "in_f": (8, 16384), "out4": (2, 1024)}
CONV2_SMALL = {"batch": (1, 2), "cin": (1, 3), "cout4": (1, 2), "size": (6, 9), "k": [1, 3]}
CONV2_PAPER = {"batch": (1, 128), "cin": (1, 64), "cout4": (1, 16), "size": (8, 256),
               "k": [1, 3, 5, 7]}
CONV3_SMALL = {"batch": (1, 2), "cin": (1, 2), "cout4": (1, 2), "size": (6, 7), "k": [1, 2, 3]}
CONV3_PAPER = {"batch": (1, 64), "cin": (1, 32), "cout4": (1, 16), "size": (8, 64),
               "k": [1, 3, 5]}
CONVT_SMALL = {"batch": (1, 2), "cin": (1, 3), "cout4": (1, 2), "size": (3, 4), "k": [2, 3],
               "stride": [1, 2], "padding": [0, 1]}
CONVT_PAPER = {"batch": (1, 64), "cin": (1, 64), "cout4": (1, 16), "size": (8, 64),
               "k": [2, 3, 4], "stride": [1, 2], "padding": [0, 1]}

HEADS = {
    # name: (small ranges, paper ranges, rank of the input)
    "gemm": (GEMM_SMALL, GEMM_PAPER), "gemm_nobias": (GEMM_SMALL, GEMM_PAPER),
    "gemm_square": (GEMM_SMALL, GEMM_PAPER), "matmulT": (GEMM_SMALL, GEMM_PAPER),
    "conv1d": (CONV2_SMALL, CONV2_PAPER), "conv2d": (CONV2_SMALL, CONV2_PAPER),
    "conv3d": (CONV3_SMALL, CONV3_PAPER), "conv3d_sp": (CONV3_SMALL, CONV3_PAPER),
    "convT2d": (CONVT_SMALL, CONVT_PAPER), "convT3d": ({**CONVT_SMALL, "size": (2, 3)},
                                                       CONVT_PAPER),
}


def head_input(head: str, d: dict) -> tuple[int, ...]:
    if head.startswith("gemm") or head == "matmulT":
        return (d["batch"], d["in_f"])
    n = {"conv1d": 1, "conv2d": 2, "conv3d": 3, "conv3d_sp": 3, "convT2d": 2, "convT3d": 3}[head]
    return (d["batch"], d["cin"]) + (d["size"],) * n


def make_head(head: str, d: dict, shape) -> C.Step:
    if head == "gemm":
        return C.Gemm(shape, 4 * d["out4"])
    if head == "gemm_nobias":
        return C.Gemm(shape, 4 * d["out4"], bias=False)
    if head == "gemm_square":
        return C.Gemm(shape, shape[-1])
    if head == "matmulT":
        return C.MatmulT(shape, 4 * d["out4"])
    if head == "conv3d_sp":
        return C.Conv(shape, 4 * d["cout4"], d["k"], stride=2, padding=1)
    if head.startswith("conv") and not head.startswith("convT"):
        return C.Conv(shape, 4 * d["cout4"], d["k"])
    stride = d["stride"]
    return C.ConvTranspose(shape, 4 * d["cout4"], d["k"], stride=stride,
                           padding=min(d["padding"], d["k"] - 1),
                           output_padding=1 if stride > 1 else 0)


def chain_kind(name: str, head: str, steps: list, family: str = "composition") -> Kind:
    """Register ``name`` as ``head`` followed by ``steps`` (BatchNorm kinds run in train mode)."""
    small, paper = HEADS[head]

    def make(d, dtype):
        from .registry import seed_for
        d = dict(d)
        while True:  # grow the input until pooling steps have at least 4 positions to work on
            shape = head_input(head, d)
            h = make_head(head, d, shape)
            if head.startswith("gemm") or head == "matmulT" or min(h.out_shape[2:]) >= 4:
                break
            d["size"] += 1
        rng = seed_for(name, *sorted(d.items()))
        m = C.chain(h, steps, dtype, rng, input_shape=shape)
        m.__class__ = type(name, (C.Chain,), {})
        return m, [Input(shape)]

    return register(Kind(name, family, 2, make, small, paper,
                         train=any("BatchNorm" in str(s) for s in steps)))


R = lambda kind, **kw: ("Reduce", {"kind": kind, **kw})  # noqa: E731

CHAINS = [
    # GEMM heads
    ("Gemm_Add_ReLU", "gemm_nobias", ["BiasAdd", "ReLU"]),
    ("Gemm_BatchNorm_GELU_GroupNorm_Mean_ReLU", "gemm",
     ["BatchNorm", "GELU", "GroupNorm", "Mean", "ReLU"]),
    ("Gemm_BatchNorm_Scaling_Softmax", "gemm", ["BatchNorm", "ScaleParam", "Softmax"]),
    ("Gemm_BatchNorm_GELU_ReLU", "gemm", ["BatchNorm", "GELU", "ReLU"]),
    ("Gemm_BiasAdd_Hardtanh_Mish_GroupNorm", "gemm", ["BiasAdd", "Hardtanh", "Mish", "GroupNorm"]),
    ("Gemm_Divide_Sum_Scaling", "matmulT", [("Divide", {"value": 2.0}), "Sum", "Scale"]),
    ("Gemm_GroupNorm_Hardtanh", "gemm", ["GroupNorm", "Hardtanh"]),
    ("Gemm_GroupNorm_Min_BiasAdd", "gemm", ["GroupNorm", "Min", "BiasAdd"]),
    ("Gemm_GroupNorm_Swish_Multiply_Swish", "gemm", ["GroupNorm", "Swish", "Multiply", "Swish"]),
    ("Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU", "gemm",
     ["LogSumExp", ("LeakyReLU", {"negative_slope": 0.01}),
      ("LeakyReLU", {"negative_slope": 0.01}), "GELU", "GELU"]),
    # over dim 0: KernelBench's max over dim 1 leaves one column, whose mean is itself (all 0)
    ("Gemm_Max_Subtract_GELU", "gemm", [R("max", dim=0), "SubtractMean", "GELU"]),
    ("Gemm_Multiply_LeakyReLU", "gemm", ["Scale", "LeakyReLU"]),
    ("Gemm_ReLU_Divide", "gemm", ["ReLU", "Divide"]),
    ("Gemm_Scale_BatchNorm", "gemm", ["Multiply", "BatchNorm"]),
    ("Gemm_Scaling_Hardtanh_GELU", "gemm", ["Scale", "Hardtanh", "GELU"]),
    ("Gemm_Sigmoid_Scaling_ResidualAdd", "gemm_square", ["Sigmoid", "Scale", "ResidualInput"]),
    ("Gemm_Sigmoid_Sum_LogSumExp", "gemm",
     ["Sigmoid", R("sum", keepdim=False), R("logsumexp", dim=0, keepdim=False)]),
    ("Gemm_Sigmoid_LogSumExp", "gemm", ["Sigmoid", R("logsumexp", keepdim=False)]),
    ("Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd", "gemm",
     ["SubtractParam", "Mean", "LogSumExp", "GELU", "ResidualInput"]),
    ("Gemm_Swish_Divide_Clamp_Tanh_Clamp", "gemm",
     ["Swish", ("Divide", {"value": 2.0}), ("Clamp", {"lo": -1.0, "hi": 1.0}), "Tanh",
      ("Clamp", {"lo": -1.0, "hi": 1.0})]),
    # "Matmul" heads (KernelBench also writes them as nn.Linear)
    ("Matmul_Add_Swish_Tanh_GELU_Hardtanh", "gemm",
     ["BiasAdd", "Swish", "Tanh", "GELU", ("Clamp", {"lo": -1.0, "hi": 1.0})]),
    ("Matmul_AvgPool_GELU_Scale_Max", "gemm", ["AvgPool", "GELU", "Scale", R("max", keepdim=False)]),
    ("Matmul_BatchNorm_BiasAdd_Divide_Swish", "gemm", ["BatchNorm", "BiasAdd", "Divide", "Swish"]),
    ("Matmul_Divide_GELU", "gemm", ["Divide", "GELU"]),
    ("Matmul_Dropout_Softmax", "gemm", ["Dropout", "Softmax"]),
    ("Matmul_GELU_Softmax", "gemm", ["GELU", "Softmax"]),
    ("Matmul_GroupNorm_LeakyReLU_Sum", "gemm", ["GroupNorm", "LeakyReLU", "Double"]),
    ("Matmul_MaxPool_Sum_Scale", "gemm", ["MaxPool", R("sum", keepdim=False), "Scale"]),
    ("Matmul_Mean_Softmax", "gemm", ["Mean", "Softmax"]),
    ("Matmul_Min_Subtract", "gemm", ["MinConst", "Subtract"]),
    ("Matmul_Mish_Mish", "gemm", ["Mish", "Mish"]),
    ("Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish", "gemm",
     ["Scale", "Double", "Clamp", "LogSumExp", "MishMul"]),
    ("Matmul_Scaling_ResidualAdd", "gemm", ["Multiply", "ResidualAdd"]),
    ("Matmul_Sigmoid_Sum", "gemm", ["Sigmoid", "Sum"]),
    ("Matmul_Subtract_Multiply_ReLU", "gemm", ["Subtract", "Scale", "ReLU"]),
    ("Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp", "gemm",
     ["Sum", "Max", "Mean", "LogSumExp", "LogSumExp"]),
    ("Matmul_Swish_Scaling", "gemm", ["Swish", "Scale"]),
    ("Matmul_Swish_Sum_GroupNorm", "gemm", ["Swish", "BiasAdd", "GroupNorm"]),
    # 2-D convolutions
    ("Conv2D_ReLU_BiasAdd", "conv2d", ["ReLU", "BiasAdd"]),
    ("Conv2d_Activation_BatchNorm", "conv2d", ["SoftplusTanh", "BatchNorm"]),
    ("Conv2d_Add_Scale_Sigmoid_GroupNorm", "conv2d", ["BiasAdd", "Multiply", "Sigmoid", "GroupNorm"]),
    ("Conv2d_AvgPool_Sigmoid_Sum", "conv2d", ["AvgPool", "Sigmoid", R("sum", dim=(1, 2, 3),
                                                                       keepdim=False)]),
    ("Conv2d_BatchNorm_Scaling", "conv2d", ["BatchNorm", "Scale"]),
    ("Conv2d_Divide_LeakyReLU", "conv2d", ["Divide", ("LeakyReLU", {"negative_slope": 0.01})]),
    ("Conv2d_GELU_GlobalAvgPool", "conv2d", ["GELU", "GlobalAvgPool", "SqueezeSpatial"]),
    ("Conv2d_GroupNorm_Scale_MaxPool_Clamp", "conv2d",
     ["GroupNorm", "ScaleParam", "MaxPool", "ClampItem"]),
    ("Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp", "conv2d",
     ["GroupNorm", "Tanh", "HardSwish", "ResidualAdd", "LogSumExp"]),
    ("Conv2d_HardSwish_ReLU", "conv2d", ["HardSwish", "ReLU"]),
    ("Conv2d_InstanceNorm_Divide", "conv2d", ["InstanceNorm", "Divide"]),
    ("Conv2d_Min_Add_Multiply", "conv2d", ["MinConst", "BiasAdd", "Scale"]),
    ("Conv2d_Min_Tanh_Tanh", "conv2d", ["Min", "Tanh", "Tanh"]),
    ("Conv2d_Mish_Mish", "conv2d", ["Mish", "Mish"]),
    ("Conv2d_Multiply_LeakyReLU_GELU", "conv2d", ["Multiply", "LeakyReLU", "GELU"]),
    ("Conv2d_ReLU_HardSwish", "conv2d", ["ReLU", "HardSwishManual"]),
    ("Conv2d_Scaling_Min", "conv2d", ["Scale", "Min"]),
    ("Conv2d_Subtract_HardSwish_MaxPool_Mish", "conv2d",
     ["Subtract", "HardSwish", "MaxPool", "Mish"]),
    ("Conv2d_Subtract_Subtract_Mish", "conv2d", ["Subtract", "Subtract", "Mish"]),
    ("Conv2d_Subtract_Tanh_Subtract_AvgPool", "conv2d",
     ["Subtract", "Tanh", "Subtract", "AvgPool"]),
    ("Conv2d_Tanh_Scaling_BiasAdd_Max", "conv2d", ["Tanh", "Scale", "BiasAdd", "MaxPool"]),
    # 3-D convolutions
    ("Conv3d_Divide_Max_GlobalAvgPool_BiasAdd_Sum", "conv3d",
     ["Divide", "MaxPool", "GlobalAvgPool", "BiasAdd", R("sum", keepdim=False)]),
    ("Conv3d_GroupNorm_Mean", "conv3d", ["GroupNorm", R("mean", dim=(1, 2, 3, 4),
                                                         keepdim=False)]),
    ("Conv3d_GroupNorm_Min_Clamp", "conv3d", ["GroupNorm", "MinConst", "Clamp"]),
    ("Conv3d_GroupNorm_Min_Clamp_Dropout", "conv3d", ["GroupNorm", "MinConst", "Clamp", "Dropout"]),
    ("Conv3d_HardSwish_GroupNorm_Mean", "conv3d",
     ["HardSwish", "GroupNorm", R("mean", dim=(2, 3, 4), keepdim=False)]),
    ("Conv3d_HardSwish_ReLU_Softmax_Mean", "conv3d",
     ["HardSwish", "ReLU", "Softmax", R("mean", dim=(2, 3, 4), keepdim=False)]),
    ("Conv3d_LeakyReLU_Sum_Clamp_GELU", "conv3d",
     [("LeakyReLU", {"negative_slope": 0.2}), "BiasAdd", ("Clamp", {"lo": -1.0, "hi": 1.0}),
      "GELU"]),
    ("Conv3d_Max_LogSumExp_ReLU", "conv3d_sp", ["MaxPool", "LogSumExp", "ReLU"]),
    ("Conv3d_Min_Softmax", "conv3d", [R("min", dim=2, keepdim=False), "Softmax"]),
    ("Conv3d_Mish_Tanh", "conv3d_sp", ["Mish", "Tanh"]),
    ("Conv3d_Multiply_InstanceNorm_Clamp_Multiply_Max", "conv3d",
     ["Multiply", "InstanceNorm", "Clamp", "Multiply", R("max", keepdim=False)]),
    ("Conv3d_ReLU_LeakyReLU_GELU_Sigmoid_BiasAdd", "conv3d",
     ["ReLU", ("LeakyReLU", {"negative_slope": 0.01}), "GELU", "Sigmoid", "BiasAdd"]),
    ("Conv3d_Scaling_Tanh_Multiply_Sigmoid", "conv3d", ["Multiply", "Tanh", "Multiply", "Sigmoid"]),
    ("Conv3d_Softmax_MaxPool_MaxPool", "conv3d", ["Softmax", "MaxPool", "MaxPool"]),
    # transposed convolutions (KernelBench level 2)
    ("ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide", "convT2d",
     ["BiasAdd", ("Clamp", {"lo": 0.0, "hi": 1.0}), ("Scale", {"value": 2.0}),
      ("Clamp", {"lo": 0.0, "hi": 1.0}), ("Divide", {"value": 2.0})]),
    ("ConvTranspose2d_Subtract_Tanh", "convT2d", ["SubtractParam", "Tanh"]),
    ("ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh", "convT2d",
     ["MaxPool", "Hardtanh", R("mean", dim=(2, 3)), "Tanh"]),
    ("ConvTranspose2d_BatchNorm_Tanh_MaxPool_GroupNorm", "convT2d",
     ["BatchNorm", "Tanh", "MaxPool", "GroupNorm"]),
    ("ConvTranspose2d_Mish_Add_Hardtanh_Scaling", "convT2d", ["Mish", "Add", "Hardtanh", "Scale"]),
    ("ConvTranspose2d_GELU_GroupNorm", "convT2d", ["GELU", "GroupNorm"]),
    ("ConvTranspose2d_Min_Sum_GELU_Add", "convT2d",
     ["Min", R("sum", dim=2), "GELU", "BiasAdd"]),
    ("ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid", "convT2d",
     ["Softmax", "BiasAdd", "Scale", "Sigmoid"]),
    ("ConvTranspose2d_Add_Min_GELU_Multiply", "convT2d", ["Add", "MinConst", "GELU", "Scale"]),
    ("ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply", "convT2d",
     ["GlobalAvgPool", "BiasAdd", "LogSumExp", R("sum", dim=(2, 3)), "Scale"]),
    ("ConvTranspose3d_BatchNorm_Subtract", "convT3d", ["BatchNorm", "SubtractSpatialMean"]),
    ("ConvTranspose3d_Add_HardSwish", "convT3d", ["BiasAdd", "HardSwish"]),
    ("ConvTranspose3d_LayerNorm_GELU_Scaling", "convT3d", ["LayerNorm", "GELU", "Scale"]),
    ("ConvTranspose3d_Softmax_Sigmoid", "convT3d", ["Softmax", "Sigmoid"]),
    ("ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling", "convT3d",
     ["Scale", "AvgPool", "BiasAdd", "Scale"]),
    ("ConvTranspose3d_ReLU_GroupNorm", "convT3d", ["ReLU", "GroupNorm"]),
    ("ConvTranspose3d_Swish_GroupNorm_HardSwish", "convT3d", ["Swish", "GroupNorm", "HardSwish"]),
    ("ConvTranspose3d_Scale_BatchNorm_GlobalAvgPool", "convT3d",
     ["Scale", "BatchNorm", "GlobalAvgPool"]),
    ("ConvTranspose3d_Max_Max_Sum", "convT3d", ["MaxPool", "MaxPool", "Sum"]),
    ("ConvTranspose3d_Clamp_Min_Divide", "convT3d", ["Clamp", "MinConst", "Divide"]),
    ("ConvTranspose3d_LeakyReLU_Multiply_LeakyReLU_Max", "convT3d",
     ["LeakyReLU", "Multiply", "LeakyReLU", "MaxPool"]),
    ("ConvTranspose3d_BatchNorm_AvgPool_AvgPool", "convT3d", ["BatchNorm", "AvgPool", "AvgPool"]),
    ("ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling", "convT3d",
     [R("mean", dim=2), "BiasAdd", "Softmax", "Tanh", "Scale"]),
    ("ConvTranspose3d_LogSumExp_HardSwish_Subtract_Clamp", "convT3d",
     ["LogSumExp", "HardSwish", "SubtractParam", "Clamp"]),
]

for _name, _head, _steps in CHAINS:
    chain_kind(_name, _head, _steps)


# ---------------------------------------------------------------- paired programs

PAIR_SMALL = {"batch": (1, 3), "m": (2, 6), "k": (2, 6), "n": (2, 6)}
PAIR_PAPER = {"batch": (1, 1024), "m": (1, 4096), "k": (1, 4096), "n": (1, 4096)}


def _pair(name, fn, shapes, kinds=None, family="composition"):
    def make(d, dtype):
        plan = [Input(tuple(d[k] for k in shape), (kinds or "randn")) for shape in shapes]
        return model(name, fn, len(shapes)), plan
    register(Kind(name, family, 2, make, PAIR_SMALL, PAIR_PAPER))


_bmm2 = [("batch", "m", "k"), ("batch", "k", "n")]
_pair("abs_abs", lambda s, a, b: torch.bmm(torch.abs(a), torch.abs(b)), _bmm2)
_pair("exp_exp", lambda s, a, b: torch.bmm(torch.exp(a), torch.exp(b)), _bmm2)
_pair("log_log", lambda s, a, b: torch.bmm(torch.log(a), torch.log(b)), _bmm2, "positive")
_pair("sqrt_sqrt", lambda s, a, b: torch.bmm(torch.sqrt(a), torch.sqrt(b)), _bmm2, "positive")
_pair("log_log_add", lambda s, a, b: torch.log(a) + torch.log(b),
      [("batch", "m", "k"), ("batch", "m", "k")], "positive")
_pair("Bmm_Bmm", lambda s, a, b, c: torch.bmm(a, b) + torch.bmm(c, b),
      [("batch", "m", "k"), ("batch", "k", "n"), ("batch", "m", "k")])
_pair("MatMul3D_MatMul3D", lambda s, a, b, c: torch.matmul(a, b) + torch.matmul(c, b),
      [("batch", "m", "k"), ("k", "n"), ("batch", "m", "k")])
_pair("MatMul4D_MatMul4D", lambda s, a, b, c: torch.einsum("bijl,lk->bijk", a, b)
      + torch.einsum("bijm,mk->bijk", c, b),
      [("batch", "m", "m", "k"), ("k", "n"), ("batch", "m", "m", "k")])
_pair("MatMul_and_Softmax", lambda s, a, b: torch.softmax(torch.matmul(a, b), dim=1),
      [("m", "k"), ("k", "n")])


@lambda f: register(Kind("add_add", "composition", 2, f, PAIR_SMALL, PAIR_PAPER))
def _add_add(d, dtype):
    """bmm(A + C, B + D): four inputs."""
    class AddAdd(nn.Module):
        def forward(self, a, b, c, e):
            return torch.bmm(a + c, b + e)
    s1, s2 = (d["batch"], d["m"], d["k"]), (d["batch"], d["k"], d["n"])
    return AddAdd(), [Input(s1), Input(s2), Input(s1), Input(s2)]


@lambda f: register(Kind("Gemm_Gemm", "composition", 2, f, GEMM_SMALL, GEMM_PAPER))
def _gemm_gemm(d, dtype):
    """One nn.Linear applied to two inputs, results added."""
    lin = nn.Linear(d["in_f"], 4 * d["out4"])
    shape = (d["batch"], d["in_f"])
    return model("Gemm_Gemm", lambda s, x, y: s.gemm(x) + s.gemm(y), 2, gemm=lin), \
        [Input(shape), Input(shape)]


@lambda f: register(Kind("BMM_InstanceNorm_Sum_ResidualAdd_Multiply", "composition", 2, f,
                         GEMM_SMALL, GEMM_PAPER))
def _bmm_instance(d, dtype):
    """Linear, viewed as an image (unsqueeze twice, cat with itself), InstanceNorm2d, then
    ``(x + y) * y`` with a second input."""
    out = 4 * d["out4"]

    def fn(s, x, y):
        x = s.bmm(x)
        x = x.unsqueeze(-1).unsqueeze(-1)
        x = torch.cat((x, x), dim=-1)
        x = s.instance_norm(x)
        x = x.squeeze(-2)
        x = x + y
        return x * y

    return (model("BMM_InstanceNorm_Sum_ResidualAdd_Multiply", fn, 2,
                  bmm=nn.Linear(d["in_f"], out), instance_norm=nn.InstanceNorm2d(out, affine=True)),
            [Input((d["batch"], d["in_f"])), Input((d["batch"], out, 2))])


def _conv_pair(name, n, padded):
    small = {"batch": (1, 2), "cin": (1, 3), "cout": (1, 4), "size": (4, 8) if n < 3 else (3, 5),
             "k": [1, 2, 3], "stride": [1, 2], "dilation": [1, 2], "padding": [1, 2] if padded
             else [0]}
    paper = {"batch": (1, 64), "cin": (1, 64), "cout": (1, 128), "size": (8, 256) if n < 3
             else (8, 64), "k": [1, 3, 5], "stride": [1, 2], "dilation": [1, 2],
             "padding": [1, 2, 3] if padded else [0]}

    def make(d, dtype):
        k, dil, pad = d["k"], d["dilation"], d["padding"]
        size = max(d["size"], dil * (k - 1) + 1)
        conv = getattr(nn, f"Conv{n}d")(d["cin"], d["cout"], k, stride=d["stride"], padding=pad,
                                        dilation=dil, bias=True)
        shape = (d["batch"], d["cin"]) + (size,) * n
        return (model(name, lambda s, x, y: s.conv(x) + s.conv(y), 2, conv=conv),
                [Input(shape), Input(shape)])

    register(Kind(name, "composition", 2, make, small, paper))


for _n in (1, 2, 3):
    _conv_pair(f"conv{_n}d_conv{_n}d", _n, False)
    _conv_pair(f"conv{_n}d_conv{_n}d_padding", _n, True)
