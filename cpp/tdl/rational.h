// Exact rational numbers for the coefficients of symbolic intervals (Tofu §4.2: I/k).
#pragma once
#include <cstdint>
#include <string>

#include "tdl/errors.h"

namespace tilewise {

/// num/den in lowest terms with den > 0. Arithmetic is exact: a result that does not fit int64 in
/// lowest terms throws TDLError (a description's constants reach these coefficients unbounded).
struct Rational {
  int64_t num = 0;
  int64_t den = 1;

  Rational() = default;
  Rational(int64_t n) : num(n), den(1) {}  // NOLINT: integers convert implicitly
  Rational(int64_t n, int64_t d) { *this = make(n, d); }

  bool is_zero() const { return num == 0; }
  bool is_integer() const { return den == 1; }
  /// Largest integer <= this.
  int64_t floor() const { return num / den - (num % den < 0 ? 1 : 0); }

  friend Rational operator+(Rational a, Rational b) { return make(W(a.num) * b.den + W(b.num) * a.den, W(a.den) * b.den); }
  friend Rational operator-(Rational a, Rational b) { return make(W(a.num) * b.den - W(b.num) * a.den, W(a.den) * b.den); }
  friend Rational operator*(Rational a, Rational b) { return make(W(a.num) * b.num, W(a.den) * b.den); }
  friend Rational operator/(Rational a, Rational b) { return make(W(a.num) * b.den, W(a.den) * b.num); }
  friend Rational operator-(Rational a) { return make(-W(a.num), a.den); }
  friend bool operator==(Rational a, Rational b) { return a.num == b.num && a.den == b.den; }
  friend bool operator!=(Rational a, Rational b) { return !(a == b); }
  friend bool operator<(Rational a, Rational b) { return W(a.num) * b.den < W(b.num) * a.den; }
  friend bool operator<=(Rational a, Rational b) { return !(b < a); }

  std::string str() const { return den == 1 ? std::to_string(num) : std::to_string(num) + "/" + std::to_string(den); }

 private:
  using W = __int128;  // products of two int64 fit; lowest terms are then checked against int64
  static W gcd(W a, W b) {
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b != 0) {
      const W t = a % b;
      a = b, b = t;
    }
    return a;
  }
  static Rational make(W n, W d) {
    if (d == 0) throw TDLError("symbolic interval arithmetic divides by zero");
    if (d < 0) n = -n, d = -d;
    const W g = gcd(n, d);
    if (g > 1) n /= g, d /= g;
    constexpr W lo = INT64_MIN, hi = INT64_MAX;
    if (n < lo || n > hi || d > hi)
      throw TDLError("symbolic interval arithmetic leaves int64: the description's index constants or coefficients "
                     "are too large");
    Rational r;
    r.num = static_cast<int64_t>(n), r.den = static_cast<int64_t>(d);
    return r;
  }
};

}  // namespace tilewise
