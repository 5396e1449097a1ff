#include "tdl/interrupt.h"

namespace tilewise {

namespace interrupt_detail {
std::atomic<int> requested{0};
static_assert(std::atomic<int>::is_always_lock_free, "set from a signal handler");
}  // namespace interrupt_detail

void request_interrupt() noexcept { interrupt_detail::requested.store(1, std::memory_order_relaxed); }

void clear_interrupt() noexcept { interrupt_detail::requested.store(0, std::memory_order_relaxed); }

}  // namespace tilewise
