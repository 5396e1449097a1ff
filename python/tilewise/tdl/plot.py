"""Pictures of partition strategies: which part of each tensor every worker reads or writes."""

from __future__ import annotations


def _pick_dims(shape, regions):
    """Two dimensions to draw: those where workers' regions differ first, then the largest."""
    rank = len(shape)
    if rank <= 2:
        return list(range(rank))

    def varies(d):
        spans = {r[d] for r in regions if r is not None}
        return len(spans) > 1

    order = sorted(range(rank), key=lambda d: (not varies(d), -shape[d], d))
    return sorted(order[:2])


def draw_strategy(strategy, ax=None):
    """Draw each input and the output as a rectangle, shaded where each worker reads (writes).

    Tensors of rank > 2 are projected onto two dimensions, preferring those along which the
    workers differ. Overlapping shades mean data several workers need. Returns the Axes.
    """
    if strategy.input_shapes is None:
        raise ValueError("only concrete strategies can be drawn: use op.strategies(...), not symbolic_strategies")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    tensors = [(n, strategy.input_shapes[n], strategy.input_regions[n]) for n in strategy.input_regions]
    tensors.append(("output", strategy.output_shape, strategy.output_regions))
    if ax is None:
        _, ax = plt.subplots(1, len(tensors), figsize=(3.2 * len(tensors), 3.2), squeeze=False)
        ax = ax[0]
    if len(ax) != len(tensors):
        raise ValueError(f"need {len(tensors)} axes (inputs and output), got {len(ax)}")
    colors = plt.get_cmap("tab10")
    for a, (name, shape, regions) in zip(ax, tensors):
        dims = _pick_dims(shape, regions)
        rows = shape[dims[0]] if dims else 1
        cols = shape[dims[1]] if len(dims) > 1 else (shape[dims[0]] if dims else 1)
        if len(dims) == 1:
            rows = 1
        a.add_patch(Rectangle((0, 0), cols, rows, fill=False, lw=1.5, color="black"))
        for w, region in enumerate(regions):
            if region is None:
                continue
            if len(dims) == 2:
                (r0, r1), (c0, c1) = region[dims[0]], region[dims[1]]
            elif len(dims) == 1:
                (r0, r1), (c0, c1) = (0, 0), region[dims[0]]
            else:
                (r0, r1), (c0, c1) = (0, 0), (0, 0)
            a.add_patch(Rectangle((c0, r0), c1 - c0 + 1, r1 - r0 + 1, color=colors(w % 10), alpha=0.35, lw=0))
        a.set_xlim(-0.02 * cols, cols * 1.02)
        a.set_ylim(rows * 1.02, -0.02 * rows)
        label = "x".join(map(str, shape)) or "scalar"
        shown = f" dims {dims[0]},{dims[1]}" if len(dims) == 2 and len(shape) > 2 else ""
        a.set_title(f"{name} ({label}){shown}", fontsize=9)
        a.set_aspect("auto")
        a.set_xticks([])
        a.set_yticks([])
    handles = [Patch(color=colors(w % 10), alpha=0.5, label=f"worker {w}") for w in range(strategy.parts)]
    ax[-1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    ax[0].figure.suptitle(repr(strategy), fontsize=10, y=1.04)
    return ax
