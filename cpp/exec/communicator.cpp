#include "exec/communicator.h"

#include "exec/box_copy.h"

namespace tilewise::exec {

InProcessCommunicator::InProcessCommunicator(int devices)
    : received_(new std::atomic<int64_t>[devices]), devices_(devices) {
  reset();
}

void InProcessCommunicator::receive(int src, const float* src_buf, const Box& src_box, int dst, float* dst_buf,
                                    const Box& dst_box, const Box& what) {
  copy_box(src_buf, src_box, dst_buf, dst_box, what);
  if (src != dst) received_[dst] += what.volume() * static_cast<int64_t>(sizeof(float));
}

std::vector<int64_t> InProcessCommunicator::bytes_received() const {
  std::vector<int64_t> out(devices_);
  for (int d = 0; d < devices_; ++d) out[d] = received_[d].load();
  return out;
}

void InProcessCommunicator::reset() {
  for (int d = 0; d < devices_; ++d) received_[d] = 0;
}

}  // namespace tilewise::exec
