"""The PyTorch -> LEIR translator: reference naming and style, the binding rule, signatures,
tracing fallbacks, errors, and numerical agreement with PyTorch on the tricky ops."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from leir_egraph.frontend import UnsupportedOp, from_torch
from leir_egraph.frontend.naming import index_names, tensor_name
from leir_egraph.frontend.oracle import CheckRecord, check_module, fast_cpu
from leir_egraph.leir import LoopNest, parse
from leir_egraph.leir.analysis import equation_sites, subscript_indices


class Fn(nn.Module):
    """A module whose forward is ``fn`` (tests build many one-liners)."""

    def __init__(self, fn, **members):
        super().__init__()
        self.fn = fn
        for k, v in members.items():
            setattr(self, k, v)

    def forward(self, *xs):
        return self.fn(self, *xs)


def one(fn, **members):
    class One(Fn):
        def forward(self, x):
            return self.fn(self, x)
    return One(fn, **members)


def two(fn, **members):
    class Two(Fn):
        def forward(self, a, b):
            return self.fn(self, a, b)
    return Two(fn, **members)


def randn(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def assert_equal(module, inputs):
    """The translation of ``module`` runs (TVM, llvm) to PyTorch's values."""
    record = check_module(module, inputs, CheckRecord(type(module).__name__, "test"), fast_cpu())
    assert record.status == "equal", record.detail


# ---------------------------------------------------------------- names

def test_tensor_names_are_bijective_base_20_without_reserved_letters():
    assert [tensor_name(n) for n in range(4)] == ["A", "C", "D", "E"]
    assert tensor_name(19) == "Z"
    assert tensor_name(20) == "Aa" and tensor_name(21) == "Ac"  # no 'b': reserved as B
    assert tensor_name(39) == "Az" and tensor_name(40) == "Ca"
    names = [tensor_name(n) for n in range(500)]
    assert len(set(names)) == 500
    assert not any(n[0] in "LPVBUT" for n in names)


def test_index_names_skip_binding_letters_and_e():
    names = index_names(25)
    assert names[:6] == ["a", "c", "d", "f", "g", "h"]
    assert names[19] == "aa"
    assert not any(set(n) & set("tbvxyze") for n in names)


# ---------------------------------------------------------------- reference style

def test_softmax_matches_the_reference_translator_text():
    program = from_torch(nn.Softmax(dim=1), (torch.randn(16, 256),))
    assert program.text == (
        "B^{16}_{tx=0}L^{256}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
        "B^{16}_{tx=0}L^{256}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}"
        "-D^{f32,g}_{tx});];B^{16}_{tx=0}L^{256}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}"
        "-D^{f32,g}_{tx})/E^{f32,g}_{tx};];")


def test_matmul_3d_matches_the_reference_translator_text():
    program = from_torch(two(lambda s, a, b: torch.matmul(a, b)),
                         (torch.randn(16, 16, 16), torch.randn(16, 12)))
    assert program.text == ("B^{16}_{tx=0}L^{16}_{a=0}L^{12}_{c=0}L^{16}_{d=0}[D^{f32,g}_{tx,a,c}"
                            "=D^{f32,g}_{tx,a,c}+A^{f32,g}_{tx,a,d}*C^{f32,g}_{d,c};];")


def test_linear_accumulates_its_bias_onto_the_product_and_params_come_last():
    lin = nn.Linear(8, 4)
    program = from_torch(one(lambda s, x: torch.relu(s.lin(x)), lin=lin), (torch.randn(2, 8),))
    assert program.text == (
        "B^{2}_{tx=0}L^{4}_{a=0}L^{8}_{c=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}"
        "*E^{f32,g}_{a,c};];B^{2}_{tx=0}L^{4}_{a=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}"
        "+F^{f32,g}_{a};];B^{2}_{tx=0}L^{4}_{a=0}[D^{f32,g}_{tx,a}=max(C^{f32,g}_{tx,a},0);];")
    assert program.signature.input_names == ("A", "E", "F")
    np.testing.assert_array_equal(program.values["E"], lin.weight.detach().numpy())
    np.testing.assert_array_equal(program.values["F"], lin.bias.detach().numpy())


def test_activations_without_intrinsics_are_written_with_exp_and_log():
    for fn in (torch.tanh, torch.sigmoid, F.softplus, F.mish, F.silu,
               lambda x: F.gelu(x, approximate="tanh"), F.logsigmoid):
        text = from_torch(one(lambda s, x: fn(x)), (torch.randn(3, 5),)).text
        for word in ("tanh", "sigmoid", "softplus", "mish"):
            assert word not in text
        assert "exp(" in text


def test_tanh_is_stable_for_large_inputs():
    x = torch.tensor([[-1000.0, -50.0, -1e-3, 0.0, 1e-3, 50.0, 1000.0]], dtype=torch.float64)
    assert_equal(one(lambda s, v: torch.tanh(v)), (x,))
    assert_equal(one(lambda s, v: F.softplus(v)), (x,))
    assert_equal(one(lambda s, v: F.logsigmoid(v)), (x,))
    assert_equal(one(lambda s, v: torch.logsumexp(v, dim=1)), (x * 10,))


# ---------------------------------------------------------------- the binding rule

def _bound_positions(program):
    """(nest number, bound index, loop kinds) for every nest."""
    out = []
    for n, nest in enumerate(program.leir.nests):
        kinds = "".join(loop.kind for loop in nest.loops)
        bound = [loop for loop in nest.loops if loop.kind == "B"]
        out.append((n, bound[0] if bound else None, kinds))
    return out


def assert_binding_rule(program):
    """Every B loop is tx, extent <= 1024, the first loop indexing all targets, never a
    reduction axis; each nest binds at most one loop."""
    for site in equation_sites(program.leir):
        for loop in site.loops:
            if loop.kind == "B":
                assert loop.index == "tx" and loop.extent <= 1024
                if site.loops != (loop,) or loop.extent != 1:
                    assert loop.index in subscript_indices(site.equation.target) or \
                        (loop.extent == 1 and not site.equation.target.subscripts)
    for nest in program.leir.nests:
        assert sum(loop.kind == "B" for loop in nest.loops) <= 1


def test_large_leading_dims_stay_serial_and_reductions_are_never_bound():
    program = from_torch(one(lambda s, x: torch.softmax(x, dim=1)), (torch.randn(2048, 8),))
    assert all(kinds == "LL" for _, _, kinds in _bound_positions(program))
    program = from_torch(one(lambda s, x: x.sum(dim=0)), (torch.randn(16, 32, 4),))
    assert program.text.startswith("L^{16}_{a=0}B^{32}_{tx=0}L^{4}_{c=0}")
    program = from_torch(one(lambda s, x: x.sum()), (torch.randn(16, 32),))
    assert program.text.startswith("L^{16}_{a=0}L^{32}_{c=0}[C^{f32,g}=C^{f32,g}+")
    assert_binding_rule(program)


def test_scans_keep_the_scanned_axis_serial():
    program = from_torch(one(lambda s, x: torch.cumsum(x, dim=0)), (torch.randn(5, 7),))
    assert program.text == ("L^{5}_{a=0}B^{7}_{tx=0}[C^{f32,g}_{a,tx}=if_then_else(a-1<0,0,"
                            "C^{f32,g}_{a-1,tx})+A^{f32,g}_{a,tx};];")


def test_scalar_steps_get_a_unit_binding():
    program = from_torch(one(lambda s, x: x / torch.norm(x, p="fro")), (torch.randn(4, 4),))
    assert "B^{1}_{tx=0}[C^{f32,g}=sqrt(E^{f32,g});];" in program.text  # the reference's form


# ---------------------------------------------------------------- signatures and values

def test_signature_orders_forward_inputs_constants_parameters():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.randn(3))
            self.register_buffer("shift", torch.randn(3))
            self.divisor = torch.tensor(2.0)

        def forward(self, x, y):
            return (x * self.scale + self.shift) / self.divisor + y

    m = M()
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    program = from_torch(m, (x, y))
    names = program.signature.input_names
    assert len(names) == 5 and names[:2] == ("A", "C")
    assert program.forward_inputs == ("A", "C")
    shift, divisor, scale = (program.values[n] for n in names[2:])
    np.testing.assert_array_equal(shift, m.shift.numpy())      # constants first ...
    assert divisor.shape == () and divisor == 2.0
    np.testing.assert_array_equal(scale, m.scale.detach().numpy())  # ... then parameters
    assert_equal(m.double(), (x.double(), y.double()))


def test_several_outputs_and_an_output_that_is_an_input():
    class M(nn.Module):
        def forward(self, x):
            v, i = torch.max(x, dim=1)
            return v, i, x

    program = from_torch(M(), (torch.randn(3, 4),))
    assert [o.dtype for o in program.signature.outputs] == ["float32", "int64", "float32"]
    assert len(program.signature.outputs) == 3
    assert_equal(M(), (randn(3, 4),))


def test_constants_folded_at_translation_time():
    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("bias", torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8))

        def forward(self, x):
            T = x.size(-1)
            return x.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")) * (
                1.0 / math.sqrt(T))

    x = torch.randn(2, 2, 5, 5)
    program = from_torch(Masked(), (x,))
    masks = [s for s in program.signature.inputs if s.dtype == "bool"]
    assert [m.shape for m in masks] == [(1, 1, 5, 5)]
    assert "0.4472135954999579" in program.text  # 1/sqrt(5), folded
    assert_equal(Masked().double(), (x.double(),))


# ---------------------------------------------------------------- modules, functions, methods

def test_modules_functions_and_methods_translate_alike():
    x = torch.randn(4, 6)
    texts = {from_torch(m, (x,)).text for m in (
        nn.Softmax(dim=1), one(lambda s, v: F.softmax(v, dim=1)),
        one(lambda s, v: v.softmax(1)), one(lambda s, v: torch.softmax(v, 1)))}
    assert len(texts) == 1


def test_in_place_operations_rebind_the_mutated_value():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.ReLU(inplace=True)

        def forward(self, x):
            y = x * 2
            y.add_(1)
            self.act(y)
            return y - 0.5

    assert_equal(M(), (randn(3, 4),))


def test_in_place_update_of_a_view_is_refused():
    def fn(s, x):
        y = x * 1
        y.view(-1).add_(1)
        return y

    with pytest.raises(UnsupportedOp, match="view"):
        from_torch(one(fn), (torch.randn(2, 3),))


def test_in_place_update_of_a_traced_constant_is_refused_not_lost():
    """``buf = torch.zeros(..)`` is a constant to torch.fx, and ``buf * 2`` after
    ``buf[:, :3] = x`` was computed while tracing, from the zeros: the translation used to
    return zeros, silently. Refused now, for item assignment and ``copy_`` into a slice."""
    def assign(s, x):
        buf = torch.zeros(4, 6)
        buf[:, :3] = x
        return buf * 2

    def copy_into_slice(s, x):
        buf = torch.zeros(4, 6)
        buf[:, :3].copy_(torch.tanh(x))
        return buf * 2

    for fn in (assign, copy_into_slice):
        with pytest.raises(UnsupportedOp, match="captured as a constant"):
            from_torch(one(fn), (torch.randn(4, 3),))

    def traced(s, x):  # dtype=x.dtype makes the zeros a traced value: translated
        buf = torch.zeros(4, 6, dtype=x.dtype)
        buf[:, :3] = x
        return buf * 2

    assert_equal(one(traced), (randn(4, 3),))


def test_a_forward_that_updates_module_state_translates_the_call_it_makes():
    """KernelBench's VanillaRNN assigns ``self.hidden`` in forward, its LSTMs an ``h0`` left
    None until then; tracing left a proxy there, which the GraphModule then copied as the state
    tensor (``got _Proxy``) and PyTorch's own call then failed on. The translation reads the
    state the call starts from, and PyTorch's call agrees."""
    class VanillaRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = randn(4, 5)
            self.i2h, self.h2o = nn.Linear(8, 5).double(), nn.Linear(5, 2).double()

        def forward(self, x):
            self.hidden = torch.tanh(self.i2h(torch.cat((x, self.hidden), dim=1)))
            return self.h2o(self.hidden)

    module = VanillaRNN()
    state = module.hidden
    program = from_torch(module, (randn(4, 3, seed=1),))
    assert module.hidden is state and len(program.leir.nests) >= 4
    assert_equal(module, (randn(4, 3, seed=1),))

    class LSTMWithLateState(nn.Module):
        """KernelBench's LSTM models keep ``h0`` None, or reassign it, until forward."""

        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 5, 2, batch_first=True).double()
            self.h0 = None

        def forward(self, x):
            if self.h0 is None:
                self.h0 = torch.zeros(2, x.size(0), 5, dtype=x.dtype, device=x.device)
            return self.lstm(x, (self.h0, torch.zeros_like(self.h0)))[0]

    module = LSTMWithLateState()
    assert_equal(module, (randn(4, 6, 3),))


def test_functions_and_shape_dependent_python_trace_through_fallbacks():
    def attention_like(x):
        B, T, C = x.size()  # unpacking a size needs concrete shapes (fx alone refuses)
        return x.view(B, T, 2, C // 2).transpose(1, 2) * (1.0 / math.sqrt(C))

    program = from_torch(attention_like, (torch.randn(2, 3, 4),))
    assert program.signature.outputs[0].shape == (2, 2, 3, 2)

    class WithInt(nn.Module):
        def forward(self, x, dim: int):
            if dim == 0:  # control flow on a non-tensor argument
                return x.sum(0)
            return x.sum(dim)

    program = from_torch(WithInt(), (torch.randn(3, 4), 1))
    assert program.signature.outputs[0].shape == (3,)
    assert [s.name for s in program.signature.inputs] == ["A"]


def test_a_branch_on_where_tensors_live_traces_for_the_example_inputs():
    """KernelBench's NetVLAD raises unless ``x.device == self.clusters.device``: control flow
    on a traced value, decided for the example's (CPU) tensors like a shape-only branch."""
    class DeviceCheck(nn.Module):
        def __init__(self):
            super().__init__()
            self.clusters = nn.Parameter(randn(4, 3))

        def forward(self, x):
            n = x.size()[1]
            x = x.view(-1, 4)
            if x.device != self.clusters.device:
                raise ValueError(f"x.device {x.device} != cluster.device")
            return torch.softmax(x @ self.clusters, dim=1).view(-1, n, 3).sum(1)

    assert_equal(DeviceCheck(), (randn(2, 5, 4),))


def test_slices_from_a_traced_size_and_a_function_over_submodules_trace():
    """KernelBench's MiniGPTBlock: the causal mask is ``self.bias[:, :, :T, :T]`` with ``T``
    from ``x.size()`` (plain symbolic tracing cannot slice with a proxy; the shape tracer
    can), and its MLP is a lambda kept as an attribute that calls the module's own
    submodules. The shape tracer traces a copy of the module, whose lambda must call the
    copy's submodules, not the original's (torch.fx: "module is not installed as a
    submodule")."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("bias", torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8))
            self.mlp = nn.ModuleDict(dict(fc=nn.Linear(4, 8).double(),
                                          proj=nn.Linear(8, 4).double()))
            m = self.mlp
            self.mlpf = lambda x: m.proj(torch.tanh(m.fc(x)))

        def forward(self, x):
            _, T, C = x.size()
            att = (x @ x.transpose(-2, -1)) * (1.0 / math.sqrt(C))
            att = att.unsqueeze(1).masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = torch.softmax(att, dim=-1).squeeze(1) @ x
            return y + self.mlpf(y)

    module = Block()
    assert_equal(module, (randn(2, 5, 4),))
    assert module.mlpf.__closure__[0].cell_contents is module.mlp   # the original untouched


# ---------------------------------------------------------------- errors

def test_unsupported_op_names_op_node_and_module_path():
    class Inner(nn.Module):
        def forward(self, x):
            return torch.floor(x)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Sequential(nn.ReLU(), Inner())

        def forward(self, x):
            return self.block(x)

    with pytest.raises(UnsupportedOp) as info:
        from_torch(Outer(), (torch.randn(2, 3),))
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.op, err.node, err.module_path) == ("torch.floor", "floor", "block.1")
    assert "torch.floor" in str(err) and "block.1" in str(err)


def test_unsupported_modules_and_arguments_say_why():
    with pytest.raises(UnsupportedOp, match="nn.Fold at fx node .* module '1'"):
        from_torch(nn.Sequential(nn.Linear(4, 4), nn.Fold((2, 2), 1)), (torch.randn(1, 4, 4),))
    with pytest.raises(UnsupportedOp, match="nn.LSTM .*module '1': proj_size"):
        from_torch(nn.Sequential(nn.Linear(4, 4), nn.LSTM(4, 4, proj_size=2)),
                   (torch.randn(2, 4),))
    with pytest.raises(UnsupportedOp, match="return_indices"):
        from_torch(one(lambda s, x: F.max_pool2d(x, 2, return_indices=True)[0]),
                   (torch.randn(1, 1, 4, 4),))
    with pytest.raises(UnsupportedOp, match="dropout in training"):
        m = nn.Sequential(nn.Dropout(0.5))
        m.train()
        from_torch(m, (torch.randn(2, 4),))


# ---------------------------------------------------------------- dtypes and round trips

@pytest.mark.parametrize("dtype,code", [(torch.float16, "f16"), (torch.float64, "f64")])
def test_dtypes_follow_the_module(dtype, code):
    """Every tensor the caller sees has the module's dtype; an f16 product accumulates in an
    f32 temporary (bias added there) that one nest rounds to f16, as PyTorch's GEMM does."""
    m = nn.Sequential(nn.Linear(4, 3), nn.GELU()).to(dtype)
    program = from_torch(m, (torch.randn(2, 4, dtype=dtype),))
    name = str(dtype).removeprefix("torch.")
    specs = program.signature.inputs + program.signature.outputs
    assert {s.dtype for s in specs} == {name}
    assert program.values["E"].dtype == np.dtype(name)
    if code == "f64":
        assert "f32" not in program.text and "f16" not in program.text
    else:
        assert program.text.split(";];")[:3] == [
            "B^{2}_{tx=0}L^{3}_{a=0}L^{4}_{c=0}[G^{f32,g}_{tx,a}=G^{f32,g}_{tx,a}"
            "+A^{f16,g}_{tx,c}*E^{f16,g}_{a,c}",
            "B^{2}_{tx=0}L^{3}_{a=0}[G^{f32,g}_{tx,a}=G^{f32,g}_{tx,a}+F^{f16,g}_{a}",
            "B^{2}_{tx=0}L^{3}_{a=0}[C^{f16,g}_{tx,a}=G^{f32,g}_{tx,a}"]


def test_printed_programs_parse_back_to_the_same_tree():
    m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.Hardswish(),
                      nn.AvgPool2d(2, padding=1, count_include_pad=False))
    program = from_torch(m, (torch.randn(1, 2, 5, 5),))
    assert parse(program.text) == program.leir
    assert all(isinstance(n, LoopNest) for n in program.leir.nests)


# ---------------------------------------------------------------- numerics of tricky ops

def test_argmax_and_argmin_return_the_first_extreme_index():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, -1.0]], dtype=torch.float64)
    assert_equal(two(lambda s, a, b: (torch.argmax(a, 1), torch.argmin(b, 1),
                                      torch.argmax(a))), (x, x))


@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=2, stride=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=2, divisor_override=3),
])
def test_avg_pool_divisors(kwargs):
    assert_equal(one(lambda s, x: F.avg_pool2d(x, **kwargs)), (randn(1, 2, 7, 6),))


def test_max_pool_with_padding_dilation_and_ceil_mode():
    assert_equal(one(lambda s, x: F.max_pool2d(x, 2, stride=2, padding=1, dilation=2,
                                               ceil_mode=True)), (randn(1, 2, 9, 8),))
    assert_equal(one(lambda s, x: F.max_pool1d(x, 3, stride=2, padding=1)), (randn(2, 3, 10),))


@pytest.mark.parametrize("stride,padding,output_padding,groups,dilation", [
    (1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (3, 2, 1, 2, 2), (2, 3, 0, 1, 1)])
def test_conv_transpose(stride, padding, output_padding, groups, dilation):
    conv = nn.ConvTranspose2d(4, 6, 3, stride=stride, padding=padding,
                              output_padding=output_padding, groups=groups, dilation=dilation,
                              bias=True).double()
    assert_equal(one(lambda s, x: s.conv(x), conv=conv), (randn(2, 4, 4, 5),))


def test_grouped_strided_padded_conv_and_same_padding():
    conv = nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2,
                     bias=True).double()
    assert_equal(one(lambda s, x: s.conv(x), conv=conv), (randn(2, 4, 7, 6),))
    same = nn.Conv1d(3, 2, 4, padding="same").double()
    assert_equal(one(lambda s, x: s.conv(x), conv=same), (randn(1, 3, 9),))


def test_losses_with_ignored_targets_and_probabilities():
    logits = randn(6, 4)
    labels = torch.tensor([0, 3, -100, 1, 2, -100])
    assert_equal(two(lambda s, a, b: F.cross_entropy(a, b)), (logits, labels))
    assert_equal(two(lambda s, a, b: F.cross_entropy(a, b, label_smoothing=0.1)),
                 (logits, labels.clamp(min=0)))
    probs = torch.softmax(randn(6, 4, seed=1), -1)
    assert_equal(two(lambda s, a, b: F.cross_entropy(a, b)), (logits, probs))
    targets = probs.clone()
    targets[0, 0] = 0.0  # 0 * log 0 counts as 0, as in torch
    assert_equal(two(lambda s, a, b: F.kl_div(a, b, reduction="batchmean")),
                 (torch.log_softmax(logits, -1), targets))


def test_shape_ops():
    x = randn(2, 3, 4)
    assert_equal(one(lambda s, v: torch.cat([v[:, ::2], v.flip(1)[:, 1:]], dim=1)
                     .permute(2, 0, 1).reshape(4, -1)), (x,))
    assert_equal(one(lambda s, v: v[..., None, 1:3].squeeze(-2)[:, :, :1].expand(2, 3, 4)
                     + v[1]), (x,))
    assert_equal(one(lambda s, v: torch.stack(torch.chunk(v, 2, dim=2), dim=1)), (x,))
    assert_equal(one(lambda s, v: torch.stack(v.split([1, 2], dim=1), dim=0)
                     if v.shape[1] == 2 else v.repeat(1, 2, 1).roll(1, 2)), (x,))
    assert_equal(one(lambda s, v: v.unflatten(2, (2, 2)).flatten(1, 2).t()
                     if v.dim() == 2 else v.reshape(3, 2, 4).transpose(0, 2).reshape(6, 4)), (x,))


def test_gathers_embedding_and_einsum():
    w = nn.Embedding(10, 3).double()
    idx = torch.tensor([[1, 7, 0], [9, 9, 2]])
    assert_equal(one(lambda s, i: s.emb(i), emb=w), (idx,))
    x = randn(4, 5)
    gather_idx = torch.tensor([[0, 4], [1, 1], [3, 2], [0, 0]])
    assert_equal(two(lambda s, a, i: torch.gather(a, 1, i) + a[i[:, 0]][:, :2]),
                 (x, gather_idx))
    a, b = randn(2, 3, 4), randn(4, 3, seed=1)
    assert_equal(two(lambda s, p, q: torch.einsum("bij,jk->bik", p, q)
                     + torch.einsum("...j,jk->...k", p, q)), (a, b))


def test_sdpa_causal_grouped_and_masked():
    q, k, v = randn(1, 4, 5, 3), randn(1, 2, 5, 3, seed=1), randn(1, 2, 5, 2, seed=2)

    class Attn(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    assert_equal(Attn(), (q, k, v))
    mask = torch.rand(5, 5, generator=torch.Generator().manual_seed(3)) > 0.3
    mask[:, 0] = True

    class Masked(nn.Module):
        def forward(self, q, k, v, m):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.7)

    k4, v4 = randn(1, 4, 5, 3, seed=4), randn(1, 4, 5, 2, seed=5)
    assert_equal(Masked(), (q, k4, v4, mask))


def test_batch_norm_uses_running_statistics_in_eval_mode():
    bn = nn.BatchNorm2d(3).double()
    with torch.no_grad():
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
    bn.eval()
    assert_equal(bn, (randn(2, 3, 4, 4),))
    bn.train()
    assert_equal(bn, (randn(2, 3, 4, 4),))


def test_paper_scale_translation_needs_no_memory_for_meta_inputs():
    m = nn.Sequential(nn.Linear(16384, 4096), nn.GELU())
    x = torch.empty(1024, 16384, device="meta")
    program = from_torch(m, (x,))
    assert program.text.startswith("B^{1024}_{tx=0}L^{4096}_{a=0}L^{16384}_{c=0}")
    assert_binding_rule(program)
