"""Capturing a torch module: torch.export, its signature, and the nodes the outputs need.

torch.export (not torch.fx.symbolic_trace) because
* it traces what really runs: Python control flow on shapes, tensor-valued attribute updates and
  the helper functions of Hugging Face models (fx's symbolic tracing fails on BertModel:
  "'Proxy' object does not support item assignment");
* every node is an ATen operator, one vocabulary for what fx sees three ways (modules,
  functions, tensor methods), so one table of rules covers ``nn.Linear``, ``F.linear`` and
  ``x @ w.T + b`` alike;
* shapes come from fake tensors (``node.meta["val"]``) without running any arithmetic, so big
  models import as fast as small ones;
* the signature names every parameter and buffer by its fully qualified name, and each node
  carries the module it came from (``nn_module_stack``) and the source line (``stack_trace``).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import warnings
from dataclasses import dataclass, field

from ..._core import GraphError


@dataclass
class Captured:
    """An exported program reduced to what the converter needs."""

    program: object  # torch.export.ExportedProgram
    nodes: list  # fx nodes in topological order
    parameters: dict  # placeholder node name -> (fully qualified name, tensor)
    constants: dict  # placeholder node name -> (fully qualified name, tensor): buffers, lifted constants
    user_inputs: list  # placeholder node names, in the order of the flattened example inputs
    outputs: list  # flattened user outputs: fx nodes or plain values
    live: set = field(default_factory=set)  # nodes the user outputs depend on
    name: str = "graph"


def _as_args(example_inputs):
    import torch

    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,), {}
    if isinstance(example_inputs, dict):
        return (), dict(example_inputs)
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs), {}
    raise GraphError(f"from_torch: example_inputs must be a tensor, a tuple of inputs or a dict of keyword "
                     f"inputs, got {type(example_inputs).__name__}")


@contextlib.contextmanager
def _quiet_torch():
    """Silence torch's warnings, log records and stderr prints while exporting: a failure becomes
    one GraphError, not pages of fake-tensor tracebacks and partial graphs on stderr."""
    loggers = [logging.getLogger(n) for n in list(logging.Logger.manager.loggerDict)
               if n == "torch" or n.startswith("torch.")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        for lg in loggers:
            lg.setLevel(logging.CRITICAL + 1)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)


def _canonical_names(module) -> dict:
    """Every qualified name of a parameter or buffer -> the first name of the same tensor (tied weights,
    such as a decoder sharing the embedding table, are one parameter, as in module.parameters())."""
    first, canon = {}, {}
    for name, t in list(module.named_parameters(remove_duplicate=False)) + list(
            module.named_buffers(remove_duplicate=False)):
        canon[name] = first.setdefault(id(t), name)
    return canon


def capture(module, example_inputs) -> Captured:
    """Export ``module`` on ``example_inputs`` and collect parameters, constants and live nodes."""
    import torch

    if not isinstance(module, torch.nn.Module):
        raise GraphError(f"from_torch: expected a torch.nn.Module, got {type(module).__name__}")
    args, kwargs = _as_args(example_inputs)
    _check_signature(module, args, kwargs)
    try:
        with _quiet_torch():
            program = torch.export.export(module, args, kwargs)
    except Exception as e:
        raise _export_error(module, args, kwargs, e) from e

    sig = program.graph_signature
    state, consts = program.state_dict, program.constants
    canon = _canonical_names(module)
    parameters, constants, user_inputs = {}, {}, []
    for spec in sig.input_specs:
        kind = spec.kind.name
        name = spec.arg.name
        if kind == "PARAMETER":
            parameters[name] = (canon.get(spec.target, spec.target), state[spec.target])
        elif kind in ("BUFFER", "CONSTANT_TENSOR"):
            value = state[spec.target] if spec.target in state else consts[spec.target]
            constants[name] = (canon.get(spec.target, spec.target), value)
        elif kind == "USER_INPUT":
            user_inputs.append(name)
        else:
            raise GraphError(f"from_torch: inputs of kind {kind} ({spec.target}) are not supported")

    _inline_wrappers(program)
    nodes = list(program.graph.nodes)
    out_node = nodes[-1]
    assert out_node.op == "output", "an fx graph ends with its output node"
    outputs = list(out_node.args[0])
    user = [i for i, s in enumerate(sig.output_specs) if s.kind.name == "USER_OUTPUT"]
    outputs = [outputs[i] for i in user]

    live = _live(nodes, outputs)
    return Captured(program, nodes, parameters, constants, user_inputs, outputs, live, type(module).__name__)


# Higher-order ops that torch.export wraps around a region of the model without changing what it
# computes: the position of the submodule argument among the arguments (the ones after it are the
# submodule's inputs). wrap_with_set_grad_enabled comes from torch.no_grad() regions (Llama's rotary
# embedding), wrap_with_autocast from torch.autocast regions.
_WRAPPERS = {"wrap_with_set_grad_enabled": 1, "wrap_with_autocast": 4}


def _wrapper_submodule(node):
    """The position of the submodule argument when ``node`` is a wrapper to inline, else None."""
    if node.op != "call_function":
        return None
    name = getattr(node.target, "_name", None) or getattr(node.target, "__name__", "")
    return _WRAPPERS.get(name)


def _inline_wrappers(program) -> None:
    """Replace every wrapper call (``_WRAPPERS``) by the nodes of its submodule, in place.

    The submodule's placeholders take the call's arguments, its outputs replace the ``getitem``
    users of the call. Nested wrappers are inlined too (the loop runs until none is left). The
    nodes keep their metadata (fake values, module stack, source line).
    """
    import operator

    import torch

    gm = program.graph_module
    graph = gm.graph
    changed = True
    while changed:
        changed = False
        for node in list(graph.nodes):
            k = _wrapper_submodule(node)
            if k is None:
                continue
            sub_node = node.args[k]
            sub = getattr(gm, sub_node.target) if isinstance(sub_node, torch.fx.Node) else sub_node
            values = {}
            places = [n for n in sub.graph.nodes if n.op == "placeholder"]
            for ph, arg in zip(places, node.args[k + 1:]):
                values[ph] = arg
            outs = None
            with graph.inserting_before(node):
                for n in sub.graph.nodes:
                    if n.op == "placeholder":
                        continue
                    if n.op == "output":
                        outs = torch.fx.node.map_arg(n.args[0], lambda a: values[a])
                        continue
                    if n.op == "get_attr":  # a nested wrapper's submodule: make it reachable from gm
                        attr = f"{sub_node.target}_{n.target}"
                        setattr(gm, attr, getattr(sub, n.target))
                        values[n] = graph.get_attr(attr)
                        continue
                    values[n] = graph.node_copy(n, lambda a: values[a])
            for user in list(node.users):
                if user.op == "call_function" and user.target is operator.getitem:
                    user.replace_all_uses_with(outs[user.args[1]])
                    graph.erase_node(user)
            if node.users:
                node.replace_all_uses_with(outs)
            graph.erase_node(node)
            if isinstance(sub_node, torch.fx.Node) and not sub_node.users:
                graph.erase_node(sub_node)
            changed = True
    if program.graph_module.graph is graph:
        gm.recompile()


def _signature(module) -> str:
    try:
        return f"forward{inspect.signature(module.forward)}"
    except (TypeError, ValueError):
        return "forward(...)"


def _describe(args, kwargs) -> str:
    """The example inputs as the error messages show them: ``float32[2, 5]`` per tensor."""
    import torch

    def one(x):
        if isinstance(x, torch.Tensor):
            return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}"
        if isinstance(x, (list, tuple)):
            return "(" + ", ".join(one(y) for y in x) + ")"
        return type(x).__name__
    parts = [one(x) for x in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts) if parts else "no inputs"


def _check_signature(module, args, kwargs) -> None:
    """Example inputs that forward() cannot take: say so before torch.export tries."""
    try:
        sig = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        raise GraphError(
            f"from_torch: the example inputs do not fit {type(module).__name__}.{_signature(module)}: {e} "
            f"(given: {_describe(args, kwargs)}).\n"
            "Pass a tensor, a tuple of positional inputs, or a dict of keyword inputs (for Hugging Face "
            "models: {'input_ids': ..., 'decoder_input_ids': ...})."
        ) from None


_DATA_DEPENDENT = ("data-dependent", "data dependent", "GuardOnDataDependent", "Dynamic control flow")


def _export_error(module, args, kwargs, e) -> GraphError:
    """One GraphError for a torch.export failure, with the hint that fits its cause: control flow
    on tensor values, example inputs the model itself rejects (shapes, dtypes), or an operation
    torch.export cannot trace."""
    import copy

    import torch

    name = type(module).__name__
    text = str(e).strip()
    first = text.splitlines()[0] if text else type(e).__name__
    head = f"from_torch: torch.export could not capture {name}: {type(e).__name__}: {first}\n"
    if any(k in type(e).__name__ or k in text for k in _DATA_DEPENDENT):
        return GraphError(head + "The model branches on, or takes a size from, the value of a tensor "
                          "(`if x.sum() > 0`, `.item()`, `.tolist()`): tilewise graphs have static shapes and no "
                          "data-dependent control flow. Rewrite it with torch.where, or compute that value outside "
                          "the model.")
    # Does the model run on these inputs at all? (A copy: training-mode layers update buffers.)
    try:
        with _quiet_torch(), torch.no_grad():
            copy.deepcopy(module)(*args, **kwargs)
    except Exception as eager:
        msg = (str(eager).strip().splitlines() or [type(eager).__name__])[0]
        return GraphError(head + "The model fails on these example inputs in plain PyTorch too "
                          f"({type(eager).__name__}: {msg}): they do not fit {name}.{_signature(module)} "
                          f"(given: {_describe(args, kwargs)}). "
                          "Check their shapes and dtypes by calling the model on them.")
    return GraphError(head + f"The model runs in PyTorch on these inputs ({_describe(args, kwargs)}), but "
                      "torch.export cannot trace it; `torch.export.export(model, args, kwargs)` shows the full "
                      "error, and the torch.export documentation the usual rewrites.")


def _live(nodes, outputs) -> set:
    """The nodes the user outputs depend on, with the in-place ops that update any of them.

    Buffer updates that nothing reads (BatchNorm's num_batches_tracked) are side effects the graph
    does not model: they are left out. An in-place op on a live tensor is kept even when nothing
    reads its result, since later readers of the tensor see the update.
    """
    import torch

    live: set = set()

    def mark(roots):
        stack = list(roots)
        while stack:
            n = stack.pop()
            if n not in live:
                live.add(n)
                stack.extend(n.all_input_nodes)

    mark(o for o in outputs if isinstance(o, torch.fx.Node))
    changed = True
    while changed:
        changed = False
        for n in nodes:
            schema = getattr(n.target, "_schema", None) if n.op == "call_function" else None
            if n in live or schema is None or not schema.is_mutable or not n.args:
                continue
            target = n.args[0]
            if isinstance(target, torch.fx.Node) and (target in live or any(u in live for u in target.users)):
                mark([n])
                changed = True
    return live
