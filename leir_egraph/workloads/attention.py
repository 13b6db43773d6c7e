"""Causal self-attention program types: multi-head (MinGPT style, fused q/k/v projection),
multi-query (one key/value head) and grouped-query attention, each optionally followed by a
GEMM, an activation and a reduction over the sequence (``GQA_Gemm_GeLU_max``).

The attention is written out the way MinGPT and the Step-TP collection write it: projection,
``view``/``transpose`` into heads, ``q @ k.transpose(-2, -1) * (1/sqrt(d))``, ``masked_fill``
with a causal mask buffer, softmax, ``att @ v``, heads merged back, output projection.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .registry import Input, Kind, register

SMALL = {"batch": (1, 2), "seq": (2, 6), "head_dim": (2, 4), "heads": [2, 4], "groups": [1, 2],
         "out": (2, 8)}
PAPER = {"batch": (1, 128), "seq": (1, 1024), "head_dim": [16, 32, 64, 128],
         "heads": [2, 4, 8, 16, 32, 64, 128], "groups": [1, 2, 4, 8, 16], "out": (8, 1024)}


class CausalSelfAttention(nn.Module):
    """``style``: ``mha`` (one c_attn projection split into q, k, v), ``mqa`` (one key/value
    head), ``gqa`` (``kv_heads`` key/value heads, each shared by a group of query heads).
    ``tail``: optional ``gemm``, then ``relu``/``gelu``/``tanh``, then ``sum``/``mean``/``max``."""

    def __init__(self, style, n_embd, n_head, kv_heads, seq_len, max_seqlen, tail, out_features):
        super().__init__()
        self.style, self.n_head, self.kv_heads = style, n_head, kv_heads
        self.n_embd, self.head_dim = n_embd, n_embd // n_head
        if style == "mha":
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        else:
            self.q_proj = nn.Linear(n_embd, n_embd)
            self.k_proj = nn.Linear(n_embd, kv_heads * self.head_dim)
            self.v_proj = nn.Linear(n_embd, kv_heads * self.head_dim)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen))
                             .view(1, 1, max_seqlen, max_seqlen))
        self.tail = tail
        if "gemm" in tail:
            self.gemm = nn.Linear(n_embd, out_features, bias=False)

    def forward(self, x):
        B, T, Cn = x.size()
        hd = self.head_dim
        if self.style == "mha":
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, hd).transpose(1, 2)
            q = q.view(B, T, self.n_head, hd).transpose(1, 2)
            v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        else:
            group = self.n_head // self.kv_heads
            q = self.q_proj(x).view(B, T, self.n_head, hd).transpose(1, 2)
            k = self.k_proj(x).view(B, T, self.kv_heads, hd)
            v = self.v_proj(x).view(B, T, self.kv_heads, hd)
            k = k.unsqueeze(2).expand(B, T, group, self.kv_heads, hd).contiguous() \
                .view(B, T, self.n_head, hd).transpose(1, 2)
            v = v.unsqueeze(2).expand(B, T, group, self.kv_heads, hd).contiguous() \
                .view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, Cn)
        y = self.c_proj(y)
        if "gemm" in self.tail:
            y = self.gemm(y)
        if "relu" in self.tail:
            y = torch.relu(y)
        elif "gelu" in self.tail:
            y = F.gelu(y)
        elif "tanh" in self.tail:
            y = torch.tanh(y)
        if "sum" in self.tail:
            y = torch.sum(y, dim=1, keepdim=True)
        elif "mean" in self.tail:
            y = torch.mean(y, dim=1, keepdim=True)
        elif "max" in self.tail:
            y = torch.max(y, dim=1, keepdim=True)[0]
        return y


def _attention_kind(name: str, style: str, tail: tuple[str, ...]):
    def make(d, dtype):
        heads = d["heads"]
        kv = 1 if style == "mqa" else (heads if style == "mha" else min(d["groups"], heads))
        n_embd = heads * d["head_dim"]
        m = CausalSelfAttention(style, n_embd, heads, kv, d["seq"], max(d["seq"], 8), tail,
                                d["out"])
        m.__class__ = type(name, (CausalSelfAttention,), {})
        return m, [Input((d["batch"], d["seq"], n_embd))]

    register(Kind(name, "attention", 2, make, SMALL, PAPER))


_TAILS = {"": (), "_Gemm": ("gemm",), "_Gemm_ReLU": ("gemm", "relu"),
          "_Gemm_GeLU": ("gemm", "gelu"), "_Gemm_Tanh": ("gemm", "tanh"),
          "_sum": ("sum",), "_mean": ("mean",), "_max": ("max",)}

_attention_kind("MinGPTCausalAttention", "mha", ())
for _prefix, _style in (("MHA", "mha"), ("MQA", "mqa"), ("GQA", "gqa")):
    for _suffix, _tail in _TAILS.items():
        if _prefix == "MHA" and _suffix == "":
            continue  # that is MinGPTCausalAttention
        _attention_kind(_prefix + _suffix, _style, _tail)
# the gemm-activation-reduction heads of the Step-TP collection
for _name, _style, _tail in [
        ("MHA_Gemm_GeLU_mean", "mha", ("gemm", "gelu", "mean")),
        ("MHA_Gemm_ReLU_sum", "mha", ("gemm", "relu", "sum")),
        ("MHA_Gemm_Tanh_max", "mha", ("gemm", "tanh", "max")),
        ("MQA_Gemm_GeLU_sum", "mqa", ("gemm", "gelu", "sum")),
        ("MQA_Gemm_ReLU_max", "mqa", ("gemm", "relu", "max")),
        ("MQA_Gemm_Tanh_mean", "mqa", ("gemm", "tanh", "mean")),
        ("GQA_Gemm_GeLU_max", "gqa", ("gemm", "gelu", "max")),
        ("GQA_Gemm_ReLU_mean", "gqa", ("gemm", "relu", "mean")),
        ("GQA_Gemm_Tanh_sum", "gqa", ("gemm", "tanh", "sum"))]:
    _attention_kind(_name, _style, _tail)


def _sdpa_kind(name, causal, gqa):
    def make(d, dtype):
        heads = d["heads"]
        kv = min(d["groups"], heads) if gqa else heads

        class Attn(nn.Module):
            def forward(self, q, k, v):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

        Attn.__name__ = name
        b, t, e = d["batch"], d["seq"], d["head_dim"]
        return Attn(), [Input((b, heads, t, e)), Input((b, kv, t, e)), Input((b, kv, t, e))]

    register(Kind(name, "attention", 2, make, SMALL, PAPER))


_sdpa_kind("SDPA_Causal", True, False)
_sdpa_kind("SDPA_GQA_Causal", True, True)
