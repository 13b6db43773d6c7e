"""Frontend constructs of whole networks: recurrent layers as loops over time, modules traced
through their decompositions, item assignment and ``copy_``, patches, shuffles, named-tuple
reductions, shape-driven control flow -- each checked against PyTorch through TVM (the zoo's
network kinds are checked by tests/test_workloads.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from leir_egraph.frontend import UnsupportedOp, from_torch
from leir_egraph.frontend.decompositions import DECOMPOSITIONS
from leir_egraph.frontend.oracle import CheckRecord, check_module
from leir_egraph.leir.ast import LoopNest


def assert_equal(module, inputs, dtype=torch.float64):
    module = module.to(dtype).eval()
    inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
    record = check_module(module, inputs, CheckRecord(type(module).__name__, str(dtype)))
    assert record.status == "equal", record.detail
    return record


def randn(*shape):
    return torch.randn(*shape, generator=GEN, dtype=torch.float64)


GEN = torch.Generator().manual_seed(0)


# ---------------------------------------------------------------- recurrent layers

class Recurrent(nn.Module):
    def __init__(self, layer, with_state):
        super().__init__()
        self.layer, self.with_state = layer, with_state

    def forward(self, x, h=None, c=None):
        if not self.with_state:
            return self.layer(x)
        return self.layer(x, (h, c) if isinstance(self.layer, nn.LSTM) else h)


@pytest.mark.parametrize("layer,batched,state", [
    (nn.LSTM(3, 4, num_layers=2, bidirectional=True), True, True),
    (nn.GRU(3, 4, batch_first=True), False, True),
    (nn.RNN(3, 4, nonlinearity="relu", bidirectional=True, bias=False), True, False),
])
def test_recurrent_layers_equal_pytorch(layer, batched, state):
    dirs = 2 if layer.bidirectional else 1
    x = randn(5, 2, 3) if batched else randn(5, 3)
    states = []
    if state:
        shape = (layer.num_layers * dirs, 2, 4) if batched else (layer.num_layers * dirs, 4)
        states = [randn(*shape) for _ in range(2 if isinstance(layer, nn.LSTM) else 1)]
    record = assert_equal(Recurrent(layer, state), (x, *states))
    assert record.nests <= 6 * layer.num_layers * dirs  # per time step nothing is unrolled


def test_a_recurrent_layer_is_one_nest_over_the_batch_around_a_serial_loop_over_time():
    program = from_torch(nn.LSTM(3, 4, batch_first=True).eval(), (torch.randn(2, 7, 3),))
    recurrences = [n for n in program.leir.nests
                   if any(isinstance(item, LoopNest) for item in n.body)]
    assert len(recurrences) == 1
    outer = recurrences[0]
    assert [(l.kind, l.extent) for l in outer.loops] == [("B", 2)]
    time_loop = next(item for item in outer.body if item.loops[0].extent == 7)
    assert time_loop.loops[0].kind == "L"
    assert [s.shape for s in program.signature.outputs] == [(2, 7, 4), (1, 2, 4), (1, 2, 4)]


def test_recurrent_options_that_cannot_be_translated_say_why():
    with pytest.raises(UnsupportedOp, match="proj_size"):
        from_torch(nn.LSTM(3, 4, proj_size=2).eval(), (torch.randn(5, 2, 3),))
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5).train()
    with pytest.raises(UnsupportedOp, match="dropout between layers in training mode"):
        from_torch(lstm, (torch.randn(5, 2, 3),))


# ---------------------------------------------------------------- decompositions

def _eager_pairs():
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    cross = nn.MultiheadAttention(8, 4, kdim=6, vdim=5, bias=False)
    enc = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True,
                                     activation="gelu")
    stack = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2, norm=nn.LayerNorm(8),
                                  enable_nested_tensor=False)
    decoder = nn.TransformerDecoderLayer(8, 2, 16, norm_first=True)
    model = nn.Transformer(8, 2, 1, 2, 16, batch_first=True)
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    q, kv = randn(2, 5, 8).float(), randn(6, 2, 6).float()
    return [
        (mha, (q, q, q), {"attn_mask": causal, "key_padding_mask": padding}),
        (mha, (q[0], q[0], q[0]), {"average_attn_weights": False,
                                   "attn_mask": randn(5, 5).float()}),
        (cross, (randn(5, 2, 8).float(), kv, randn(6, 2, 5).float()), {}),
        (enc, (q,), {"src_key_padding_mask": padding}),
        (stack, (randn(5, 2, 8).float(),), {"mask": causal}),
        (decoder, (randn(5, 2, 8).float(), randn(3, 2, 8).float()), {"tgt_mask": causal}),
        (model.decoder, (q, randn(2, 3, 8).float()), {"tgt_key_padding_mask": padding}),
        (model, (randn(2, 3, 8).float(), q), {"tgt_mask": causal}),
        (nn.LSTMCell(3, 4), (randn(2, 3).float(),), {}),
        (nn.GRUCell(3, 4), (randn(2, 3).float(), randn(2, 4).float()), {}),
        (nn.RNNCell(3, 4, nonlinearity="relu"), (randn(3).float(),), {}),
    ]


def test_every_decomposition_computes_what_its_module_computes():
    covered = set()
    for module, args, kwargs in _eager_pairs():
        module.eval()
        covered.add(type(module))
        with torch.no_grad():
            want = module(*args, **kwargs)
            got = DECOMPOSITIONS[type(module)](module, *args, **kwargs)
        for w, g in zip(*(torch.utils._pytree.tree_leaves(v) for v in (want, got))):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    assert covered == set(DECOMPOSITIONS)


class AttentionModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2)
        self.cell = nn.GRUCell(8, 8)

    def forward(self, x, padding):
        out, weights = self.attn(x, x, x, key_padding_mask=padding)
        return self.cell(out[-1], out[0]), weights


def test_modules_traced_through_their_decompositions_equal_pytorch():
    padding = torch.tensor([[False] * 4, [False, False, True, True]])
    record = assert_equal(AttentionModel(), (randn(4, 2, 8), padding))
    assert record.nests > 10
    with pytest.raises(UnsupportedOp, match="nn.MultiheadAttention.*add_bias_kv"):
        from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True).eval(),
                   (torch.randn(3, 1, 8),) * 3)


# ---------------------------------------------------------------- ops of model code

class ModelCode(nn.Module):
    """Item assignment, copy_, patches, shuffles and reductions as model files write them."""

    def forward(self, x):
        N, C, H, W = x.shape
        patches = x.unfold(2, 2, 2).unfold(3, 2, 2).reshape(N, C, -1, 4)
        cols = F.unfold(x, 3, padding=1, stride=2)
        shuffled = F.channel_shuffle(x, 2) + x.view(N, 2, C // 2, H, W).transpose(1, 2) \
            .reshape(N, C, H, W)
        up = F.pixel_shuffle(x, 2), F.pixel_unshuffle(x, 2)
        grid = F.adaptive_max_pool2d(x[:, :, :2, :2], (4, 6))
        out = x.new_zeros(N, C, H)
        for h in range(H):
            out[:, :, h] = x[:, :, h].amax(-1)
        out[..., 0] = 2.0
        copied = torch.zeros_like(cols)
        copied.copy_(cols * 2)
        peak = torch.max(x, dim=1, keepdim=True).values
        where = x.min(-1).indices * 2 + torch.max(x, 3)[1]
        return patches, copied, shuffled, up, grid, out, peak, where


def test_model_code_constructs_equal_pytorch():
    assert_equal(ModelCode(), (randn(2, 4, 4, 6),))


def test_shape_control_flow_and_loops_over_time_trace_with_concrete_shapes():
    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.LSTMCell(3, 4)

        def forward(self, x):
            B, T, _ = x.shape
            if T == 1:
                return x.sum(1)
            state = (x.new_zeros(B, 4), x.new_zeros(B, 4))
            for t in range(T):
                state = self.cell(x[:, t], state)
            return state

    record = assert_equal(Loop(), (randn(2, 3, 3),))
    assert record.nests >= 3 * 8  # the loop over time is unrolled


def test_assignment_at_a_tensor_index_says_why_it_is_unsupported():
    class Scatter(nn.Module):
        def forward(self, x, i):
            y = x.clone()
            y[i] = 0.0
            return y

    with pytest.raises(UnsupportedOp, match="written positions must be static"):
        from_torch(Scatter(), (torch.randn(4), torch.tensor([1, 2])))


def test_updating_a_tensor_in_place_after_taking_a_view_of_it_is_refused():
    class Aliased(nn.Module):
        def forward(self, x):
            out = x.new_zeros(4, 3)
            head = out[:2]
            out[0] = x[0]
            return head * 2

    with pytest.raises(UnsupportedOp, match="whose view is used afterwards"):
        from_torch(Aliased(), (torch.randn(4, 3),))


def test_reduction_named_tuples_give_values_and_indices():
    """torch.max/min with a dim return a named tuple; model code reads .values/.indices."""
    class Reduce(nn.Module):
        def forward(self, x):
            top = torch.max(x, dim=1, keepdim=True)
            low = torch.min(x, dim=-1)
            return top.values, top.indices, low.values * 2, low.indices

    assert_equal(Reduce(), (randn(3, 5, 4),))
