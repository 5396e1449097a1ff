// An op's attributes, parsed once from the JSON the graph stores (the form Python's json.dumps
// gives: one flat object) when a kernel call is prepared, and kept in the call.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tilewise::kernels {

/// Parsed op attributes: numbers, booleans (as 0/1), lists of numbers and lists of equally long
/// lists of numbers (pad's ((1, 2), (0, 3)), flattened). Other values (strings, null, objects,
/// deeper or ragged lists) are kept only as present, so a kernel reading one declines.
class OpAttrs {
 public:
  /// One attribute's value.
  struct Value {
    bool numeric = true;  ///< false: a value no kernel reads (a string, null, an object)
    bool list = false;
    int64_t inner = 0;  ///< the length of each inner list of a list of lists (nums flattened), else 0
    std::vector<double> nums;
  };
  /// Parses `json` ("" = no attributes). Malformed JSON gives ok() false: every kernel declines it.
  static OpAttrs parse(const std::string& json);
  /// Whether the JSON parsed.
  bool ok() const { return ok_; }
  /// The value of `key`, or null when absent.
  const Value* find(const std::string& key) const;

 private:
  std::map<std::string, Value> values_;
  bool ok_ = true;
};

}  // namespace tilewise::kernels
