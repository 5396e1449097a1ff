#include "bindings/interruptible.h"

#include <pythread.h>
#include <signal.h>

#include <exception>
#include <mutex>

#include "tdl/interrupt.h"

namespace py = pybind11;

namespace tilewise::bindings {

namespace {

std::mutex install_mutex;
int holders = 0;  // Interruptibles alive with our handler installed (nested calls, callbacks)
struct sigaction python_action;

extern "C" void on_sigint(int) { request_interrupt(); }

// What the check below reads, looked up once (every step passes here): kept for the process's life
// (released handles, never destroyed after the interpreter finalises).
struct PythonSignals {
  py::handle getsignal, sigint, default_handler;
  unsigned long main_thread = 0;
};

const PythonSignals& python_signals() {
  static const PythonSignals signals = [] {
    py::module_ signal = py::module_::import("signal");
    py::module_ threading = py::module_::import("threading");
    PythonSignals s;
    s.getsignal = py::object(signal.attr("getsignal")).release();
    s.sigint = py::object(signal.attr("SIGINT")).release();
    s.default_handler = py::object(signal.attr("default_int_handler")).release();
    s.main_thread = threading.attr("main_thread")().attr("ident").cast<unsigned long>();
    return s;
  }();
  return signals;
}

// Whether this is the main thread and SIGINT is Python's default handler (a program's own stays).
bool python_handles_sigint_here() {
  const PythonSignals& s = python_signals();
  if (PyThread_get_thread_ident() != s.main_thread) return false;
  return s.getsignal(s.sigint).is(s.default_handler);
}

}  // namespace

Interruptible::Interruptible() : exceptions_(std::uncaught_exceptions()) {
  {
    std::lock_guard<std::mutex> lock(install_mutex);
    if (holders > 0) {
      ++holders;
      installed_ = true;
      return;
    }
  }
  if (!python_handles_sigint_here()) return;
  std::lock_guard<std::mutex> lock(install_mutex);
  if (holders++ == 0) {
    clear_interrupt();
    struct sigaction ours {};
    ours.sa_handler = on_sigint;
    sigemptyset(&ours.sa_mask);
    sigaction(SIGINT, &ours, &python_action);
  }
  installed_ = true;
}

Interruptible::~Interruptible() {
  if (!installed_) return;
  std::lock_guard<std::mutex> lock(install_mutex);
  if (--holders > 0) return;
  sigaction(SIGINT, &python_action, nullptr);
  if (interrupt_requested()) {
    clear_interrupt();
    // Propagating Interrupted becomes KeyboardInterrupt (bind_interrupt); a call that finished before
    // it looked hands the Ctrl-C to Python, which raises it at once.
    if (std::uncaught_exceptions() == exceptions_) PyErr_SetInterrupt();
  }
}

void bind_interrupt(py::module_&) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Interrupted&) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);
    }
  });
}

}  // namespace tilewise::bindings
