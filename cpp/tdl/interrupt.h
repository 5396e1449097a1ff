// Ctrl-C for long C++ calls (issue 15): searches and steps run without the GIL, where Python's own
// SIGINT handling cannot reach them. The bindings (bindings/interruptible.h) turn SIGINT into a
// request here; long loops look at it (a relaxed load) and stop: the calling thread throws
// Interrupted, which Python receives as KeyboardInterrupt. Search worker threads only return early;
// the thread that started them calls check_interrupt() after joining them.
#pragma once
#include <atomic>
#include <stdexcept>

namespace tilewise {

/// A long computation stopped because an interrupt was requested (Ctrl-C); nothing it was
/// computing was kept.
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted (Ctrl-C)") {}
};

namespace interrupt_detail {
extern std::atomic<int> requested;
}

/// Whether an interrupt was requested and not yet cleared.
inline bool interrupt_requested() { return interrupt_detail::requested.load(std::memory_order_relaxed) != 0; }

/// Throws Interrupted when an interrupt was requested.
inline void check_interrupt() {
  if (interrupt_requested()) throw Interrupted();
}

/// Requests an interrupt (async-signal-safe: a lock-free store).
void request_interrupt() noexcept;
/// Clears the request (before a new interruptible call, or once it has been delivered).
void clear_interrupt() noexcept;

}  // namespace tilewise
