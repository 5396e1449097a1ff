// Element-wise row loops compiled three times — for AVX-512, for AVX2 and for the baseline x86-64
// (SSE2) the build targets — and chosen at run time (__builtin_cpu_supports), so one build runs on
// any x86-64 and still uses the wide registers where the CPU has them. The loop body is the
// kernel's lambda, inlined into each copy. The kernels build with -ffp-contract=off (CMakeLists.txt):
// no copy fuses a multiply and an add, so the three give the same bits (LSTM gates: 16 -> 2.4 ns per
// element with AVX-512). Other architectures get the plain loop. Internal to cpp/kernels/cpu.
#pragma once

#include <cstdint>

namespace tilewise::kernels::simd {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TW_SIMD_X86 1
#else
#define TW_SIMD_X86 0
#endif

/// The widest of the three loop copies this CPU runs: 2 AVX-512F, 1 AVX2, 0 baseline.
inline int level() {
#if TW_SIMD_X86
  static const int l = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
  return l;
#else
  return 0;
#endif
}

namespace detail {

template <class F, class... P>
inline __attribute__((always_inline)) void loop(float* out, int64_t n, F& f, const P*... in) {
  for (int64_t t = 0; t < n; ++t) out[t] = f(in[t]...);
}

#if TW_SIMD_X86
template <class F, class... P>
__attribute__((target("avx512f"))) void loop_avx512(float* out, int64_t n, F& f, const P*... in) {
  loop(out, n, f, in...);
}
template <class F, class... P>
__attribute__((target("avx2"))) void loop_avx2(float* out, int64_t n, F& f, const P*... in) {
  loop(out, n, f, in...);
}
#endif

}  // namespace detail

/// out[t] = f(in[t]...) for t in [0, n): every pointer advances by one element (a contiguous row).
template <class F, class... P>
void map_row(float* out, int64_t n, F& f, const P*... in) {
#if TW_SIMD_X86
  switch (level()) {
    case 2:
      detail::loop_avx512(out, n, f, in...);
      return;
    case 1:
      detail::loop_avx2(out, n, f, in...);
      return;
    default:
      break;
  }
#endif
  detail::loop(out, n, f, in...);
}

}  // namespace tilewise::kernels::simd
