// The host thread's order over several devices' programs (step_schedule.h): local instructions in
// program order, Sends packed where they stand, each Recv issued in one wave with its Send.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exec/cuda/step_schedule.h"
#include "exec/errors.h"

namespace tilewise::exec::cuda {
namespace {

Instr comm(InstrKind kind, int peer, int64_t tag) {
  Instr in;
  in.kind = kind, in.peer = peer, in.tag = tag, in.buffer = 0;
  return in;
}

Instr local_op() {
  Instr in;
  in.kind = InstrKind::kRecord, in.event = 0;
  return in;
}

Program program(int device, std::vector<Instr> instrs) {
  Program p;
  p.device = device, p.devices = 2;
  p.streams = {"compute", "comm"};
  p.buffers.resize(1);
  p.buffers[0].name = "b";
  p.instrs = std::move(instrs);
  return p;
}

TEST(StepSchedule, ExchangesEachSendWithItsRecvInOneWave) {
  // Both devices send first and receive after a local instruction (a tile exchange): a schedule that
  // waited at the Sends would deadlock.
  const std::vector<Program> progs = {
      program(0, {comm(InstrKind::kSend, 1, 1), local_op(), comm(InstrKind::kRecv, 1, 0), local_op()}),
      program(1, {comm(InstrKind::kSend, 0, 0), local_op(), comm(InstrKind::kRecv, 0, 1), local_op()})};
  std::vector<std::string> log;
  run_step(
      progs, [&](int d, size_t i) { log.push_back("local " + std::to_string(d) + ":" + std::to_string(i)); },
      [&](const std::vector<CommOp>& wave) {
        std::string w = "wave";
        for (const CommOp& op : wave) w += " " + std::to_string(op.device) + ":" + std::to_string(op.instr);
        log.push_back(w);
      });
  const std::vector<std::string> want = {"local 0:0", "local 0:1", "local 1:0", "local 1:1",
                                         "wave 1:0 0:2 0:0 1:2", "local 0:3", "local 1:3"};
  EXPECT_EQ(log, want);
}

TEST(StepSchedule, AReceiveWithoutItsSendIsNamed) {
  const std::vector<Program> progs = {program(0, {comm(InstrKind::kRecv, 1, 7)}), program(1, {local_op()})};
  try {
    run_step(progs, [](int, size_t) {}, [](const std::vector<CommOp>&) {});
    FAIL() << "no error";
  } catch (const ExecError& e) {
    EXPECT_NE(std::string(e.what()).find("device 0 at recv"), std::string::npos) << e.what();
  }
  const std::vector<Program> lost = {program(0, {comm(InstrKind::kSend, 1, 3)}), program(1, {local_op()})};
  EXPECT_THROW(run_step(lost, [](int, size_t) {}, [](const std::vector<CommOp>&) {}), ExecError);
}

}  // namespace
}  // namespace tilewise::exec::cuda
