// Parsing an op's attributes once, when a kernel call is prepared (cpp/exec prepares one per op
// and device): a step then reads numbers from a map instead of re-reading JSON in every call.
#include "kernels/cpu/op_attrs.h"

#include <cctype>
#include <cstdlib>
#include <limits>
#include <utility>

namespace tilewise::kernels {

namespace {

// A small JSON reader for one flat object (the form Python's json.dumps gives op attributes).
class JsonReader {
 public:
  explicit JsonReader(const std::string& s) : s_(s) {}

  /// Reads the object: for each key its numbers, whether they were a list, and whether the value
  /// was numeric at all.
  using Entry = OpAttrs::Value;
  bool object(std::map<std::string, Entry>* out) {
    skip_ws();
    if (!eat('{')) return false;
    skip_ws();
    if (eat('}')) return at_end();
    while (true) {
      std::string key;
      skip_ws();
      if (!string(&key)) return false;
      skip_ws();
      if (!eat(':')) return false;
      skip_ws();
      Entry e;
      const size_t start = pos_;
      if (peek() == '[') {
        e.list = number_list(&e.nums, &e.inner);
        if (!e.list) e.numeric = false;
      } else if (!scalar(&e.nums)) {
        e.numeric = false;
      }
      if (!e.numeric) {
        // Something no kernel reads (a string, null, an object, a deeper list): skip it.
        e.nums.clear();
        e.inner = 0;
        pos_ = start;
        if (!skip_value()) return false;
      }
      (*out)[key] = std::move(e);
      skip_ws();
      if (eat(',')) continue;
      if (eat('}')) return at_end();
      return false;
    }
  }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool at_end() {
    skip_ws();
    return pos_ == s_.size();
  }
  bool string(std::string* out) {
    if (!eat('"')) return false;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      if (s_[pos_] == '\\') ++pos_;  // escapes are kept verbatim: keys here are plain identifiers
      if (pos_ < s_.size() && out) out->push_back(s_[pos_]);
      ++pos_;
    }
    return eat('"');
  }
  bool number(double* out) {
    const char* begin = s_.c_str() + pos_;
    char* end = nullptr;
    double v = std::strtod(begin, &end);
    if (end == begin) return false;
    pos_ += static_cast<size_t>(end - begin);
    *out = v;
    return true;
  }
  bool word(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (s_.compare(pos_, n, w) != 0) return false;
    pos_ += n;
    return true;
  }
  // A number or boolean into out (one element); false, position unchanged, for anything else.
  bool scalar(std::vector<double>* out) {
    size_t start = pos_;
    double v = 0;
    if (word("true")) {
      out->push_back(1.0);
    } else if (word("false")) {
      out->push_back(0.0);
    } else if (word("Infinity")) {  // Python's json writes non-finite floats so (a one-sided clip bound)
      out->push_back(std::numeric_limits<double>::infinity());
    } else if (word("-Infinity")) {
      out->push_back(-std::numeric_limits<double>::infinity());
    } else if (word("NaN")) {
      out->push_back(std::numeric_limits<double>::quiet_NaN());
    } else if ((std::isdigit(static_cast<unsigned char>(peek())) || peek() == '-') && number(&v)) {
      out->push_back(v);
    } else {
      pos_ = start;
      return false;
    }
    return true;
  }
  // A list of numbers, or (when `inner` is given) of equally long lists of numbers, flattened into
  // out with *inner their length.
  bool number_list(std::vector<double>* out, int64_t* inner = nullptr) {
    if (!eat('[')) return false;
    skip_ws();
    if (eat(']')) return true;
    const bool nested = inner && peek() == '[';
    while (true) {
      skip_ws();
      if (nested) {
        const size_t before = out->size();
        if (!number_list(out)) return false;
        const auto n = static_cast<int64_t>(out->size() - before);
        if (n == 0 || (*inner != 0 && n != *inner)) return false;
        *inner = n;
      } else if (!scalar(out)) {
        return false;
      }
      skip_ws();
      if (eat(',')) continue;
      return eat(']');
    }
  }
  bool skip_value() {
    skip_ws();
    char c = peek();
    if (c == '"') return string(nullptr);
    if (c == '[' || c == '{') {
      char close = c == '[' ? ']' : '}';
      ++pos_;
      skip_ws();
      if (eat(close)) return true;
      while (true) {
        skip_ws();
        if (close == '}') {
          if (!string(nullptr)) return false;
          skip_ws();
          if (!eat(':')) return false;
        }
        if (!skip_value()) return false;
        skip_ws();
        if (eat(',')) continue;
        return eat(close);
      }
    }
    if (word("null")) return true;
    std::vector<double> v;
    return scalar(&v);
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

OpAttrs OpAttrs::parse(const std::string& json) {
  OpAttrs a;
  if (json.empty()) return a;
  a.ok_ = JsonReader(json).object(&a.values_);
  return a;
}

const OpAttrs::Value* OpAttrs::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

}  // namespace tilewise::kernels
