// Python view of the graph IR (cpp/graph). Conversion only.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "graph/graph.h"

namespace py = pybind11;

namespace tilewise::bindings {

using namespace tilewise::graph;

void bind_graph(py::module_& m) {
  py::class_<TensorNode>(m, "TensorNode", "A tensor of a graph (read-only view).")
      .def_readonly("id", &TensorNode::id)
      .def_readonly("name", &TensorNode::name)
      .def_property_readonly("shape", [](const TensorNode& t) { return py::tuple(py::cast(t.shape)); })
      .def_readonly("dtype", &TensorNode::dtype)
      .def_property_readonly("role", [](const TensorNode& t) { return name_of(t.role); })
      .def_readonly("producer", &TensorNode::producer)
      .def_readonly("consumers", &TensorNode::consumers)
      .def_readonly("grad_of", &TensorNode::grad_of)
      .def_readonly("updates", &TensorNode::updates)
      .def_property_readonly("elements", &TensorNode::elements)
      .def_property_readonly("bytes", &TensorNode::bytes);

  py::class_<OpNode>(m, "OpNode", "An op of a graph (read-only view).")
      .def_readonly("id", &OpNode::id)
      .def_readonly("type", &OpNode::type)
      .def_readonly("name", &OpNode::name)
      .def_readonly("attrs_json", &OpNode::attrs_json)
      .def_readonly("inputs", &OpNode::inputs)
      .def_readonly("output", &OpNode::output)
      .def_property_readonly("desc", [](const OpNode& o) { return std::const_pointer_cast<tdl::OpDesc>(o.desc); })
      .def_property_readonly("phase", [](const OpNode& o) { return name_of(o.phase); })
      .def_readonly("forward_op", &OpNode::forward_op)
      .def_readonly("unroll_key", &OpNode::unroll_key);

  py::class_<Graph, std::shared_ptr<Graph>>(m, "Graph", "A dataflow graph of TDL ops.")
      .def(py::init<>())
      .def("add_tensor",
           [](Graph& g, const std::string& name, const Shape& shape, const std::string& role, const std::string& dtype) {
             return g.add_tensor(name, shape, role_from(role), dtype);
           },
           py::arg("name"), py::arg("shape"), py::arg("role"), py::arg("dtype") = "float32")
      .def("add_op",
           [](Graph& g, const std::string& type, const std::string& name, const std::string& attrs_json,
              const std::vector<int>& inputs, std::shared_ptr<tdl::OpDesc> desc, const std::string& out_name,
              const std::string& out_role, const std::optional<Shape>& out, const std::string& phase, int forward_op,
              const std::string& unroll_key, const std::string& dtype) {
             return g.add_op(type, name, attrs_json, inputs, std::move(desc), out_name, role_from(out_role), out,
                             phase_from(phase), forward_op, unroll_key, dtype);
           },
           py::arg("type"), py::arg("name"), py::arg("attrs_json"), py::arg("inputs"), py::arg("desc"),
           py::arg("out_name"), py::arg("out_role") = "activation", py::arg("out") = py::none(),
           py::arg("phase") = "forward", py::arg("forward_op") = -1, py::arg("unroll_key") = "",
           py::arg("dtype") = "float32")
      .def("set_grad_of", &Graph::set_grad_of)
      .def("set_updates", &Graph::set_updates)
      .def_property_readonly("num_tensors", [](const Graph& g) { return g.tensors().size(); })
      .def_property_readonly("num_ops", [](const Graph& g) { return g.ops().size(); })
      .def("tensor", &Graph::tensor, py::return_value_policy::copy)
      .def("op", &Graph::op, py::return_value_policy::copy)
      .def("find_tensor", &Graph::find_tensor)
      .def("find_op", &Graph::find_op)
      .def_property_readonly("num_parameters", &Graph::num_parameters)
      .def("bytes", [](const Graph& g, const std::string& role) { return g.bytes(role_from(role)); })
      .def("summary", &Graph::summary)
      .def("to_dot", &Graph::to_dot);
}

}  // namespace tilewise::bindings
