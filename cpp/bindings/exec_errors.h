// Raising exec's typed errors as _core's Python exceptions with their fields, for every extension
// module that runs programs (_core, _mpi, _cuda): each registers its own translator (pybind11's
// translators are per module) but builds the exception the same way.
#pragma once
#include <pybind11/pybind11.h>

#include "exec/arena.h"
#include "exec/errors.h"

namespace tilewise::bindings {

/// Sets `cls` (tw.OutOfMemory) as the Python error, carrying device, tensor, bytes, in_use, capacity.
inline void raise_out_of_memory(pybind11::handle cls, const exec::OutOfMemory& e) {
  pybind11::object err = cls(e.what());
  err.attr("device") = e.device;
  err.attr("tensor") = e.tensor;
  err.attr("bytes") = e.bytes;
  err.attr("in_use") = e.in_use;
  err.attr("capacity") = e.capacity;
  PyErr_SetObject(cls.ptr(), err.ptr());
}

/// Sets `cls` (tw.CommunicationError) as the Python error, carrying device and peer.
inline void raise_communication_error(pybind11::handle cls, const exec::CommunicationError& e) {
  pybind11::object err = cls(e.what());
  err.attr("device") = e.device;
  err.attr("peer") = e.peer;
  PyErr_SetObject(cls.ptr(), err.ptr());
}

}  // namespace tilewise::bindings
