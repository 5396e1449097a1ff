// libFuzzer harness: op attributes (the flat JSON objects a graph file gives each op, read by the
// kernels' OpAttrs once per call preparation). Any text must parse to a set of values or to "not
// ok"; every accessor must then answer without a crash, a hang or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_bytes.h"
#include "kernels/cpu/op_attrs.h"

using tilewise::kernels::OpAttrs;

namespace {
tilewise::fuzz::Outcomes outcomes("op_attrs_fuzzer");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const OpAttrs attrs = OpAttrs::parse(text);
  if (!attrs.ok()) {
    outcomes.count("refused");
    return 0;
  }
  for (const char* key : {"axis", "axes", "stride", "padding", "eps", "value", "shape", "perm", "groups", "p", ""})
    if (const OpAttrs::Value* v = attrs.find(key)) {
      // A list of lists is flattened from equally long rows: its numbers are whole rows.
      if (v->inner < 0 || (v->inner > 0 && v->nums.size() % static_cast<size_t>(v->inner) != 0)) __builtin_trap();
      if (!v->list && v->numeric && v->nums.size() != 1) __builtin_trap();
    }
  outcomes.count("parsed");
  return 0;
}
