// Typed user errors of the TDL stage; the bindings map each to its Python type.
#pragma once
#include <stdexcept>
#include <string>

namespace tilewise {

/// A malformed operator description (non-affine index, unknown tensor, unbound variable...).
struct TDLError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// Shapes that do not fit a description (wrong rank, ambiguous or inconsistent extents).
struct ShapeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// An internal invariant broke: a bug in tilewise, never the user's fault.
#define TW_ASSERT(cond, msg)                                                       \
  do {                                                                             \
    if (!(cond)) throw std::logic_error(std::string("tilewise internal: ") + msg); \
  } while (0)

}  // namespace tilewise
