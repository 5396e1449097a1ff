"""BERT-style Transformer encoder (post-LayerNorm, GELU feed-forward of 4 x hidden, pooler).

With 12 layers, hidden 768, 12 heads and the 30522-word vocabulary it has the parameters of
Hugging Face's ``bert-base-uncased`` BertModel: 109,482,240 (embeddings, encoder, pooler).
Attention uses ``nn.MultiheadAttention``'s packed q|k|v projection (same count as BERT's three
Linear layers).

    >>> import tilewise as tw
    >>> g = tw.models.transformer(12, 768, 12, seq=128, batch=1, classes=None, train=False)
    >>> g.num_parameters
    109482240
"""

from __future__ import annotations

import tdl_ops

from .. import nn
from .._core import GraphError
from ..nn import functional as F
from ._build import build


class BertEmbeddings(nn.Module):
    def __init__(self, vocab: int, hidden: int, max_position: int, type_vocab: int, dropout: float):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_position, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids, token_type_ids):
        seq, most = ids.shape[1], self.position_embeddings.num_embeddings
        if seq > most:
            raise GraphError(f"BERT: sequence length {seq} exceeds max_position {most}")
        x = F.add(self.word_embeddings(ids), self.token_type_embeddings(token_type_ids))
        # Positions are 0..seq-1 for every sequence: the table's first rows, broadcast over the batch.
        pos = self.position_embeddings.weight
        if seq < pos.shape[0]:
            pos = tdl_ops.slice_axis(pos, axis=0, start=0, stop=seq)
        return self.dropout(self.LayerNorm(tdl_ops.add_broadcast(x, pos)))


class BertLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, dropout: float):
        super().__init__()
        self.attention = nn.MultiheadAttention(hidden, heads, dropout=dropout, batch_first=True)
        self.attention_dropout = nn.Dropout(dropout)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, 4 * hidden)
        self.activation = nn.GELU()
        self.output = nn.Linear(4 * hidden, hidden)
        self.output_dropout = nn.Dropout(dropout)
        self.output_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, padding_mask=None):
        a, _ = self.attention(x, x, x, key_padding_mask=padding_mask)
        x = self.attention_norm(F.add(x, self.attention_dropout(a)))
        h = self.output_dropout(self.output(self.activation(self.intermediate(x))))
        return self.output_norm(F.add(x, h))


class BertPooler(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.activation = nn.Tanh()

    def forward(self, x):
        return self.activation(self.dense(F.select(x, 1, 0)))  # the first ([CLS]) token


class BertModel(nn.Module):
    """Embeddings, ``layers`` encoder layers, pooler; ``classes``: a Linear head on the pooled output."""

    def __init__(self, layers: int = 12, hidden: int = 768, heads: int = 12, vocab: int = 30522,
                 max_position: int = 512, type_vocab: int = 2, dropout: float = 0.1, classes: int | None = None):
        super().__init__()
        if min(layers, hidden, heads, vocab) < 1 or hidden % heads:
            raise GraphError(f"BERT: layers, hidden, heads, vocab must be positive and hidden a multiple of heads, "
                             f"got {layers}, {hidden}, {heads}, {vocab}")
        self.embeddings = BertEmbeddings(vocab, hidden, max_position, type_vocab, dropout)
        self.encoder = nn.ModuleList(BertLayer(hidden, heads, dropout) for _ in range(layers))
        self.pooler = BertPooler(hidden)
        self.classifier = nn.Linear(hidden, classes) if classes else None

    def forward(self, ids, token_type_ids, padding_mask=None):
        x = self.embeddings(ids, token_type_ids)
        for layer in self.encoder:
            x = layer(x, padding_mask)
        pooled = self.pooler(x)
        return pooled if self.classifier is None else self.classifier(pooled)


def transformer(layers: int = 12, hidden: int = 768, heads: int = 12, seq: int = 128, batch: int = 8,
                vocab: int = 30522, classes: int | None = 2, dropout: float = 0.1, *, train: bool = True,
                optimizer=None, padding_mask: bool = False):
    """BERT-style encoder on (batch, seq) int64 token ids and token-type ids.

    ``padding_mask``: a third input, ``padding_mask`` (batch, seq) bool, True at the padding
    positions every attention ignores (torch's ``key_padding_mask``).

    ``classes``: cross-entropy on a Linear head over the pooled output; None: no head (BertModel's
    parameters exactly) and an MSE loss on the pooled output.
    """
    model = BertModel(layers, hidden, heads, vocab, dropout=dropout, classes=classes)
    out = classes or hidden
    inputs = [("ids", (batch, seq), "int64"), ("token_type_ids", (batch, seq), "int64")]
    if padding_mask:
        inputs.append(("padding_mask", (batch, seq), "bool"))
    return build(model, inputs, label=(batch, out),
                 loss="cross_entropy" if classes else "mse", train=train, optimizer=optimizer,
                 name=f"transformer-{layers}-{hidden}-{heads}")
