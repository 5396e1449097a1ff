// Python view of the TDL stage: expression factories, op descriptions, analysis and the
// reference interpreter. Conversion only; the logic lives in cpp/tdl.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <thread>

#include "bindings/bindings.h"
#include "bindings/opaque_call.h"
#include "tdl/errors.h"
#include "tdl/interpreter.h"
#include "tdl/op_cost.h"
#include "tdl/op_desc.h"
#include "tdl/strategy.h"

namespace py = pybind11;

namespace tilewise::bindings {

using namespace tilewise::tdl;

namespace {

/// Opaque handles for Python: the C++ nodes are immutable and shared.
struct PyIndex {
  IndexExpr e;
};
struct PyExpr {
  Expr e;
};

UnaryOp unary_from(const std::string& s) {
  static const std::map<std::string, UnaryOp> t = {
      {"neg", UnaryOp::kNeg},   {"exp", UnaryOp::kExp},   {"log", UnaryOp::kLog}, {"tanh", UnaryOp::kTanh},
      {"sigmoid", UnaryOp::kSigmoid}, {"sqrt", UnaryOp::kSqrt}, {"abs", UnaryOp::kAbs}, {"erf", UnaryOp::kErf},
      {"pow", UnaryOp::kPow}};
  auto it = t.find(s);
  if (it == t.end()) throw TDLError("unknown unary function '" + s + "'");
  return it->second;
}
BinaryOp binary_from(const std::string& s) {
  static const std::map<std::string, BinaryOp> t = {
      {"+", BinaryOp::kAdd}, {"-", BinaryOp::kSub}, {"*", BinaryOp::kMul},  {"/", BinaryOp::kDiv},
      {"max", BinaryOp::kMax}, {"min", BinaryOp::kMin}, {"<", BinaryOp::kLt}, {"<=", BinaryOp::kLe},
      {">", BinaryOp::kGt},  {">=", BinaryOp::kGe}, {"==", BinaryOp::kEq}, {"!=", BinaryOp::kNe}};
  auto it = t.find(s);
  if (it == t.end()) throw TDLError("unknown binary operator '" + s + "'");
  return it->second;
}
Reducer reducer_from(const std::string& s) {
  static const std::map<std::string, Reducer> t = {
      {"Sum", Reducer::kSum}, {"Max", Reducer::kMax}, {"Min", Reducer::kMin}, {"Prod", Reducer::kProd}};
  auto it = t.find(s);
  if (it == t.end()) throw TDLError("unknown reducer '" + s + "'");
  return it->second;
}

// A region as a tuple of inclusive (lo, hi) pairs; None when nothing is read.
py::object box_to_py(const Box& b) {
  if (b.empty()) return py::none();
  py::tuple t(b.dims.size());
  for (size_t d = 0; d < b.dims.size(); ++d) t[d] = py::make_tuple(b.dims[d].lo, b.dims[d].hi);
  return t;
}

py::dict strategy_header(const OpDesc& op, const Strategy& s) {
  py::dict d;
  d["kind"] = name_of(s.kind);
  d["dim"] = s.var >= 0 ? py::object(py::str(op.vars[s.var].name)) : py::object(py::none());
  d["reducer"] = s.kind == StrategyKind::kReduce ? py::object(py::str(name_of(s.reducer))) : py::object(py::none());
  return d;
}

std::optional<Shape> opt_shape(const py::object& o) {
  if (o.is_none()) return std::nullopt;
  return o.cast<Shape>();
}

}  // namespace

void bind_tdl(py::module_& m) {
  py::class_<PyIndex>(m, "IndexExpr", "An affine TDL index expression (immutable).")
      .def_property_readonly("is_constant",
                             [](const PyIndex& i) { return is_linear(i.e) && i.e->linear.is_constant(); })
      .def_property_readonly("constant", [](const PyIndex& i) { return i.e->linear.constant; })
      .def_property_readonly("variables", [](const PyIndex& i) {
        std::vector<int> vs;
        collect_vars(i.e, vs);
        return vs;
      });
  py::class_<PyExpr>(m, "Expr", "A TDL value expression (immutable).");

  m.def("index_const", [](int64_t c) { return PyIndex{index_const(c)}; });
  m.def("index_var", [](int v) { return PyIndex{index_var(v)}; });
  m.def("index_extent", [](int t, int d) { return PyIndex{index_extent(t, d)}; });
  m.def("index_add", [](const PyIndex& a, const PyIndex& b) { return PyIndex{index_add(a.e, b.e)}; });
  m.def("index_sub", [](const PyIndex& a, const PyIndex& b) { return PyIndex{index_sub(a.e, b.e)}; });
  m.def("index_scale", [](const PyIndex& a, int64_t k) { return PyIndex{index_scale(a.e, k)}; });
  m.def("index_floordiv", [](const PyIndex& a, int64_t k) { return PyIndex{index_floordiv(a.e, k)}; });
  m.def("index_mod", [](const PyIndex& a, int64_t k) { return PyIndex{index_mod(a.e, k)}; });

  m.def("expr_const", [](double v) { return PyExpr{make_const(v)}; });
  m.def("expr_access", [](int t, const std::vector<PyIndex>& idx) {
    std::vector<IndexExpr> v;
    for (const auto& i : idx) v.push_back(i.e);
    return PyExpr{make_access(t, v)};
  });
  m.def("expr_index_value", [](const PyIndex& i) { return PyExpr{make_index_value(i.e)}; });
  m.def("expr_unary", [](const std::string& op, const PyExpr& a, double p) { return PyExpr{make_unary(unary_from(op), a.e, p)}; },
        py::arg("op"), py::arg("a"), py::arg("exponent") = 0.0);
  m.def("expr_binary",
        [](const std::string& op, const PyExpr& a, const PyExpr& b) { return PyExpr{make_binary(binary_from(op), a.e, b.e)}; });
  m.def("expr_select", [](const PyExpr& c, const PyExpr& a, const PyExpr& b) { return PyExpr{make_select(c.e, a.e, b.e)}; });
  m.def("expr_reduce", [](const std::string& r, const std::vector<int>& vars, const PyExpr& body) {
    return PyExpr{make_reduce(reducer_from(r), vars, body.e)};
  });
  m.def("expr_opaque", [](int id, const std::vector<std::pair<int, std::vector<std::optional<PyIndex>>>>& args,
                          const std::vector<PyIndex>& result, const std::vector<PyIndex>& result_extents) {
    std::vector<SliceArg> slices;
    for (const auto& [t, dims] : args) {
      SliceArg s{t, {}};
      for (const auto& d : dims) s.dims.push_back(d ? std::optional<IndexExpr>(d->e) : std::nullopt);
      slices.push_back(std::move(s));
    }
    std::vector<IndexExpr> r, ext;
    for (const auto& i : result) r.push_back(i.e);
    for (const auto& i : result_extents) ext.push_back(i.e);
    return PyExpr{make_opaque(id, std::move(slices), std::move(r), std::move(ext))};
  });

  py::class_<OpDesc, std::shared_ptr<OpDesc>>(m, "OpDesc", "A traced, validated TDL operator description.")
      .def(py::init([](const std::string& name, const std::vector<std::pair<std::string, int>>& inputs,
                       const std::vector<std::tuple<std::string, bool, std::optional<PyIndex>>>& vars,
                       const std::vector<int>& output_vars, const std::vector<std::string>& opaque_names,
                       const PyExpr& body, const std::string& kernel, const std::vector<int>& kernel_vars) {
             OpDesc op;
             op.name = name;
             for (const auto& [n, r] : inputs) op.inputs.push_back({n, r});
             for (const auto& [n, out, ext] : vars)
               op.vars.push_back({n, out, ext ? std::optional<IndexExpr>(ext->e) : std::nullopt});
             op.output_vars = output_vars;
             op.opaque_names = opaque_names;
             op.body = body.e;
             op.kernel = kernel;
             op.kernel_vars = kernel_vars;
             validate(op);
             return op;
           }),
           py::arg("name"), py::arg("inputs"), py::arg("vars"), py::arg("output_vars"), py::arg("opaque_names"),
           py::arg("body"), py::arg("kernel") = "", py::arg("kernel_vars") = std::vector<int>{})
      .def_readonly("name", &OpDesc::name)
      .def_readonly("kernel", &OpDesc::kernel, "The declared native kernel ('' when none).")
      .def_readonly("kernel_vars", &OpDesc::kernel_vars, "Variable ids in the kernel's role order (empty: as declared).")
      .def("__str__", [](const OpDesc& op) { return op.str(); })
      .def("expr_str", [](const OpDesc& op, const PyExpr& e) { return op.str(e.e); })
      .def("index_str", [](const OpDesc& op, const PyIndex& e) { return op.str(e.e); })
      .def_property_readonly("input_ranks", [](const OpDesc& op) {
        std::vector<int> r;
        for (const auto& t : op.inputs) r.push_back(t.rank);
        return r;
      })
      .def_property_readonly("var_names", [](const OpDesc& op) {
        std::vector<std::string> r;
        for (const auto& v : op.vars) r.push_back(v.name);
        return r;
      })
      .def_property_readonly("is_elementwise", [](const OpDesc& op) { return is_elementwise(op); })
      .def("infer_output_shape", [](const OpDesc& op, const std::vector<Shape>& shapes) {
        return infer_output_shape(op, shapes);
      })
      .def("infer_extents", [](const OpDesc& op, const std::vector<Shape>& shapes, const py::object& out) {
        return infer_extents(op, shapes, opt_shape(out));
      }, py::arg("shapes"), py::arg("out") = py::none())
      .def("strategies",
           [](const OpDesc& op, int64_t parts, const std::vector<Shape>& shapes, const py::object& out) {
             auto ext = infer_extents(op, shapes, opt_shape(out));
             std::vector<ConcreteStrategy> cs;
             {
               py::gil_scoped_release release;
               for (const auto& s : enumerate_strategies(op)) cs.push_back(concretize(op, s, parts, ext, shapes));
             }
             py::list result;
             for (const auto& c : cs) {
               py::dict d = strategy_header(op, c.strategy);
               py::dict inputs;
               for (size_t t = 0; t < op.inputs.size(); ++t) {
                 py::list per_worker;
                 for (const auto& b : c.input_regions[t]) per_worker.append(box_to_py(b));
                 inputs[py::str(op.inputs[t].name)] = per_worker;
               }
               d["input_regions"] = inputs;
               py::list outs;
               for (const auto& b : c.output_regions) outs.append(box_to_py(b));
               d["output_regions"] = outs;
               result.append(d);
             }
             return result;
           },
           py::arg("parts"), py::arg("shapes"), py::arg("out") = py::none())
      .def("symbolic_strategies",
           [](const OpDesc& op, int64_t parts) {
             Names names = op.names();
             py::list result;
             for (const auto& s : enumerate_strategies(op)) {
               SymbolicStrategy ss = symbolic(op, s, parts);
               py::dict d = strategy_header(op, s);
               py::dict inputs;
               for (size_t t = 0; t < op.inputs.size(); ++t) {
                 py::list per_worker;
                 for (const auto& dims : ss.input_regions[t]) {
                   py::list r;
                   for (const auto& sr : dims) r.append(sr.str(names));
                   per_worker.append(py::tuple(r));
                 }
                 inputs[py::str(op.inputs[t].name)] = per_worker;
               }
               d["input_regions"] = inputs;
               py::list outs;
               for (const auto& dims : ss.output_regions) {
                 py::list r;
                 for (const auto& sr : dims) r.append(sr.str(names));
                 outs.append(py::tuple(r));
               }
               d["output_regions"] = outs;
               result.append(d);
             }
             return result;
           },
           py::arg("parts") = 2)
      .def("work",
           [](const OpDesc& op, const std::vector<Shape>& shapes, const py::object& out) {
             auto ext = infer_extents(op, shapes, opt_shape(out));
             OpWork w = op_work(op, ext, shapes);
             py::dict d;
             d["flops_per_element"] = w.flops_per_element;
             d["reads_per_element"] = w.reads_per_element;
             return d;
           },
           py::arg("shapes"), py::arg("out") = py::none())
      .def("evaluate",
           [](const OpDesc& op, const std::vector<py::array_t<double, py::array::c_style | py::array::forcecast>>& arrays,
              const py::object& out, const py::object& opaque_fn, int threads) {
             std::vector<Shape> shapes;
             std::vector<ArrayView> views;
             for (const auto& a : arrays) {
               Shape s(a.shape(), a.shape() + a.ndim());
               shapes.push_back(s);
               views.push_back({a.data(), s});
             }
             auto ext = infer_extents(op, shapes, opt_shape(out));
             Shape out_shape;
             for (int v : op.output_vars) out_shape.push_back(ext[v]);
             py::array_t<double> result(out_shape);
             OpaqueCall call = opaque_from_python(opaque_fn);
             if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
             double* dst = result.mutable_data();
             {
               py::gil_scoped_release release;
               interpret(op, views, ext, dst, call, threads);
             }
             return result;
           },
           py::arg("arrays"), py::arg("out") = py::none(), py::arg("opaque_fn") = py::none(), py::arg("threads") = 0);
}

}  // namespace tilewise::bindings
