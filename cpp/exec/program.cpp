#include "exec/program.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "graph/graph.h"

namespace tilewise::exec {

int64_t BufferDesc::bytes() const { return elements() * graph::dtype_size(dtype); }

const char* kind_name(InstrKind k) {
  switch (k) {
    case InstrKind::kAlloc: return "alloc";
    case InstrKind::kFree: return "free";
    case InstrKind::kCompute: return "compute";
    case InstrKind::kSend: return "send";
    case InstrKind::kRecv: return "recv";
    case InstrKind::kCombine: return "combine";
    case InstrKind::kCopy: return "copy";
    case InstrKind::kRecord: return "record";
    case InstrKind::kWait: return "wait";
    case InstrKind::kSwapOut: return "swap_out";
    case InstrKind::kSwapIn: return "swap_in";
  }
  return "?";
}

const char* role_name(BufferRole r) {
  switch (r) {
    case BufferRole::kTile: return "tile";
    case BufferRole::kRegion: return "region";
    case BufferRole::kComputed: return "computed";
    case BufferRole::kStaging: return "staging";
    case BufferRole::kScratch: return "scratch";
  }
  return "?";
}

namespace {

const char* reducer_name(tdl::Reducer r) {
  switch (r) {
    case tdl::Reducer::kSum: return "sum";
    case tdl::Reducer::kMax: return "max";
    case tdl::Reducer::kMin: return "min";
    case tdl::Reducer::kProd: return "prod";
  }
  return "?";
}

std::string box_text(const Box& b) {
  std::string s = "[";
  for (size_t i = 0; i < b.dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(b.dims[i].lo) + ":" + std::to_string(b.dims[i].hi + 1);
  }
  return s + "]";
}

std::string box_json(const Box& b) {
  std::string s = "[";
  for (size_t i = 0; i < b.dims.size(); ++i) {
    if (i) s += ",";
    s += "[" + std::to_string(b.dims[i].lo) + "," + std::to_string(b.dims[i].hi + 1) + "]";
  }
  return s + "]";
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else out += c;
  }
  return out + "\"";
}

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

}  // namespace

int64_t Program::bytes_sent() const {
  int64_t b = 0;
  for (const Instr& in : instrs)
    if (in.kind == InstrKind::kSend) b += in.bytes;
  return b;
}

int64_t Program::bytes_received() const {
  int64_t b = 0;
  for (const Instr& in : instrs)
    if (in.kind == InstrKind::kRecv) b += in.bytes;
  return b;
}

double Program::flops() const {
  double f = 0;
  for (const Instr& in : instrs) f += in.flops;
  return f;
}

std::string Program::instr_text(const Instr& in) const {
  auto buf = [&](int id) { return id < 0 ? std::string("-") : buffers[id].name; };
  std::ostringstream s;
  s << kind_name(in.kind);
  switch (in.kind) {
    case InstrKind::kAlloc:
    case InstrKind::kFree:
    case InstrKind::kSwapOut:
    case InstrKind::kSwapIn:
      s << " " << buf(in.buffer) << box_text(buffers[in.buffer].box);
      if (in.offset >= 0) s << " @" << in.offset;
      break;
    case InstrKind::kCompute: {
      s << " " << (in.op >= 0 && in.op < static_cast<int>(op_names.size()) ? op_names[in.op] : "?") << " (";
      for (size_t j = 0; j < in.inputs.size(); ++j) s << (j ? ", " : "") << buf(in.inputs[j]);
      s << ") -> " << buf(in.buffer) << box_text(buffers[in.buffer].box);
      if (in.scratch >= 0) s << " with " << buf(in.scratch) << " (" << buffers[in.scratch].bytes() << " B)";
      break;
    }
    case InstrKind::kSend: s << " " << buf(in.buffer) << box_text(in.box) << " to " << in.peer << " tag " << in.tag; break;
    case InstrKind::kRecv: s << " " << buf(in.buffer) << box_text(in.box) << " from " << in.peer << " tag " << in.tag; break;
    case InstrKind::kCombine:
      s << " " << reducer_name(in.reducer) << " " << buf(in.src) << box_text(in.box) << " into " << buf(in.buffer);
      break;
    case InstrKind::kCopy: s << " " << buf(in.src) << box_text(in.box) << " to " << buf(in.buffer); break;
    case InstrKind::kRecord:
    case InstrKind::kWait: s << " e" << in.event; break;
  }
  if (in.bytes && in.kind != InstrKind::kCompute) s << " (" << in.bytes << " B)";
  if (in.flops && in.kind == InstrKind::kCompute) s << " (" << static_cast<int64_t>(in.flops) << " FLOPs)";
  return s.str();
}

std::string Program::text() const {
  std::ostringstream s;
  s << "program of device " << device << " of " << devices << ": " << instrs.size() << " instructions, "
    << bytes_sent() << " B sent, " << bytes_received() << " B received, " << static_cast<int64_t>(flops())
    << " FLOPs\n";
  size_t width = 0;
  for (const auto& st : streams) width = std::max(width, st.size());
  const size_t digits = std::to_string(instrs.empty() ? 0 : instrs.size() - 1).size();
  for (size_t i = 0; i < instrs.size(); ++i) {
    const std::string& st = streams[instrs[i].stream];
    const std::string idx = std::to_string(i);
    s << std::string(digits - idx.size(), ' ') << idx << "  " << st << std::string(width - st.size(), ' ') << "  "
      << instr_text(instrs[i]) << "\n";
  }
  return s.str();
}

std::string Program::to_json() const {
  std::ostringstream s;
  s << "{\"device\": " << device << ", \"devices\": " << devices << ", \"streams\": [";
  for (size_t i = 0; i < streams.size(); ++i) s << (i ? ", " : "") << quoted(streams[i]);
  s << "], \"buffers\": [";
  for (size_t i = 0; i < buffers.size(); ++i) {
    const BufferDesc& b = buffers[i];
    s << (i ? ", " : "") << "{\"name\": " << quoted(b.name) << ", \"role\": \"" << role_name(b.role)
      << "\", \"tensor\": " << b.tensor << ", \"box\": " << box_json(b.box)
      << ", \"dtype\": " << quoted(b.dtype) << ", \"resident\": " << (b.resident ? "true" : "false")
      << ", \"bytes\": " << b.bytes() << "}";
  }
  s << "], \"instructions\": [";
  for (size_t i = 0; i < instrs.size(); ++i) {
    const Instr& in = instrs[i];
    s << (i ? ",\n " : "\n ") << "{\"kind\": \"" << kind_name(in.kind) << "\", \"stream\": " << quoted(streams[in.stream]);
    if (in.op >= 0) s << ", \"op\": " << quoted(in.op < static_cast<int>(op_names.size()) ? op_names[in.op] : "?");
    if (in.buffer >= 0) s << ", \"buffer\": " << in.buffer;
    if (in.src >= 0) s << ", \"src\": " << in.src;
    if (in.kind == InstrKind::kCompute) {
      s << ", \"inputs\": [";
      for (size_t j = 0; j < in.inputs.size(); ++j) s << (j ? ", " : "") << in.inputs[j];
      s << "]";
      if (in.scratch >= 0) s << ", \"scratch\": " << in.scratch;
    }
    if (in.peer >= 0) s << ", \"peer\": " << in.peer << ", \"tag\": " << in.tag;
    if (!in.box.dims.empty() || in.kind == InstrKind::kSend || in.kind == InstrKind::kRecv) s << ", \"box\": " << box_json(in.box);
    if (in.kind == InstrKind::kCombine) s << ", \"reducer\": \"" << reducer_name(in.reducer) << "\"";
    if (in.event >= 0) s << ", \"event\": " << in.event;
    if (in.offset >= 0) s << ", \"offset\": " << in.offset;
    s << ", \"bytes\": " << in.bytes << ", \"flops\": " << number(in.flops) << "}";
  }
  s << "\n]}";
  return s.str();
}

}  // namespace tilewise::exec
