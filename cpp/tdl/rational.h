// Exact rational numbers for the coefficients of symbolic intervals (Tofu §4.2: I/k).
#pragma once
#include <cstdint>
#include <numeric>
#include <string>

namespace tilewise {

/// num/den in lowest terms with den > 0.
struct Rational {
  int64_t num = 0;
  int64_t den = 1;

  Rational() = default;
  Rational(int64_t n) : num(n), den(1) {}  // NOLINT: integers convert implicitly
  Rational(int64_t n, int64_t d) : num(n), den(d) { normalize(); }

  bool is_zero() const { return num == 0; }
  bool is_integer() const { return den == 1; }
  /// Largest integer <= this.
  int64_t floor() const { return num >= 0 ? num / den : -((-num + den - 1) / den); }

  friend Rational operator+(Rational a, Rational b) { return {a.num * b.den + b.num * a.den, a.den * b.den}; }
  friend Rational operator-(Rational a, Rational b) { return {a.num * b.den - b.num * a.den, a.den * b.den}; }
  friend Rational operator*(Rational a, Rational b) { return {a.num * b.num, a.den * b.den}; }
  friend Rational operator/(Rational a, Rational b) { return {a.num * b.den, a.den * b.num}; }
  friend Rational operator-(Rational a) { return {-a.num, a.den}; }
  friend bool operator==(Rational a, Rational b) { return a.num == b.num && a.den == b.den; }
  friend bool operator!=(Rational a, Rational b) { return !(a == b); }
  friend bool operator<(Rational a, Rational b) { return a.num * b.den < b.num * a.den; }
  friend bool operator<=(Rational a, Rational b) { return !(b < a); }

  std::string str() const { return den == 1 ? std::to_string(num) : std::to_string(num) + "/" + std::to_string(den); }

 private:
  void normalize() {
    if (den < 0) num = -num, den = -den;
    int64_t g = std::gcd(num < 0 ? -num : num, den);
    if (g > 1) num /= g, den /= g;
  }
};

}  // namespace tilewise
