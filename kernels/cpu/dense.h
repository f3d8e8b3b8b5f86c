// The seed documents' algorithms on dense row-major arrays, in any scalar T:
// what the seed tests run in pure double.  They share OnlineSoftmax and
// TileAccumulator with the fp32 kernels, so those tests check the very
// recurrence the kernels execute.
//
// Shapes: q [d], Q [rows x d], K [n x d], V [n x dv], o [dv], O [rows x dv].
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/online_softmax.h"

namespace afz::cpu::dense {

template <typename T>
T dot(const T* a, const T* b, int d) {
  T s = T(0);
  for (int x = 0; x < d; ++x) s = s + a[x] * b[x];
  return s;
}

// Two-pass softmax attention of one query: the max, then exp-sum and P.V.
// Keys with visible(j) false take no part; no visible key gives o = 0.
template <typename T, class Visible>
void direct_attention(const T* q, const T* K, const T* V, int n, int d, int dv, T scale,
                      Visible visible, T* o) {
  std::vector<T> s(n, kNegInf<T>);
  T m = kNegInf<T>;
  for (int j = 0; j < n; ++j)
    if (visible(j)) {
      s[j] = dot(q, K + int64_t(j) * d, d) * scale;
      m = std::max(m, s[j]);
    }
  std::fill(o, o + dv, T(0));
  if (m == kNegInf<T>) return;  // empty row: 0, not 0/0
  T l = T(0);
  for (int j = 0; j < n; ++j) {
    const T p = std::exp(s[j] - m);  // masked: exp(-inf) = 0
    if (p == T(0)) continue;
    l = l + p;
    for (int x = 0; x < dv; ++x) o[x] = o[x] + p * V[int64_t(j) * dv + x];
  }
  for (int x = 0; x < dv; ++x) o[x] = o[x] / l;
}

template <typename T>
void direct_attention(const T* q, const T* K, const T* V, int n, int d, int dv, T scale, T* o) {
  direct_attention(q, K, V, n, d, dv, scale, [](int) { return true; }, o);
}

// Softmax without the max subtraction: exp(s) overflows once s passes the
// dtype's log(max) (709.8 in double, 88.7 in fp32, 11.09 in fp16), and then
// inf / inf is NaN.  Kept to show what the shift prevents.
template <typename T>
void unshifted_attention(const T* q, const T* K, const T* V, int n, int d, int dv, T scale, T* o) {
  T l = T(0);
  std::fill(o, o + dv, T(0));
  for (int j = 0; j < n; ++j) {
    const T p = std::exp(dot(q, K + int64_t(j) * d, d) * scale);
    l = l + p;
    for (int x = 0; x < dv; ++x) o[x] = o[x] + p * V[int64_t(j) * dv + x];
  }
  for (int x = 0; x < dv; ++x) o[x] = o[x] / l;
}

// Seed 000: one pass over K, V in blocks of `block` keys, O(d) state.
template <typename T, class Steps = Fa2Steps>
void online_attention(const T* q, const T* K, const T* V, int n, int d, int dv, T scale,
                      int block, T* o) {
  TileAccumulator<T, Steps> tile(1, dv);
  std::vector<T> S(block);
  for (int j0 = 0; j0 < n; j0 += block) {
    const int cols = std::min(block, n - j0);
    for (int c = 0; c < cols; ++c) S[c] = dot(q, K + int64_t(j0 + c) * d, d) * scale;
    tile.consume(S.data(), cols, V + int64_t(j0) * dv);
  }
  tile.finalize(o, nullptr);
}

// Seed 002: one query tile of `rows` queries at positions q0, q0 + 1, ...,
// key blocks of Bc, causal optional (key j visible to position i iff j <= i).
template <typename T, class Steps = Fa2Steps>
void flash_tile(const T* Q, int rows, const T* K, const T* V, int n, int d, int dv, T scale,
                int q0, bool causal, int Bc, T* O) {
  TileAccumulator<T, Steps> tile(rows, dv);
  std::vector<T> S(int64_t(rows) * Bc);
  for (int j0 = 0; j0 < n; j0 += Bc) {
    const int cols = std::min(Bc, n - j0);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const bool visible = !causal || j0 + c <= q0 + r;
        S[int64_t(r) * cols + c] =
            visible ? dot(Q + int64_t(r) * d, K + int64_t(j0 + c) * d, d) * scale : kNegInf<T>;
      }
    tile.consume(S.data(), cols, V + int64_t(j0) * dv);
  }
  tile.finalize(O, nullptr);
}

}  // namespace afz::cpu::dense
