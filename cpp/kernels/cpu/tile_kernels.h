// Native float32 kernels that compute one device's share of an op (partition-n-reduce, Tofu §6):
// the op's variables restricted to ranges, inputs given as the regions the device holds.
// The runtime (cpp/exec) calls run_native first and falls back to the TDL interpreter when it
// returns false, so a kernel may decline any case it does not handle.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/op_attrs.h"

namespace tilewise::kernels {

/// Inclusive index range [lo, hi]; empty when lo > hi.
struct Span {
  int64_t lo = 0;
  int64_t hi = -1;
  int64_t size() const { return hi < lo ? 0 : hi - lo + 1; }
};

/// Element types of the tensors the runtime holds. Ops compute float32; int64, int32 and bool
/// tensors (token ids, labels, masks) are inputs and constants that ops read.
enum class DType : uint8_t { kFloat32, kInt64, kInt32, kBool };

/// The DType of a graph dtype name; std::invalid_argument naming the valid ones otherwise.
DType dtype_of(const std::string& name);
const char* dtype_name(DType t);
int64_t dtype_bytes(DType t);

/// A row-major buffer holding the box `region` (one Span per dimension) of an input tensor whose
/// full shape is `shape`. Elements of the box outside the tensor never occur; reads the op makes
/// outside the tensor are 0 (TDL semantics: padding) and lie outside `region`.
struct TileIn {
  const float* data = nullptr;  ///< the elements when `dtype` is float32, else null
  std::vector<Span> region;
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  const void* raw = nullptr;  ///< the elements when `dtype` is not float32 (reads_integers kernels)
};

/// One device's share of one op.
struct TileCall {
  std::string type;                    ///< TDL op name, e.g. "matmul", "conv2d" (for messages)
  /// The native kernel the op declares (`@tw.op(kernel=...)`), e.g. "matmul"; empty: none. The
  /// variables below are in the kernel's role order (bind_roles), so no kernel reads their names.
  std::string kernel;
  OpAttrs attrs;                       ///< the op's attributes, parsed once: OpAttrs::parse(R"({"stride": 2})")
  std::vector<std::string> var_names;  ///< the description's variables, in description order
  std::vector<int> output_vars;        ///< variable ids in output-dimension order
  std::vector<int64_t> extents;        ///< every variable's full extent
  std::vector<Span> vars;              ///< every variable's range on this device (non-empty)
  std::vector<TileIn> inputs;          ///< in the op's input order
  std::vector<int64_t> output_shape;   ///< the full output tensor's shape
  /// Row-major over the output variables' ranges (vars[output_vars[0]].size() x ...). The kernel
  /// overwrites it. When a top-level reduction variable is restricted, the result is the partial
  /// reduction over that sub-range (a plain sum for Sum), combined across devices by the runtime.
  float* out = nullptr;
  /// Scratch the kernel may use during the call (im2col matrices, packed blocks, accumulators): at
  /// least scratch_bytes(call) bytes, 16-byte aligned, planned by the arena as a buffer of the
  /// Compute instruction. Null or too small: the kernel takes what is missing from the heap
  /// (counted by heap_scratch_bytes).
  std::byte* scratch = nullptr;
  int64_t scratch_size = 0;
};

/// A value the op cannot take (an embedding id that names no row of the table): the step fails with
/// this message instead of computing something else. Not a decline: the interpreter would not do better.
class InvalidInput : public std::domain_error {
 public:
  using std::domain_error::domain_error;
};

/// Computes `call` with its declared kernel and returns true, or returns false (nothing written)
/// when it declares none or the kernel does not handle this attribute / split combination.
bool run_native(const TileCall& call);

/// The scratch bytes run_native takes for `call` from call.scratch: from the call's kernel,
/// variables, input regions and shapes and attributes alone (no data, no buffers). At least what
/// the kernel uses when it runs the call (it may decline, having used none); 0 for kernels that
/// need none (element-wise maps, GEMMs on the inputs in place) or use only a few fixed-size values.
int64_t scratch_bytes(const TileCall& call);

/// Bytes kernels took from the heap since the process started because a call's scratch was null or
/// smaller than scratch_bytes(call): 0 as long as every caller hands kernels their planned scratch.
int64_t heap_scratch_bytes();
/// The same, for calls made on this thread (a device's worker: what its step took outside the arena).
int64_t heap_scratch_bytes_this_thread();

/// A native kernel and the roles of its variables, in the order the kernel reads them. A role
/// ending in '*' stands for zero or more variables (at most one such role per kernel).
struct KernelInfo {
  std::string name;
  std::vector<std::string> roles;
  /// How the time model prices a call (sim::DeviceProfile): "gemm" and "conv" by FLOPs; "elementwise",
  /// "reduction", "norm", "layout", "embedding" by bytes read and written.
  std::string kind;
};

/// Whether `kernel` reads integer and boolean inputs as they are (the embedding lookups and one_hot
/// read int64 ids exactly). Every other kernel reads float32 only: the runtime hands it float32 copies of
/// such inputs (torch's promotion of an integer operand), and run_native declines them otherwise.
bool reads_integers(const std::string& kernel);

/// Every native kernel, by name.
std::vector<KernelInfo> native_kernels();

/// The kind of a native kernel ("" for a name that is none).
std::string kernel_kind(const std::string& kernel);

/// Whether `count` variables can take the roles (exactly one per role, zero or more for a '*' role).
bool roles_fit(const std::vector<std::string>& roles, size_t count);

/// Puts the call's variables (var_names, extents, vars, output_vars) in the kernel's role order:
/// `role_vars[r]` is the description variable that takes position r. Empty: already in order.
/// Throws std::invalid_argument when `role_vars` is not a permutation of the variables.
void bind_roles(TileCall& call, const std::vector<int>& role_vars);

}  // namespace tilewise::kernels
