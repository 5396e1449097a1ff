"""Reading and validating an ONNX model before conversion: the file, ``onnx.checker``, the opset,
the element types and static shapes of the graph's inputs, initializers and outputs.

Everything here raises ``tw.GraphError`` with a message naming the file, the tensor and what
would be valid; problems of single nodes are the converter's (``_convert``), which lists them all.
"""

from __future__ import annotations

import os

from ..._core import GraphError

#: The oldest default-domain opset the rules are written for (Softmax's axis, Reduce*'s axes
#: input and Squeeze's axes input change meaning across versions; each rule reads the version).
MIN_OPSET = 7

#: ONNX element types the graph may hold as tensors (float32 only, today) and those accepted as
#: values known at import time (shapes, axes, indices, scalar operands).
FLOAT = 1
_TYPE_NAMES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
               9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16"}
KNOWN_TYPES = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13}
#: ONNX element types of graph inputs -> the graph dtype (token ids, masks: the runtime holds them).
INPUT_TYPES = {1: "float32", 7: "int64", 6: "int32", 9: "bool"}


def type_name(elem_type: int) -> str:
    return _TYPE_NAMES.get(int(elem_type), f"ONNX type {elem_type}")


def onnx_module():
    """The onnx package, imported on first use (``import tilewise`` must not import it)."""
    try:
        import onnx
    except ImportError:
        raise GraphError("from_onnx needs the onnx package: pip install onnx (or pip install tilewise[onnx])") from None
    return onnx


def load(model_or_path):
    """An ``onnx.ModelProto`` from a ModelProto, a path or the serialized bytes, checked by onnx.checker."""
    onnx = onnx_module()
    where = "the model"
    if isinstance(model_or_path, onnx.ModelProto):
        model = model_or_path
    elif isinstance(model_or_path, (bytes, bytearray)):
        model = _parse(onnx, bytes(model_or_path), "the bytes given")
    elif isinstance(model_or_path, (str, os.PathLike)):
        path = os.fspath(model_or_path)
        where = f"'{path}'"
        if not os.path.isfile(path):
            raise GraphError(f"from_onnx: no file '{path}'")
        with open(path, "rb") as f:
            model = _parse(onnx, f.read(), where)
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
            onnx.load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
    else:
        raise GraphError(f"from_onnx takes an onnx.ModelProto, a path or bytes, not {type(model_or_path).__name__}")
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise GraphError(f"from_onnx: {where} is not a valid ONNX model (onnx.checker: {first})") from None
    return model


def _parse(onnx, data: bytes, where: str):
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError; its type differs between protobuf builds
        raise GraphError(f"from_onnx: {where} is not an ONNX model (the protobuf does not parse: {e})") from None
    if not model.HasField("graph"):
        raise GraphError(f"from_onnx: {where} is not an ONNX model (no graph)")
    return model


def opset(model) -> int:
    """The default-domain opset the model imports, checked against what the rules know."""
    onnx = onnx_module()
    versions = {o.domain: o.version for o in model.opset_import}
    version = versions.get("", versions.get("ai.onnx"))
    newest = onnx.defs.onnx_opset_version()
    if version is None:
        raise GraphError("from_onnx: the model imports no default-domain (ai.onnx) opset")
    if not MIN_OPSET <= version <= newest:
        raise GraphError(f"from_onnx: opset {version} is not supported (opsets {MIN_OPSET} to {newest}: "
                         "convert the model with onnx.version_converter.convert_version)")
    return int(version)


def static_shape(value_info, batch, what: str, dims=None) -> tuple:
    """The shape of a graph input or output: a symbolic axis named in ``dims`` takes that extent, a
    symbolic first axis ``batch``."""
    tt = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type"):
        raise GraphError(f"from_onnx: {what} '{value_info.name}' is not a tensor (sequences, maps and optional "
                         "values are not supported)")
    if not tt.HasField("shape"):
        raise GraphError(f"from_onnx: {what} '{value_info.name}' has no shape (tilewise graphs have static shapes)")
    shape = []
    for k, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            shape.append(int(d.dim_value))
        elif d.HasField("dim_param") and dims and d.dim_param in dims:
            shape.append(int(dims[d.dim_param]))
        elif k == 0 and batch is not None:
            shape.append(int(batch))
        else:
            sym = f"'{d.dim_param}'" if d.HasField("dim_param") else "unknown"
            name = f"dims={{{d.dim_param!r}: N}}" if d.HasField("dim_param") else "a static shape"
            hint = f"pass batch=N or {name}" if k == 0 else f"pass {name}"
            if d.HasField("dim_value") and d.dim_value == 0:
                sym, hint = "0", "tensors with no elements are not supported"
            raise GraphError(f"from_onnx: {what} '{value_info.name}' axis {k} is {sym} "
                             f"(tilewise graphs have static shapes; {hint})")
    return tuple(shape)


def _positive(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def check_types(model, initializers: dict, batch, dims=None) -> dict:
    """name -> static shape of each graph input that is not an initializer; every problem of the
    inputs and outputs (dtype, symbolic axes) in one GraphError."""
    problems, shapes = [], {}
    if batch is not None and not _positive(batch):
        raise GraphError(f"from_onnx: batch must be a positive int, got {batch!r}")
    if dims is not None and not (isinstance(dims, dict) and all(_positive(v) for v in dims.values())):
        raise GraphError(f"from_onnx: dims must map symbolic axis names to positive ints, got {dims!r}")
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        try:
            shapes[vi.name] = static_shape(vi, batch, "input", dims)
        except GraphError as e:
            problems.append(str(e).removeprefix("from_onnx: "))
            continue
        elem = vi.type.tensor_type.elem_type
        if elem not in INPUT_TYPES:
            problems.append(f"input '{vi.name}' is {type_name(elem)} (graph inputs are float32, int64 or int32 "
                            "(token ids) or bool (masks))")
    for vi in model.graph.output:
        if not vi.type.HasField("tensor_type"):
            problems.append(f"output '{vi.name}' is not a tensor")
            continue
        elem = vi.type.tensor_type.elem_type
        if elem not in (0, FLOAT):
            problems.append(f"output '{vi.name}' is {type_name(elem)} (outputs are float32 only)")
    for name, init in initializers.items():
        if init.data_type not in KNOWN_TYPES:
            problems.append(f"initializer '{name}' is {type_name(init.data_type)} (float32 tensors; integers and "
                            "bool as known values only)")
    if problems:
        raise GraphError(f"from_onnx: {len(problems)} problem(s) with the model's inputs, outputs and "
                         "initializers:\n" + "\n".join(f"  {p}" for p in problems))
    return shapes


def infer_shapes(model, input_shapes: dict):
    """name -> shape of every value whose shape onnx's shape inference finds static (used to check
    each rule's result), with the inputs' symbolic axes bound first."""
    onnx = onnx_module()
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        if vi.name in input_shapes:
            dims = vi.type.tensor_type.shape.dim
            for d, n in zip(dims, input_shapes[vi.name], strict=True):
                d.Clear()
                d.dim_value = n
    try:
        m = onnx.shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
    except Exception:  # inference is a cross-check only: a model it cannot follow still converts
        return {}
    out = {}
    for vi in list(m.graph.value_info) + list(m.graph.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape") and all(d.HasField("dim_value")
                                                                            for d in tt.shape.dim):
            out[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
    return out
