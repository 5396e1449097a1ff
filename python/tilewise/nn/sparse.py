"""Embedding: rows of a (num_embeddings, embedding_dim) table at integer ids (an input tensor).

    >>> import tilewise as tw
    >>> g = tw.Graph()
    >>> tw.nn.Embedding(100, 8)(g.input("ids", (2, 5))).shape
    (2, 5, 8)
"""

from __future__ import annotations

from .._core import GraphError
from . import functional as F
from .module import Module, Parameter


class Embedding(Module):
    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        if num_embeddings <= 0 or embedding_dim <= 0:
            raise GraphError(f"Embedding: sizes must be positive, got {num_embeddings}, {embedding_dim}")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter((num_embeddings, embedding_dim))

    def forward(self, ids):
        return F.embedding(ids, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"
