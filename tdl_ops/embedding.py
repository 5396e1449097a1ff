"""Embedding lookup (data-dependent indexing through an opaque function), its gradients and rules, one-hot."""

from __future__ import annotations

import numpy as np

import tilewise.tdl as tw

from ._cases import Case

# table (V, D) and one id -> row (D,): the only data-dependent indexing, hidden in an opaque function.
Lookup = tw.opaque("Lookup", fn=lambda table, idx: table[int(np.asarray(idx).reshape(-1)[0])],
                   shape=lambda table, idx: (table[1],))


def _lookup_ref(table, ids, padding_idx=-1):
    return table[ids.astype(np.int64)]


def _lookup_shape(table, ids, padding_idx=-1):
    return tuple(ids) + (table[1],)


@tw.op(reference=_lookup_ref, out_shape=_lookup_shape, kernel="embedding")
def embedding(table, ids, padding_idx=-1):
    """out[b, d] = table[ids[b], d]. ``padding_idx`` (torch's nn.Embedding): that row gets no gradient."""
    return lambda b, d: Lookup(table[:, :], ids[b])[d]


@embedding.def_grad
def _(g, table, ids, out, padding_idx=-1):
    # ids are integers: no gradient
    return embedding_grad(ids, g, num_embeddings=table.shape[0], padding_idx=padding_idx), None


@tw.op(reference=_lookup_ref, out_shape=_lookup_shape, kernel="embedding")
def embedding_seq(table, ids, padding_idx=-1):
    """out[b, t, d] = table[ids[b, t], d] for a (batch, time) id matrix."""
    return lambda b, t, d: Lookup(table[:, :], ids[b, t])[d]


@embedding_seq.def_grad
def _(g, table, ids, out, padding_idx=-1):
    return embedding_seq_grad(ids, g, num_embeddings=table.shape[0], padding_idx=padding_idx), None


def _embedding_grad_ref(ids, dy, num_embeddings=1, padding_idx=-1):
    out = np.zeros((num_embeddings, dy.shape[1]))
    np.add.at(out, ids.astype(np.int64), dy)
    if padding_idx >= 0:
        out[padding_idx] = 0.0
    return out


def _grad_shape(ids, dy, num_embeddings=1, padding_idx=-1):
    return (num_embeddings, dy[-1])


@tw.op(reference=_embedding_grad_ref, out_shape=_grad_shape, kernel="embedding_grad")
def embedding_grad(ids, dy, num_embeddings=1, padding_idx=-1):
    """dtable[v, d] = sum_b (ids[b] == v) * dy[b, d], except the padding row (no opaque function needed)."""
    if padding_idx >= 0:
        return lambda v, d: tw.Sum(lambda b: (ids[b] == tw.index_value(v)) * (ids[b] != padding_idx) * dy[b, d])
    return lambda v, d: tw.Sum(lambda b: (ids[b] == tw.index_value(v)) * dy[b, d])


def _embedding_seq_grad_ref(ids, dy, num_embeddings=1, padding_idx=-1):
    return _embedding_grad_ref(ids.reshape(-1), dy.reshape(-1, dy.shape[-1]), num_embeddings, padding_idx)


@tw.op(reference=_embedding_seq_grad_ref, out_shape=_grad_shape, kernel="embedding_grad")
def embedding_seq_grad(ids, dy, num_embeddings=1, padding_idx=-1):
    """dtable[v, d] = sum_{b, t} (ids[b, t] == v) * dy[b, t, d], except the padding row."""
    if padding_idx >= 0:
        return lambda v, d: tw.Sum(lambda b, t: (ids[b, t] == tw.index_value(v)) * (ids[b, t] != padding_idx)
                                   * dy[b, t, d])
    return lambda v, d: tw.Sum(lambda b, t: (ids[b, t] == tw.index_value(v)) * dy[b, t, d])


@tw.op(reference=lambda ids, depth=2: (ids[..., None] == np.arange(depth)).astype(np.float64),
       out_shape=lambda ids, depth=2: tuple(ids) + (depth,), kernel="one_hot")
def one_hot(ids, depth=2):
    """out[..., v] = 1.0 where ids[...] == v."""
    return tw.compute(ids.ndim + 1, lambda *i: ids[i[:-1]] == tw.index_value(i[-1]))


@one_hot.def_grad
def _(g, ids, out, depth):
    return (None,)


CASES = [
    Case("embedding", [(7, 4), (6,)], kinds=("normal", "ids:7")),
    Case("embedding_seq", [(9, 3), (2, 5)], kinds=("normal", "ids:9")),
    Case("embedding_grad", [(8,), (8, 3)], {"num_embeddings": 5}, ("ids:5",)),
    Case("embedding_seq_grad", [(2, 4), (2, 4, 3)], {"num_embeddings": 5}, ("ids:5",)),
    Case("one_hot", [(6,)], {"depth": 4}, ("ids:4",)),
    Case("one_hot", [(2, 3)], {"depth": 5}, ("ids:5",), name="one_hot_2d"),
]
