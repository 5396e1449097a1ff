// Ctrl-C during a call that runs without the GIL (issue 15). Python handles SIGINT by setting a flag
// that only the interpreter looks at, between bytecodes: a search or a step in C++ would run to its
// end. While an Interruptible is held, SIGINT instead requests an interrupt of the core
// (tdl/interrupt.h); its long loops stop and throw Interrupted, raised in Python as
// KeyboardInterrupt. A SIGINT that arrives after the call's last look is handed back to Python
// (PyErr_SetInterrupt), so it is never lost.
#pragma once
#include <pybind11/pybind11.h>

namespace tilewise::bindings {

/// Held, with the GIL, around a call that releases it: `py::call_guard<Interruptible,
/// py::gil_scoped_release>()` or a local before `py::gil_scoped_release`. It takes over SIGINT only
/// on the main thread (where Python delivers signals) and only while Python's own SIGINT handler is
/// the default one: a program that set its own handler keeps it.
class Interruptible {
 public:
  Interruptible();
  ~Interruptible();
  Interruptible(const Interruptible&) = delete;
  Interruptible& operator=(const Interruptible&) = delete;

 private:
  bool installed_ = false;
  int exceptions_ = 0;
};

/// Registers the translation of Interrupted into KeyboardInterrupt.
void bind_interrupt(pybind11::module_& m);

}  // namespace tilewise::bindings
