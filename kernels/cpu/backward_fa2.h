// cpu.bwd.fa2: the FlashAttention-2 backward pass (seeds 000 and 002: "the
// backward saves only the per-row log-sum-exp and recomputes P block by
// block", "rebuilds normalized P_j = exp(S_j - LSE) directly with no running
// max").  Key blocks outer (dK, dV of a block stay in fp32 accumulators for
// the whole sweep), query tiles inner, dQ accumulated in fp32 across key
// blocks (a GPU kernel's atomic adds):
//   D_i = dO_i . O_i                                  (preprocess, fp32, from the
//                                                      O given: the forward's stored O in the output dtype)
//   P = exp(S - LSE)                                  (fp32, from the saved LSE)
//   dV += round(P)^T dO,   dP = dO V^T,   dS = P o (dP - D)
//   dQ += round(dS) K,     dK += round(dS)^T Q,       dQ, dK *= scale at the end
// Precision: the forward's (common.h): scores as cpu.tiled, P and dS
// rounded to V's dtype before their GEMMs, every accumulator fp32.
//
// A template over BwdSteps like the forward kernels over Fa2Steps: each
// backward mutant (kernels/mutants/backward_defects.h) hides one step.
#pragma once
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/common.h"

namespace afz::cpu {

struct Fa2BwdSteps {
  // A masked (query, key) pair scores -inf: exp(-inf - lse) is exactly 0.
  template <typename T>
  static T masked_score() { return kNegInf<T>; }

  // The LSE guard: an empty row's LSE is -inf (the forward ABI), and
  // exp(-inf - (-inf)) is NaN.  Referencing such a row to +inf gives every
  // P = exp(-inf - inf) = 0 (FlashAttention stores +inf there for this).
  template <typename T>
  static T lse_reference(T lse) { return lse == kNegInf<T> ? std::numeric_limits<T>::infinity() : lse; }

  // P = exp(s - LSE) <= 1 for the natural-log LSE: no running max needed.
  template <typename T>
  static T probability(T s, T lse_ref) { return std::exp(s - lse_ref); }

  // One term dO_x O_x of D = dO . O, from the O the kernel is given as the
  // forward stored it (loaded exactly from the output dtype).
  static float d_term(float dout, float o) { return dout * o; }

  // dS = P (dP - D): the softmax Jacobian applied to dP.
  template <typename T>
  static T score_grad(T p, T dp, T d) { return p * (dp - d); }

  // dQ and dK are dS K and dS^T Q times d(scale q.k)/d(q.k) = scale.
  template <typename T>
  static T grad_scale(T scale) { return scale; }
};

// The byte address of element [b][h][s][x] of t.
inline void* element_ptr(const afz_tensor& t, int64_t b, int64_t h, int64_t s, int64_t x) {
  return static_cast<char*>(t.data) + element_offset(t, b, h, s, x) * size_of(t.dtype);
}

struct BwdConfig {
  int br = 64;  // queries per tile
  int bc = 64;  // keys per block
};

template <class Steps = Fa2BwdSteps>
void fa2_backward(const afz_backward_problem& bp, const BwdConfig& cfg) {
  const afz_problem& p = *bp.fwd;
  const int d = p.head_dim, dv = p.head_dim_v, br = cfg.br, bc = cfg.bc, group = p.heads_q / p.heads_kv;
  const RoundPTo round_p{p.v.dtype};
  const float scale = Steps::grad_scale(p.scale);
  std::vector<float> K(int64_t(bc) * d), V(int64_t(bc) * dv), dK(int64_t(bc) * d), dV(int64_t(bc) * dv);
  std::vector<float> Q(d), dO(dv), O(dv), dP(bc);
  for (int b = 0; b < p.batch; ++b)
    for (int hk = 0; hk < p.heads_kv; ++hk) {
      const int sq = p.seqlens_q[b], sk = p.seqlens_k[b];
      // Preprocess: D per row of every head of the group, and dQ accumulators.
      std::vector<float> D(int64_t(group) * sq), lse_ref(int64_t(group) * sq), dQ(int64_t(group) * sq * d, 0.0f);
      for (int g = 0; g < group; ++g)
        for (int i = 0; i < sq; ++i) {
          const int h = hk * group + g;
          load_row(bp.dout, b, h, i, dv, dO.data());
          load_row(bp.out, b, h, i, dv, O.data());  // through O's dtype (bf16, fp16 or fp32)
          float acc = 0.0f;
          for (int x = 0; x < dv; ++x) acc = acc + Steps::d_term(dO[x], O[x]);
          D[int64_t(g) * sq + i] = acc;
          const float lse = bp.lse[b * bp.lse_stride[0] + h * bp.lse_stride[1] + i * bp.lse_stride[2]];
          lse_ref[int64_t(g) * sq + i] = Steps::lse_reference(lse);
        }
      for (int j0 = 0; j0 < sk; j0 += bc) {
        const int cols = std::min(bc, sk - j0);
        std::fill(dK.begin(), dK.end(), 0.0f);
        std::fill(dV.begin(), dV.end(), 0.0f);
        for (int c = 0; c < cols; ++c) {
          load_row(p.k, b, hk, j0 + c, d, K.data() + int64_t(c) * d);
          load_row(p.v, b, hk, j0 + c, dv, V.data() + int64_t(c) * dv);
        }
        for (int g = 0; g < group; ++g) {
          const HeadView view(p, b, hk * group + g);
          for (int i0 = 0; i0 < sq; i0 += br)
            for (int i = i0; i < std::min(sq, i0 + br); ++i) {
              view.load_q(i, Q.data());
              load_row(bp.dout, b, view.h, i, dv, dO.data());
              const float di = D[int64_t(g) * sq + i], lref = lse_ref[int64_t(g) * sq + i];
              float* dq = dQ.data() + (int64_t(g) * sq + i) * d;
              for (int c = 0; c < cols; ++c) {
                const int64_t j = j0 + c;
                const float* k = K.data() + int64_t(c) * d;
                const float* v = V.data() + int64_t(c) * dv;
                // The score, as the forward computes it, and d(softcap)/ds.
                float s, dtanh = 1.0f;
                if (!view.visible(i, j)) {
                  s = Steps::template masked_score<float>();
                } else {
                  float qk = 0.0f;
                  for (int x = 0; x < d; ++x) qk = qk + Q[x] * k[x];
                  s = Fa2Steps::scaled_score(qk, p.scale);
                  if (p.softcap != 0.0f) {
                    const float y = std::tanh(s / p.softcap);
                    s = p.softcap * y;
                    dtanh = 1.0f - y * y;
                  }
                  if (p.add_mask.data) s = s + view.add_mask(i, j);
                }
                const float pij = Steps::probability(s, lref);
                const float pr = round_p(pij);
                for (int x = 0; x < dv; ++x) dV[int64_t(c) * dv + x] = dV[int64_t(c) * dv + x] + pr * dO[x];
                float dp = 0.0f;
                for (int x = 0; x < dv; ++x) dp = dp + dO[x] * v[x];
                const float ds = round_p(Steps::score_grad(pij, dp, di) * dtanh);
                for (int x = 0; x < d; ++x) {
                  dq[x] = dq[x] + ds * k[x];
                  dK[int64_t(c) * d + x] = dK[int64_t(c) * d + x] + ds * Q[x];
                }
              }
            }
        }
        for (int c = 0; c < cols; ++c) {
          for (int x = 0; x < d; ++x)
            store(bp.dk.dtype, element_ptr(bp.dk, b, hk, j0 + c, x), double(dK[int64_t(c) * d + x] * scale));
          for (int x = 0; x < dv; ++x)
            store(bp.dv.dtype, element_ptr(bp.dv, b, hk, j0 + c, x), double(dV[int64_t(c) * dv + x]));
        }
      }
      for (int g = 0; g < group; ++g)
        for (int i = 0; i < sq; ++i)
          for (int x = 0; x < d; ++x)
            store(bp.dq.dtype, element_ptr(bp.dq, b, hk * group + g, i, x),
                  double(dQ[(int64_t(g) * sq + i) * d + x] * scale));
    }
}

// Why a backward problem is malformed, or "".
std::string backward_problem_error(const afz_backward_problem& bp);

// Runs body(bp) on a well-formed backward problem: a null or malformed
// problem, or an exception, becomes the ABI's "return 1 and one line".
template <class Body>
int guarded_backward_run(const afz_backward_problem* bp, char* error, size_t error_len, Body body) {
  if (!bp) {
    write_message(error, error_len, "null backward problem");
    return 1;
  }
  if (std::string why = backward_problem_error(*bp); !why.empty()) {
    write_message(error, error_len, why);
    return 1;
  }
  try {
    body(*bp);
  } catch (const std::exception& e) {
    write_message(error, error_len, e.what());
    return 1;
  }
  return 0;
}

template <class Steps = Fa2BwdSteps>
int fa2_backward_entry(const afz_backward_kernel* self, const afz_backward_problem* bp, char* error,
                       size_t error_len) {
  const BwdConfig cfg = self && self->user ? *static_cast<const BwdConfig*>(self->user) : BwdConfig{};
  return guarded_backward_run(bp, error, error_len, [&](const afz_backward_problem& p) {
    if (cfg.br < 1 || cfg.bc < 1) throw std::invalid_argument("backward kernel: Br and Bc must be at least 1");
    fa2_backward<Steps>(p, cfg);
  });
}

}  // namespace afz::cpu
