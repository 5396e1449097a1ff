"""MultiheadAttention with PyTorch's parameters (packed in_proj_weight (3E, E), out_proj).

    >>> import tilewise as tw
    >>> mha = tw.nn.MultiheadAttention(16, 4, batch_first=True)
    >>> [(n, p.shape) for n, p in mha.named_parameters()]
    [('in_proj_weight', (48, 16)), ('in_proj_bias', (48,)), ('out_proj.weight', (16, 16)), ('out_proj.bias', (16,))]
    >>> g = tw.Graph()
    >>> x = g.input("x", (2, 5, 16))
    >>> out, _ = mha(x, x, x)
    >>> out.shape
    (2, 5, 16)

Self-attention (query, key and value the same tensor) is one packed projection (B, S, 3E) from
which ``split_heads`` reads q, k and v per head; scores are ``batch_matmul_nt`` over (B*heads)
batches, scaled, soft-maxed, optionally dropped out, multiplied with v, and ``merge_heads``
restores (B, S, E) for the output projection.
"""

from __future__ import annotations

import math

import tdl_ops

from .._core import GraphError, ShapeError
from . import functional as F
from .linear import Linear
from .module import Module, Parameter


class MultiheadAttention(Module):
    """``forward(query, key, value)`` -> ``(output, None)`` (attention weights are not returned).

    Inputs (B, S, E) with ``batch_first=True``, else (S, B, E) (then permuted in and out).
    ``key_padding_mask`` (B, S), bool or 0/1: True marks keys to ignore (torch's convention); their
    scores become float32's lowest value before the softmax (torch uses -inf: the same weights
    unless every key of a row is masked, which gives torch NaN and here equal weights). ``attn_mask``
    is not supported.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 batch_first: bool = False):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise GraphError(f"MultiheadAttention: embed_dim {embed_dim} must be a positive multiple of "
                             f"num_heads {num_heads}")
        if not bias:
            raise GraphError("MultiheadAttention: bias=False is not supported")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.batch_first = batch_first
        self.in_proj_weight = Parameter((3 * embed_dim, embed_dim))
        self.in_proj_bias = Parameter((3 * embed_dim,))
        self.out_proj = Linear(embed_dim, embed_dim)

    def _mask_keys(self, scores, mask, batch: int, keys: int):
        """scores (B*heads, L, S) with the keys ``mask`` (B, S) marks set to float32's lowest value."""
        if tuple(mask.shape) != (batch, keys):
            raise ShapeError(f"MultiheadAttention: key_padding_mask must be (batch, keys) = {(batch, keys)}, "
                             f"got {tuple(mask.shape)}")
        h = self.num_heads
        per_head = tdl_ops.expand(tdl_ops.reshape(mask, shape=(batch, 1, 1, keys), in_shape=(batch, keys)),
                                  shape=(batch, h, 1, keys), bcast=(1,))
        rows = tdl_ops.reshape(per_head, shape=(batch * h, 1, keys), in_shape=(batch, h, 1, keys))
        return tdl_ops.masked_fill(scores, rows, value=-3.4028234663852886e38, mask_bcast=(1,))

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = False, attn_mask=None):
        if attn_mask is not None:
            raise GraphError("MultiheadAttention: attn_mask is not supported (key_padding_mask is)")
        if need_weights:
            raise GraphError("MultiheadAttention: need_weights=True is not supported (pass need_weights=False)")
        e = self.embed_dim
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.ndim != 3 or t.shape[-1] != e:
                raise ShapeError(f"MultiheadAttention: {name} must be 3-d with last extent {e}, got {t.shape}")
        if key.shape != value.shape or key.shape[0 if self.batch_first else 1] != query.shape[
                0 if self.batch_first else 1]:
            raise ShapeError(f"MultiheadAttention: key {key.shape} and value {value.shape} must match, with "
                             f"the batch of query {query.shape}")
        same = query is key is value or (query == key and key == value)
        if not self.batch_first:
            # (S, B, E) -> (B, S, E): heads are split along the batch rows.
            query = tdl_ops.permute(query, perm=(1, 0, 2))
            key = query if same else tdl_ops.permute(key, perm=(1, 0, 2))
            value = key if same else tdl_ops.permute(value, perm=(1, 0, 2))
        h, dh = self.num_heads, self.head_dim
        if same:
            qkv = F.linear(query, self.in_proj_weight, self.in_proj_bias)
            q, k, v = (tdl_ops.split_heads(qkv, heads=h, dim_head=dh, piece=i, pieces=3) for i in range(3))
        else:
            w, b = self.in_proj_weight, self.in_proj_bias
            heads = []
            for i, x in enumerate((query, key, value)):
                wi = tdl_ops.slice_axis(w, axis=0, start=i * e, stop=(i + 1) * e if i < 2 else 0)
                bi = tdl_ops.slice_axis(b, axis=0, start=i * e, stop=(i + 1) * e if i < 2 else 0)
                heads.append(tdl_ops.split_heads(F.linear(x, wi, bi), heads=h, dim_head=dh))
            q, k, v = heads
        scores = tdl_ops.scale(tdl_ops.batch_matmul_nt(q, k), alpha=1.0 / math.sqrt(dh))
        if key_padding_mask is not None:
            scores = self._mask_keys(scores, key_padding_mask, key.shape[0], key.shape[1])  # key is (B, S, E) here
        attn = F.softmax(scores)
        attn = F.dropout(attn, self.dropout, self.training, name="dropout_mask")
        ctx = tdl_ops.merge_heads(tdl_ops.batch_matmul(attn, v), heads=h, dim_head=dh)
        out = self.out_proj(ctx)
        if not self.batch_first:
            out = tdl_ops.permute(out, perm=(1, 0, 2))
        return out, None
