"""``nn`` modules traced through a decomposition into plain torch operations.

torch.fx keeps standard ``nn`` modules as one ``call_module`` node. For the modules below the
tracer (``tracing.py``) records the function here instead, called with a view of the module
whose parameters are traced values. Each function computes what the module's ``forward``
computes in eval mode (the same formulas as PyTorch's own math path, so results agree to
rounding); tests compare every one with its module in eager mode.

    nn.TransformerEncoderLayer(d, h)(x)  ->  x = norm1(x + self_attn(x, x, x)[0])
                                             x = norm2(x + linear2(relu(linear1(x))))
    nn.MultiheadAttention(E, H)(q, k, v) ->  linear projections, scores per head, softmax,
                                             weighted sum, out_proj (weights averaged)
    nn.LSTMCell(I, H)(x, (h, c))         ->  gates = linear(x) + linear(h); chunk(4); ...

Options a decomposition cannot follow raise ``UnsupportedOp`` naming the module.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .errors import UnsupportedOp


def _refuse(m, reason: str):
    """``m`` is the module, or the tracer's view of it (which knows the module's path)."""
    module = m.__dict__.get("_module", m)
    raise UnsupportedOp(f"nn.{type(module).__name__}", "", m.__dict__.get("_path", ""), reason)


# ---------------------------------------------------------------- attention

def _masked(scores, mask):
    """PyTorch's mask convention: a bool mask is True where attention is *not* allowed (the
    score becomes -inf), a float mask is added (in the scores' dtype: a float32 mask from
    ``generate_square_subsequent_mask`` on a float16 model)."""
    if mask.dtype == torch.bool:
        return scores.masked_fill(mask, float("-inf"))
    return scores + mask.to(scores.dtype)


def multihead_attention(m, query, key, value, key_padding_mask=None, need_weights=True,
                        attn_mask=None, average_attn_weights=True, is_causal=False):
    """``nn.MultiheadAttention.forward``: ``(output, weights or None)``."""
    if m.bias_k is not None or m.add_zero_attn:
        _refuse(m, "add_bias_kv / add_zero_attn")
    if m.training and m.dropout > 0:
        _refuse(m, "attention dropout in training mode is random; call module.eval()")
    batched = query.dim() == 3
    if batched and not m.batch_first:  # (L, N, E) -> (N, L, E)
        query, key, value = (t.transpose(0, 1) for t in (query, key, value))
    embed, heads = m.embed_dim, m.num_heads
    if m._qkv_same_embed_dim:
        w = m.in_proj_weight
        w_q, w_k, w_v = w[:embed], w[embed:2 * embed], w[2 * embed:]
    else:
        w_q, w_k, w_v = m.q_proj_weight, m.k_proj_weight, m.v_proj_weight
    b = m.in_proj_bias
    b_q, b_k, b_v = (None, None, None) if b is None else \
        (b[:embed], b[embed:2 * embed], b[2 * embed:])
    q = F.linear(query, w_q, b_q).unflatten(-1, (heads, embed // heads)).transpose(-2, -3)
    k = F.linear(key, w_k, b_k).unflatten(-1, (heads, embed // heads)).transpose(-2, -3)
    v = F.linear(value, w_v, b_v).unflatten(-1, (heads, embed // heads)).transpose(-2, -3)
    scores = torch.matmul(q * (1.0 / math.sqrt(embed // heads)), k.transpose(-2, -1))
    mask = attn_mask
    if mask is None and is_causal:
        mask = torch.ones(query.size(-2), key.size(-2), dtype=torch.bool).triu(1)
    if mask is not None:
        if mask.dim() == 3:  # (N*H, L, S)
            mask = mask.unflatten(0, (-1, heads))
        scores = _masked(scores, mask)
    if key_padding_mask is not None:  # (N, S) or (S,)
        padding = key_padding_mask.unsqueeze(-2)
        scores = _masked(scores, padding.unsqueeze(-2) if batched else padding)
    weights = torch.softmax(scores, dim=-1)
    out = torch.matmul(weights, v).transpose(-2, -3).flatten(-2)
    out = m.out_proj(out)
    if batched and not m.batch_first:
        out = out.transpose(0, 1)
    if not need_weights:
        return out, None
    if average_attn_weights:
        weights = weights.mean(dim=-3)
    return out, weights


# ---------------------------------------------------------------- transformer layers

def _residual(m, x, blocks):
    """``(norm, sublayer)`` pairs in turn with residual adds: ``x + f(norm(x))`` with
    ``m.norm_first`` (pre-norm), else ``norm(x + f(x))`` (post-norm, the default)."""
    for norm, sublayer in blocks:
        x = x + sublayer(norm(x)) if m.norm_first else norm(x + sublayer(x))
    return x


def _attention(attn, dropout, memory, mask, padding, causal):
    """A transformer layer's attention sublayer (self-attention when ``memory`` is None)."""
    def sublayer(x):
        kv = x if memory is None else memory
        out = attn(x, kv, kv, attn_mask=mask, key_padding_mask=padding, need_weights=False,
                   is_causal=causal)[0]
        return dropout(out)
    return sublayer


def _feed_forward(m, dropout):
    return lambda x: dropout(m.linear2(m.dropout(m.activation(m.linear1(x)))))


def transformer_encoder_layer(m, src, src_mask=None, src_key_padding_mask=None,
                              is_causal=False):
    """``nn.TransformerEncoderLayer.forward``: self-attention, feed-forward."""
    return _residual(m, src, [
        (m.norm1, _attention(m.self_attn, m.dropout1, None, src_mask, src_key_padding_mask,
                             is_causal)),
        (m.norm2, _feed_forward(m, m.dropout2))])


def transformer_encoder(m, src, mask=None, src_key_padding_mask=None, is_causal=None):
    """``nn.TransformerEncoder.forward``: its layers in turn, then the optional norm."""
    x = src
    for layer in m.layers:
        x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                  is_causal=bool(is_causal))
    return m.norm(x) if m.norm is not None else x


def transformer_decoder_layer(m, tgt, memory, tgt_mask=None, memory_mask=None,
                              tgt_key_padding_mask=None, memory_key_padding_mask=None,
                              tgt_is_causal=False, memory_is_causal=False):
    """``nn.TransformerDecoderLayer.forward``: self-attention, attention over ``memory``,
    feed-forward."""
    return _residual(m, tgt, [
        (m.norm1, _attention(m.self_attn, m.dropout1, None, tgt_mask, tgt_key_padding_mask,
                             tgt_is_causal)),
        (m.norm2, _attention(m.multihead_attn, m.dropout2, memory, memory_mask,
                             memory_key_padding_mask, memory_is_causal)),
        (m.norm3, _feed_forward(m, m.dropout3))])


def transformer_decoder(m, tgt, memory, tgt_mask=None, memory_mask=None,
                        tgt_key_padding_mask=None, memory_key_padding_mask=None,
                        tgt_is_causal=None, memory_is_causal=False):
    """``nn.TransformerDecoder.forward``: its layers in turn, then the optional norm."""
    x = tgt
    for layer in m.layers:
        x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                  tgt_key_padding_mask=tgt_key_padding_mask,
                  memory_key_padding_mask=memory_key_padding_mask,
                  tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
    return m.norm(x) if m.norm is not None else x


def transformer(m, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
    """``nn.Transformer.forward``: the encoder over ``src``, the decoder over ``tgt``."""
    memory = m.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                       is_causal=src_is_causal)
    return m.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                     tgt_key_padding_mask=tgt_key_padding_mask,
                     memory_key_padding_mask=memory_key_padding_mask,
                     tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)


# ---------------------------------------------------------------- recurrent cells

def _cell_state(m, x, hx):
    if hx is not None:
        return hx
    shape = x.shape[:-1] + (m.hidden_size,)
    return x.new_zeros(shape)


def lstm_cell(m, input, hx=None):  # noqa: A002 -- PyTorch's argument name
    """``nn.LSTMCell.forward``: ``(h', c')``."""
    h, c = hx if hx is not None else (_cell_state(m, input, None), _cell_state(m, input, None))
    gates = F.linear(input, m.weight_ih, m.bias_ih) + F.linear(h, m.weight_hh, m.bias_hh)
    i, f, g, o = gates.chunk(4, -1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def gru_cell(m, input, hx=None):  # noqa: A002
    """``nn.GRUCell.forward``: ``h'``."""
    h = _cell_state(m, input, hx)
    i_r, i_z, i_n = F.linear(input, m.weight_ih, m.bias_ih).chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, m.weight_hh, m.bias_hh).chunk(3, -1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h


def rnn_cell(m, input, hx=None):  # noqa: A002
    """``nn.RNNCell.forward``: ``h'`` (tanh or relu)."""
    h = _cell_state(m, input, hx)
    v = F.linear(input, m.weight_ih, m.bias_ih) + F.linear(h, m.weight_hh, m.bias_hh)
    return torch.tanh(v) if m.nonlinearity == "tanh" else torch.relu(v)


DECOMPOSITIONS = {
    nn.MultiheadAttention: multihead_attention,
    nn.TransformerEncoderLayer: transformer_encoder_layer,
    nn.TransformerEncoder: transformer_encoder,
    nn.TransformerDecoderLayer: transformer_decoder_layer,
    nn.TransformerDecoder: transformer_decoder,
    nn.Transformer: transformer,
    nn.LSTMCell: lstm_cell,
    nn.GRUCell: gru_cell,
    nn.RNNCell: rnn_cell,
}
