"""Pictures of partition plans in the style of Tofu Fig. 11: for a few ops, the weight tensor (top
row) and the input activation (bottom row), each a rectangle divided into the tiles the devices
hold, coloured by device.

A tensor is drawn over its first two dimensions: rows = dim 0, columns = dim 1 (batch x channels
for activations, out x in channels for convolution weights); a vector is one row. Devices whose
tiles cover the same drawn region (the tensor is replicated at some step, or cut along a dimension
not drawn) are stacked like sheets, the lowest device on top, and hatched. The tiling string under
each rectangle says which it is ("P0 r": dimension 0 cut at step 1, replicated at step 2).
matplotlib is imported here only (it is optional: ``pip install 'tilewise[plot]'``).
"""

from __future__ import annotations

from .._util import check_int, fmt_bytes
from .tiling import lookup, tile_boxes

#: Op types drawn by default: those with a weight, where Fig. 11 shows the choices that matter.
DRAWN_TYPES = frozenset({
    "conv1d", "conv2d", "depthwise_conv2d", "linear", "linear_nobias", "matmul", "matmul_nt", "matmul_tn",
    "matmul_tt", "matmul_nd", "batch_matmul", "batch_matmul_nt", "batch_matmul_tn", "bmatmul", "bmatmul_nt",
    "bmatmul_tn", "matvec", "vecmat", "lstm_gates",
})
_PARAMETER_ROLES = ("parameter", "constant", "optimizer_state")

_CELL_W, _CELL_H = 1.0, 1.0  # every tensor is drawn into a unit square: shapes differ by orders of magnitude
_COL_STEP, _ROW_STEP = 1.6, 1.55
_LINE = 0.12  # height of a 6.5 pt text line, with the figure at one inch per unit


def default_ops(plan, max_ops: int = 12):
    """Forward convolution / linear / matmul ops (else forward ops reading a parameter, else every
    forward op), evenly sampled down to ``max_ops``."""
    forward = [o for o in plan.graph.ops if o.phase == "forward" and o.forward_op is None and o.inputs]
    chosen = [o for o in forward if o.type in DRAWN_TYPES]
    if not chosen:
        chosen = [o for o in forward if any(t.role in _PARAMETER_ROLES for t in o.inputs)] or forward
    if len(chosen) <= max_ops:
        return chosen
    if max_ops == 1:
        return chosen[:1]
    step = (len(chosen) - 1) / (max_ops - 1)
    return [chosen[round(i * step)] for i in range(max_ops)]


def _operands(op):
    """(weight, activation) of an op: its first parameter-like input (else its second input) and
    the first other input; either may be None."""
    inputs = op.inputs
    weight = next((t for t in inputs if t.role in _PARAMETER_ROLES), None)
    if weight is None and len(inputs) > 1:
        weight = inputs[1]
    data = next((t for t in inputs if t != weight), None)
    return weight, data


def _device_colors(n: int):
    import matplotlib

    if n <= 10:
        cmap = matplotlib.colormaps["tab10"]
        return [cmap(i) for i in range(n)]
    if n <= 20:
        cmap = matplotlib.colormaps["tab20"]
        return [cmap(i) for i in range(n)]
    cmap = matplotlib.colormaps["turbo"]
    return [cmap(i / max(n - 1, 1)) for i in range(n)]


def _project(shape, box):
    """A tile as fractions of the drawn rectangle: (x0, x1, y0, y1), y growing downwards."""
    if len(shape) == 0:
        return 0.0, 1.0, 0.0, 1.0
    if len(shape) == 1:
        (lo, hi), n = box[0], shape[0]
        return lo / n, (hi + 1) / n, 0.0, 1.0
    (rlo, rhi), (clo, chi) = box[0], box[1]
    return clo / shape[1], (chi + 1) / shape[1], rlo / shape[0], (rhi + 1) / shape[0]


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1):]


def _draw_tensor(ax, plan, tensor, x, y, colors):
    from matplotlib.patches import Rectangle

    shape = tensor.shape
    parts = plan.parts
    cuts = plan._tilings[tensor.id]
    groups: dict[tuple, list[int]] = {}
    for d, box in enumerate(tile_boxes(shape, cuts, parts)):
        groups.setdefault(_project(shape, box), []).append(d)
    h = _CELL_H if len(shape) >= 2 else _CELL_H * 0.22  # a vector is one row
    y += (_CELL_H - h) / 2
    for (x0, x1, y0, y1), devs in groups.items():
        m = len(devs)
        off = min(0.03, 0.12 / m)  # stacked sheets peek out up and to the right
        for j in range(m - 1, -1, -1):
            ax.add_patch(Rectangle((x + x0 * _CELL_W + j * off, y + y0 * h - j * off), (x1 - x0) * _CELL_W,
                                   (y1 - y0) * h, facecolor=colors[devs[j]], edgecolor="black", lw=0.5,
                                   hatch="///" if (m > 1 and j == 0) else None, zorder=2 + (m - j) / m))
        w = (x1 - x0) * _CELL_W
        if w >= 0.14 and (y1 - y0) * h >= 0.14:
            if m <= 3:
                label = ",".join(map(str, devs))
            elif devs[-1] - devs[0] == m - 1:
                label = f"{devs[0]}..{devs[-1]}"
            else:
                label = f"{devs[0]},{devs[1]},…,{devs[-1]}"
            ax.text(x + (x0 + x1) / 2 * _CELL_W, y + (y0 + y1) / 2 * h, label, ha="center", va="center",
                    fontsize=6, zorder=5, bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7})
    dims = "x".join(map(str, shape)) or "scalar"
    ax.text(x + _CELL_W / 2, y + h + 0.05, f"{plan.tiling(tensor) or 'whole'}\n{_fit(tensor.name, 24)}\n{dims}",
            ha="center", va="top", fontsize=6.5, linespacing=1.1)


def _select(plan, ops, max_ops):
    max_ops = check_int("max_ops", max_ops, minimum=1)
    if ops is None:
        selected = default_ops(plan, max_ops)
    else:
        if isinstance(ops, str):
            ops = [ops]
        selected = [lookup(plan.graph, o, "op") for o in ops]
    if not selected:
        from .._core import PlanError

        raise PlanError(f"graph {plan.graph.name!r} has no op to draw")
    return selected


def render(plan, ax, ops) -> None:
    """Draw ``ops`` of ``plan`` into one Axes (data coordinates: a unit square per tensor)."""
    from matplotlib.patches import Patch

    colors = _device_colors(plan.devices)
    for c, op in enumerate(ops):
        weight, data = _operands(op)
        x = c * _COL_STEP
        ax.text(x + _CELL_W / 2, -0.18, "\n".join(plan.strategies(op)) or "whole", ha="center", va="bottom",
                fontsize=6.5, linespacing=1.1)
        ax.text(x + _CELL_W / 2, -0.22 - _LINE * max(len(plan.parts), 1), _fit(op.name, 24), ha="center",
                va="bottom", fontsize=6.5, fontweight="bold")
        for row, tensor in enumerate((weight, data)):
            if tensor is not None:
                _draw_tensor(ax, plan, tensor, x, row * _ROW_STEP, colors)
    ax.text(-0.12, _CELL_H / 2, "weights", rotation=90, ha="right", va="center", fontsize=8)
    ax.text(-0.12, _ROW_STEP + _CELL_H / 2, "activations", rotation=90, ha="right", va="center", fontsize=8)
    ax.set_xlim(-0.4, (len(ops) - 1) * _COL_STEP + _CELL_W + 0.3)
    ax.set_ylim(_ROW_STEP + _CELL_H + 0.45, -0.45 - _LINE * max(len(plan.parts), 1))
    ax.set_aspect("equal")
    ax.axis("off")
    parts = " x ".join(map(str, plan.parts)) or "1"
    ax.set_title(f"{plan.graph.name}: {plan.algorithm} on {plan.devices} devices ({parts}), "
                 f"{fmt_bytes(plan.comm_bytes)} moved per iteration", fontsize=9)
    if plan.devices <= 20:
        handles = [Patch(facecolor=colors[d], edgecolor="black", lw=0.5, label=f"device {d}")
                   for d in range(plan.devices)]
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///", lw=0.5,
                             label="stacked: replicated or\ncut along an undrawn dim"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=6.5, frameon=False)


def figure_size(n_ops: int, steps: int = 3) -> tuple[float, float]:
    """Inches at about one inch per unit of the drawing, plus the legend."""
    return _COL_STEP * n_ops + 2.2, _ROW_STEP + _CELL_H + 1.3 + _LINE * max(steps, 1)


def draw_plan(plan, ax=None, ops=None, max_ops: int = 12):
    """``Plan.draw``: returns the Axes (a new figure when ``ax`` is None); never shows it."""
    selected = _select(plan, ops, max_ops)
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=figure_size(len(selected), len(plan.parts)))
    render(plan, ax, selected)
    return ax


def plan_figure(plan, ops=None, max_ops: int = 12):
    """A matplotlib Figure of the plan, made without pyplot (no GUI backend): for scripts and the CLI."""
    from matplotlib.figure import Figure

    selected = _select(plan, ops, max_ops)
    fig = Figure(figsize=figure_size(len(selected), len(plan.parts)), layout="tight")
    render(plan, fig.add_subplot(), selected)
    return fig
