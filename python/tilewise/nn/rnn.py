"""LSTM unrolled over time steps: multi-layer, bidirectional, PyTorch parameter names and layouts.

    >>> import tilewise as tw
    >>> lstm = tw.nn.LSTM(8, 16, num_layers=2, bidirectional=True)
    >>> [n for n, _ in lstm.named_parameters()][:4]
    ['weight_ih_l0', 'weight_hh_l0', 'bias_ih_l0', 'bias_hh_l0']
    >>> g = tw.Graph()
    >>> out, (h_n, c_n) = lstm(g.input("x", (5, 3, 8)))        # (T, B, in)
    >>> out.shape, h_n.shape
    ((5, 3, 32), (4, 3, 16))

Each step of each layer and direction is three ops (``lstm_gates``, ``lstm_cell``,
``lstm_hidden``) inside ``graph.unroll("<path>.l<k>[_reverse]")``, so the k-th op of every step
shares an unroll key and coarsening can merge the time steps (Tofu §5.1).

Besides PyTorch's tensor input, ``forward`` takes a list of per-step (B, in) tensors and then
returns lists (outputs per step, h_n and c_n per layer and direction) instead of stacked
tensors: stacking and re-slicing would add ops that an unrolled model does not need.
"""

from __future__ import annotations

import tdl_ops

from .._core import GraphError, ShapeError
from ..graph.graph import GTensor
from . import functional as F
from .module import Module, Parameter


class LSTM(Module):
    """Long short-term memory layers (gate order i, f, g, o as PyTorch).

    ``forward(input, hx=None)`` -> ``(output, (h_n, c_n))``; input (T, B, in), or (B, T, in) with
    ``batch_first``, or a list of T tensors (B, in). hx = (h_0, c_0) each (layers*dirs, B, H) or a
    list; when omitted, zero initial states are graph inputs ``<path>.h0_l<k>`` / ``c0_l<k>``
    (role "input": the runtime feeds zeros).
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False):
        super().__init__()
        if min(input_size, hidden_size, num_layers) <= 0:
            raise GraphError(f"LSTM: sizes must be positive, got input_size={input_size}, "
                             f"hidden_size={hidden_size}, num_layers={num_layers}")
        if not bias:
            raise GraphError("LSTM: bias=False is not supported")
        if not 0.0 <= dropout < 1.0:
            raise GraphError(f"LSTM: dropout must be in [0, 1), got {dropout}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.batch_first, self.dropout, self.bidirectional = batch_first, dropout, bidirectional
        dirs = 2 if bidirectional else 1
        h4 = 4 * hidden_size
        for k in range(num_layers):
            fan_in = input_size if k == 0 else hidden_size * dirs
            for sfx in self._suffixes(k):
                setattr(self, f"weight_ih{sfx}", Parameter((h4, fan_in)))
                setattr(self, f"weight_hh{sfx}", Parameter((h4, hidden_size)))
                setattr(self, f"bias_ih{sfx}", Parameter((h4,)))
                setattr(self, f"bias_hh{sfx}", Parameter((h4,)))

    def _suffixes(self, k: int) -> list[str]:
        return [f"_l{k}"] + ([f"_l{k}_reverse"] if self.bidirectional else [])

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}"
                + (", batch_first=True" if self.batch_first else "")
                + (", bidirectional=True" if self.bidirectional else ""))

    # ----- forward -----------------------------------------------------------------------

    def forward(self, input, hx=None):
        as_list = isinstance(input, (list, tuple))
        steps = self._steps(input)
        batch = steps[0].shape[0]
        h0, c0 = self._initial(hx, steps[0].graph, batch)
        h_n, c_n = [], []
        for k in range(self.num_layers):
            outs = []
            for d, sfx in enumerate(self._suffixes(k)):
                i = k * len(self._suffixes(k)) + d
                hs, h, c = self._direction(steps, sfx, h0[i], c0[i], reverse=d == 1)
                outs.append(hs)
                h_n.append(h)
                c_n.append(c)
            if self.bidirectional:
                g = steps[0].graph
                with g.unroll(g.scoped(f"l{k}_concat")) as u:
                    steps = []
                    for t in range(len(outs[0])):
                        with u.step(t):
                            steps.append(F.cat([outs[0][t], outs[1][t]], dim=-1))
            else:
                steps = outs[0]
            if self.dropout and self.training and k < self.num_layers - 1:
                steps = [F.dropout(s, self.dropout, name=f"mask_l{k}_t{t}") for t, s in enumerate(steps)]
        if as_list:
            return steps, (h_n, c_n)
        output = F.stack(steps, dim=1 if self.batch_first else 0)
        return output, (F.stack(h_n), F.stack(c_n))

    def _steps(self, input) -> list[GTensor]:
        if isinstance(input, (list, tuple)):
            if not input:
                raise ShapeError("LSTM: the input sequence is empty")
            shape = input[0].shape
            for t, x in enumerate(input):
                if not isinstance(x, GTensor) or x.shape != shape or x.ndim != 2:
                    raise ShapeError(f"LSTM: step {t} of the input list must be a (batch, {self.input_size}) graph "
                                     f"tensor like step 0 {shape}, got {getattr(x, 'shape', x)!r}")
            steps = list(input)
        else:
            if not isinstance(input, GTensor) or input.ndim != 3:
                raise ShapeError(f"LSTM: input must be a 3-d graph tensor (T, B, in) or a list of (B, in) tensors, "
                                 f"got {getattr(input, 'shape', type(input).__name__)!r}")
            axis = 1 if self.batch_first else 0
            g = input.graph
            with g.unroll(g.scoped("input")) as u:
                steps = []
                for t in range(input.shape[axis]):
                    with u.step(t):
                        steps.append(F.select(input, axis, t))
        if steps[0].shape[1] != self.input_size:
            raise ShapeError(f"LSTM: input features {steps[0].shape[1]} != input_size {self.input_size}")
        return steps

    def _initial(self, hx, graph, batch: int):
        n = self.num_layers * (2 if self.bidirectional else 1)
        want = (batch, self.hidden_size)
        if hx is None:
            names = [sfx for k in range(self.num_layers) for sfx in self._suffixes(k)]
            return ([graph.input(f"h0{s}", want) for s in names], [graph.input(f"c0{s}", want) for s in names])
        try:
            h0, c0 = hx
        except (TypeError, ValueError):
            raise GraphError("LSTM: hx must be a pair (h_0, c_0)") from None
        states = []
        for name, s in (("h_0", h0), ("c_0", c0)):
            if isinstance(s, GTensor):
                if s.shape != (n,) + want:
                    raise ShapeError(f"LSTM: {name} must have shape {(n,) + want}, got {s.shape}")
                s = [F.select(s, 0, i) for i in range(n)]
            elif len(s) != n or any(t.shape != want for t in s):
                raise ShapeError(f"LSTM: {name} must be {n} tensors of shape {want}")
            states.append(list(s))
        return states

    def _direction(self, steps, sfx: str, h: GTensor, c: GTensor, reverse: bool):
        """One layer in one direction: per-step hidden states (in time order), last h and c."""
        w_ih, w_hh = getattr(self, f"weight_ih{sfx}"), getattr(self, f"weight_hh{sfx}")
        b_ih, b_hh = getattr(self, f"bias_ih{sfx}"), getattr(self, f"bias_hh{sfx}")
        g = h.graph
        order = range(len(steps) - 1, -1, -1) if reverse else range(len(steps))
        hs: list = [None] * len(steps)
        with g.unroll(g.scoped(sfx[1:])) as u:
            for t in order:
                with u.step(t):
                    gates = tdl_ops.lstm_gates(steps[t], h, w_ih, w_hh, b_ih, b_hh)
                    c = tdl_ops.lstm_cell(gates, c)
                    h = tdl_ops.lstm_hidden(gates, c)
                hs[t] = h
        return hs, h, c
