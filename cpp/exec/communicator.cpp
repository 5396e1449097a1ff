#include "exec/communicator.h"

#include <algorithm>

#include "exec/box_copy.h"
#include "exec/errors.h"

namespace tilewise::exec {

Communicator::Communicator(int devices)
    : devices_(devices), sent_(new std::atomic<int64_t>[devices]), received_(new std::atomic<int64_t>[devices]) {
  Communicator::reset();
}

void Communicator::reset() {
  for (int d = 0; d < devices_; ++d) sent_[d] = 0, received_[d] = 0;
}

std::vector<int64_t> Communicator::bytes_sent() const {
  std::vector<int64_t> out(devices_);
  for (int d = 0; d < devices_; ++d) out[d] = sent_[d].load();
  return out;
}

std::vector<int64_t> Communicator::bytes_received() const {
  std::vector<int64_t> out(devices_);
  for (int d = 0; d < devices_; ++d) out[d] = received_[d].load();
  return out;
}

MailboxCommunicator::MailboxCommunicator(int devices) : Communicator(devices) {
  for (int d = 0; d < devices; ++d) boxes_.push_back(std::make_unique<Mailbox>());
}

void MailboxCommunicator::send(int self, int peer, int64_t tag, const void* buf, const Box& buf_box,
                               const Box& what, int64_t element_bytes) {
  const int64_t n = what.volume() * element_bytes;  // bytes
  Mailbox& box = *boxes_[peer];
  Buffer msg;
  {
    // A recycled buffer large enough (the smallest such), else a new one.
    std::lock_guard<std::mutex> lock(box.m);
    size_t best = box.spare.size();
    for (size_t i = 0; i < box.spare.size(); ++i)
      if (box.spare[i].capacity >= n && (best == box.spare.size() || box.spare[i].capacity < box.spare[best].capacity))
        best = i;
    if (best < box.spare.size()) {
      msg = std::move(box.spare[best]);
      box.spare.erase(box.spare.begin() + static_cast<std::ptrdiff_t>(best));
    } else {
      box.bytes += n;
    }
  }
  if (!msg.data) msg.data.reset(new std::byte[static_cast<size_t>(std::max<int64_t>(n, 1))]), msg.capacity = n;
  copy_box(buf, buf_box, msg.data.get(), what, what, element_bytes);  // pack
  {
    std::lock_guard<std::mutex> lock(box.m);
    box.messages[{self, tag}] = std::move(msg);
  }
  box.cv.notify_all();
  count(self, peer, n);
}

void MailboxCommunicator::recv(int self, int peer, int64_t tag, void* buf, const Box& buf_box, const Box& what,
                               int64_t element_bytes, Deadline deadline) {
  Mailbox& box = *boxes_[self];
  Buffer msg;
  {
    std::unique_lock<std::mutex> lock(box.m);
    const auto key = std::make_pair(peer, tag);
    auto ready = [&] { return aborted_.load() || box.messages.count(key) > 0; };
    if (!box.cv.wait_until(lock, deadline, ready)) {
      throw CommunicationError(self, peer, "device " + std::to_string(self) + " waited past the deadline for tag " +
                                               std::to_string(tag) + " from device " + std::to_string(peer));
    }
    auto it = box.messages.find(key);
    if (it == box.messages.end()) {
      std::lock_guard<std::mutex> a(abort_m_);
      throw CommunicationError(self, failed_device_, "device " + std::to_string(failed_device_) + " failed (" + why_ +
                                                         ") while device " + std::to_string(self) +
                                                         " waited for tag " + std::to_string(tag) + " from device " +
                                                         std::to_string(peer));
    }
    msg = std::move(it->second);
    box.messages.erase(it);
  }
  copy_box(msg.data.get(), what, buf, buf_box, what, element_bytes);  // unpack
  std::lock_guard<std::mutex> lock(box.m);
  box.spare.push_back(std::move(msg));
}

bool MailboxCommunicator::poll(int self, int peer, int64_t tag) {
  Mailbox& box = *boxes_[self];
  std::lock_guard<std::mutex> lock(box.m);
  return box.messages.count({peer, tag}) > 0;
}

void MailboxCommunicator::abort(int device, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(abort_m_);
    if (aborted_) return;
    failed_device_ = device, why_ = why;
    aborted_ = true;
  }
  for (auto& b : boxes_) {
    std::lock_guard<std::mutex> lock(b->m);  // no receiver between its check and its wait
    b->cv.notify_all();
  }
}

void MailboxCommunicator::reset() {
  Communicator::reset();
  aborted_ = false;
  failed_device_ = -1, why_.clear();
  for (auto& b : boxes_) {
    std::lock_guard<std::mutex> lock(b->m);
    for (auto& [key, msg] : b->messages) b->spare.push_back(std::move(msg));
    b->messages.clear();
  }
}

int64_t MailboxCommunicator::buffer_bytes() const {
  int64_t total = 0;
  for (const auto& b : boxes_) {
    std::lock_guard<std::mutex> lock(b->m);
    total += b->bytes;
  }
  return total;
}

}  // namespace tilewise::exec
