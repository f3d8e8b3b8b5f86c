// The fast tier on the GPU: the same steps and a-priori bounds as
// oracles/fast_oracle.cpp (both run oracles/fast_steps.h), in double, one
// thread per (row, key) for the scores and weights and one per output
// element for the sums.  Every sum runs in the order the CPU tier uses (keys
// ascending; the dot product's eight lanes folded as on the CPU), so the two
// tiers agree bit for bit except where CUDA's exp, expm1, log or tanh
// rounds differently from glibc's, and each tier's bound covers its own
// result.  Rows the bound leaves open escalate to MPFR on the CPU exactly as
// the fast tier's do (the verdict reads o_err / lse_err, harness/judge).
//
// One block per (b, h, tile of kRows queries); keys are streamed through
// shared memory in tiles of `tile_keys`, twice: the first pass finds each
// row's reference key (fast_steps::beats, scanned in key order), the second
// computes the weights and accumulates l, the numerators and the condition
// sums.  Only the band of keys some row of the tile can see is read.
//
// Built with --fmad=false: a contracted a*b+c would break every
// error-free transformation (oracles/eft.h).
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/abi/dtype.h"
#include "oracles/fast_steps.h"
#include "oracles/gpu/device_problem.h"
#include "oracles/oracle.h"
#include "oracles/problem_view.h"

namespace afz {

namespace {

namespace fs = fast_steps;

constexpr int kRows = 16;      // query rows per block (one b, one h)
constexpr int kThreads = 256;  // threads per block
constexpr int kTileKeys = 32;  // keys per shared-memory tile: two blocks fit one H200 SM at d = dv = 128
constexpr unsigned long long kNoRow = ~0ull;

// One row's state across the key tiles.
struct RowState {
  fs::Reference ref;
  fs::RowSums sums;
  fs::RowBound bound;
  int lo, hi;         // the row's band [lo, hi) of keys, clamped to the sequence
  int visible;        // visible keys seen so far (pass 1): the reference's ordinal
  bool exists;        // i < max_seqlen_q: a row of the result
  bool active;        // i < seqlens_q[b]: a query
  bool q_finite;
  bool trusted;
};

struct Smem {  // the dynamic shared memory's arrays
  double *q, *g_hi, *g_lo, *add, *sigma, *delta, *e, *e_sigma, *e_rho, *tail;
  float *k, *v;
  uint8_t *visible, *kv_finite;
};

__device__ Smem carve(void* base, const gpu_oracle::Params& p) {
  Smem s;
  const int pairs = kRows * p.tile_keys;
  double* d = static_cast<double*>(base);
  s.q = d, d += kRows * p.d;
  for (double** a : {&s.g_hi, &s.g_lo, &s.add, &s.sigma, &s.delta, &s.e, &s.e_sigma, &s.e_rho, &s.tail})
    *a = d, d += pairs;
  float* f = reinterpret_cast<float*>(d);
  s.k = f, f += p.tile_keys * p.k_ld;
  s.v = f, f += p.tile_keys * p.v_ld;
  s.visible = reinterpret_cast<uint8_t*>(f);
  s.kv_finite = s.visible + pairs;
  return s;
}

__device__ void flag_row(const gpu_oracle::Params& p, int64_t r) { atomicMin(p.bad_row, (unsigned long long)r); }

// K (and V in the second pass) of keys [j0, j0 + tile_keys) into shared
// memory, as floats: every input dtype is a subset of fp32, so exact.
__device__ void load_tile(const gpu_oracle::Params& p, const Smem& s, int b, int hk, int j0, int j_end, bool with_v) {
  for (int kk = threadIdx.x; kk < p.tile_keys; kk += blockDim.x) s.kv_finite[kk] = 1;
  __syncthreads();
  for (int idx = threadIdx.x; idx < p.tile_keys * p.d; idx += blockDim.x) {
    const int kk = idx / p.d, x = idx % p.d, j = j0 + kk;
    const double val = j < j_end ? gpu_oracle::load(p.k, b, hk, j, x) : 0.0;
    if (!isfinite(val)) s.kv_finite[kk] = 0;
    s.k[kk * p.k_ld + x] = float(val);
  }
  if (with_v)
    for (int idx = threadIdx.x; idx < p.tile_keys * p.dv; idx += blockDim.x) {
      const int kk = idx / p.dv, x = idx % p.dv, j = j0 + kk;
      const double val = j < j_end ? gpu_oracle::load(p.v, b, hk, j, x) : 0.0;
      if (!isfinite(val)) s.kv_finite[kk] = 0;
      s.v[kk * p.v_ld + x] = float(val);
    }
  __syncthreads();
}

// Scores of every (row, key) pair of the tile: visibility (oracles/
// problem_view.h), Dot2 in the CPU's lane order, fast_steps::score.
__device__ void tile_scores(const gpu_oracle::Params& p, const Smem& s, const RowState* rows, int b, int h, int i0,
                            int j0, int j_end, bool check_kv) {
  for (int pair = threadIdx.x; pair < kRows * p.tile_keys; pair += blockDim.x) {
    const int rr = pair / p.tile_keys, kk = pair % p.tile_keys, j = j0 + kk, i = i0 + rr;
    const RowState& row = rows[rr];
    bool vis = row.active && j < j_end && j >= row.lo && j < row.hi;
    double add = 0;
    if (vis && p.has_bool_mask) vis = gpu_oracle::load(p.bool_mask, b, h, i, j) != 0;
    if (vis && p.has_add_mask) {
      add = gpu_oracle::load(p.add_mask, b, h, i, j);
      if (add == -fs::kInf) vis = false;  // exp(-inf) = 0: invisible
      else if (!isfinite(add)) flag_row(p, p.row0 + rr);  // NaN or +inf: no attention mask (ProblemView says which)
    }
    s.visible[pair] = vis;
    if (!vis) continue;
    if (check_kv && !s.kv_finite[kk]) flag_row(p, p.row0 + rr);
    double P[fs::kLanes] = {}, S[fs::kLanes] = {}, A[fs::kLanes] = {};
    const double* q = s.q + rr * p.d;
    const float* k = s.k + kk * p.k_ld;
    for (int x0 = 0; x0 < p.d; x0 += fs::kLanes) {
#pragma unroll
      for (int l = 0; l < fs::kLanes; ++l) {
        // Lanes past d add exact zeros on the CPU (zero padding): skipping them is the same.
        if (x0 + l >= p.d) break;
        const double hprod = q[x0 + l] * double(k[x0 + l]);  // exact: two <= 24-bit significands
        double sum, err;
        eft::two_sum(P[l], hprod, sum, err);
        P[l] = sum;
        S[l] += err;
        A[l] += fabs(hprod);
      }
    }
    double t_hi, t_lo, abs_dot;
    fs::fold_lanes(P, S, A, t_hi, t_lo, abs_dot);
    const fs::Score sc = fs::score(t_hi, t_lo, abs_dot, add, p.scale, p.softcap, p.dot_err);
    s.g_hi[pair] = sc.g_hi;
    s.g_lo[pair] = sc.g_lo;
    s.add[pair] = add;
    s.sigma[pair] = sc.sigma;
    s.delta[pair] = sc.delta;
  }
}

__global__ void __launch_bounds__(kThreads) attention_rows(gpu_oracle::Params p) {
  extern __shared__ double smem_base[];
  __shared__ alignas(RowState) unsigned char rows_raw[sizeof(RowState) * kRows];
  __shared__ int key_range[2];
  RowState* rows = reinterpret_cast<RowState*>(rows_raw);
  const Smem s = carve(smem_base, p);

  const int row_tiles = (p.max_sq + kRows - 1) / kRows;
  const int ti = int(blockIdx.x % row_tiles);
  const int64_t bh = blockIdx.x / row_tiles;
  const int h = int(bh % p.heads_q), b = int(bh / p.heads_q), hk = h / p.group;
  const int i0 = ti * kRows;
  const int sq = p.seqlens_q[b], sk = p.seqlens_k[b];
  p.row0 = (int64_t(b) * p.heads_q + h) * p.max_sq + i0;

  if (threadIdx.x < kRows) {
    RowState& row = rows[threadIdx.x];
    row = RowState{};
    const int i = i0 + threadIdx.x;
    row.exists = i < p.max_sq;
    row.active = i < sq;
    row.q_finite = true;
    row.trusted = true;
    // The band, in int64 (attnfuzz_kernel.h; oracles/problem_view.cpp).
    int64_t lo = 0, hi = sk;
    if (p.has_window) {
      const int64_t diag = int64_t(i) + (p.bottom_right ? int64_t(sk) - sq : 0);
      if (p.window_left >= 0) lo = max(lo, diag - p.window_left);
      if (p.window_right >= 0) hi = min(hi, diag + p.window_right + 1);
    }
    row.lo = int(lo);
    row.hi = int(max(lo, hi));
  }
  if (threadIdx.x == 0) key_range[0] = sk, key_range[1] = 0;
  __syncthreads();
  if (threadIdx.x < kRows && rows[threadIdx.x].active && rows[threadIdx.x].lo < rows[threadIdx.x].hi) {
    atomicMin(&key_range[0], rows[threadIdx.x].lo);
    atomicMax(&key_range[1], rows[threadIdx.x].hi);
  }
  for (int idx = threadIdx.x; idx < kRows * p.d; idx += blockDim.x) {
    const int rr = idx / p.d, x = idx % p.d;
    double val = 0;
    if (i0 + rr < sq) {
      val = gpu_oracle::load(p.q, b, h, i0 + rr, x);
      if (!isfinite(val)) rows[rr].q_finite = false;
    }
    s.q[idx] = val;
  }
  __syncthreads();
  const int k_lo = key_range[0], k_hi = key_range[1];

  // Pass 1: each row's reference key, scanning keys in ascending order.
  for (int j0 = k_lo; j0 < k_hi; j0 += p.tile_keys) {
    load_tile(p, s, b, hk, j0, k_hi, false);
    tile_scores(p, s, rows, b, h, i0, j0, k_hi, false);
    __syncthreads();
    if (threadIdx.x < kRows) {
      RowState& row = rows[threadIdx.x];
      for (int kk = 0; kk < p.tile_keys; ++kk) {
        const int pair = threadIdx.x * p.tile_keys + kk;
        if (!s.visible[pair]) continue;
        const eft::Pair g{s.g_hi[pair], s.g_lo[pair]};
        if (row.visible == 0 || fs::beats(s.add[pair], g, row.ref)) row.ref = {s.add[pair], g.hi, g.lo, row.visible};
        ++row.visible;
      }
    }
    __syncthreads();
  }
  // The CPU tier reads q only for rows with a visible key.
  if (threadIdx.x < kRows && rows[threadIdx.x].visible > 0 && !rows[threadIdx.x].q_finite)
    flag_row(p, p.row0 + threadIdx.x);

  // Pass 2: weights, then l and the row sums (one thread per row, keys in
  // order) and the numerators (one thread per element, keys in order).
  for (int j0 = k_lo; j0 < k_hi; j0 += p.tile_keys) {
    load_tile(p, s, b, hk, j0, k_hi, true);
    tile_scores(p, s, rows, b, h, i0, j0, k_hi, true);
    __syncthreads();
    for (int pair = threadIdx.x; pair < kRows * p.tile_keys; pair += blockDim.x) {
      if (!s.visible[pair]) continue;
      RowState& row = rows[pair / p.tile_keys];
      bool trusted = true;
      const fs::Weight w = fs::weight(s.add[pair], {s.g_hi[pair], s.g_lo[pair]}, s.sigma[pair], s.delta[pair], row.ref,
                                      &trusted);
      if (!trusted) row.trusted = false;  // every writer stores false: a benign race
      s.e[pair] = w.e, s.e_sigma[pair] = w.e_sigma, s.e_rho[pair] = w.e_rho, s.tail[pair] = w.tail;
    }
    __syncthreads();
    if (threadIdx.x < kRows) {
      RowState& row = rows[threadIdx.x];
      for (int kk = 0; kk < p.tile_keys; ++kk) {
        const int pair = threadIdx.x * p.tile_keys + kk;
        if (s.visible[pair])
          row.sums.add({s.e[pair], s.e_sigma[pair], s.e_rho[pair], s.tail[pair]}, s.g_hi[pair], s.add[pair],
                       s.sigma[pair]);
      }
    }
    // The element sums live in the output arrays until the end: S, C in o,
    // A1, A2, A3 in cond, cond_score, cond_tiny, A4 in o_err.
    for (int el = threadIdx.x; el < kRows * p.dv; el += blockDim.x) {
      const int rr = el / p.dv, x = el % p.dv;
      if (!rows[rr].active) continue;
      const int64_t ge = (p.row0 + rr) * p.dv + x;
      double S = p.out.o[ge].hi, C = p.out.o[ge].lo, A1 = p.out.cond[ge], A2 = p.out.cond_score[ge],
             A3 = p.out.cond_tiny[ge], A4 = p.out.o_err[ge];
      for (int kk = 0; kk < p.tile_keys; ++kk) {
        const int pair = rr * p.tile_keys + kk;
        if (!s.visible[pair]) continue;
        double w_hi, w_lo;
        eft::split(s.e[pair], w_hi, w_lo);
        const double vx = s.v[kk * p.v_ld + x], av = fabs(vx);
        fs::accumulate_key(S, C, A1, A2, A3, A4, w_hi, w_lo, s.e[pair], s.e_sigma[pair], s.e_rho[pair], vx, av);
      }
      p.out.o[ge].hi = S, p.out.o[ge].lo = C, p.out.cond[ge] = A1, p.out.cond_score[ge] = A2,
      p.out.cond_tiny[ge] = A3, p.out.o_err[ge] = A4;
    }
    __syncthreads();
  }

  // The rows' results; an empty row keeps o = 0 and its conventions.
  if (threadIdx.x < kRows && rows[threadIdx.x].exists) {
    RowState& row = rows[threadIdx.x];
    const int64_t r = p.row0 + threadIdx.x;
    if (row.sums.n == 0) {
      p.out.lse[r].hi = -fs::kInf, p.out.lse[r].lo = 0;
      p.out.empty[r] = 1;
      p.out.max_key[r] = -1;
    } else {
      row.bound = fs::row_bound(row.sums, row.trusted);
      const fs::Lse l = fs::lse(row.bound, row.ref);
      p.out.lse[r].hi = l.lse.hi, p.out.lse[r].lo = l.lse.lo;
      p.out.lse_err[r] = l.err;
      p.out.lse_cond_score[r] = row.sums.sum_e_sigma / row.bound.l.hi;
      p.out.max_abs_score[r] = row.sums.max_abs_score;
      p.out.max_sigma[r] = row.sums.max_sigma;
      p.out.visible_keys[r] = row.sums.n;
      p.out.max_key[r] = row.ref.key;
      p.out.empty[r] = 0;
    }
  }
  __syncthreads();
  for (int el = threadIdx.x; el < kRows * p.dv; el += blockDim.x) {
    const int rr = el / p.dv, x = el % p.dv;
    if (!rows[rr].active || rows[rr].sums.n == 0) continue;
    const int64_t ge = (p.row0 + rr) * p.dv + x;
    const fs::Element e = fs::element(rows[rr].bound, p.out.o[ge].hi, p.out.o[ge].lo, p.out.cond[ge],
                                      p.out.cond_score[ge], p.out.cond_tiny[ge], p.out.o_err[ge]);
    p.out.o[ge].hi = e.o.hi, p.out.o[ge].lo = e.o.lo;
    p.out.cond[ge] = e.cond, p.out.cond_score[ge] = e.cond_score, p.out.cond_tiny[ge] = e.cond_tiny;
    p.out.o_err[ge] = e.err;
  }
}

size_t shared_bytes(const gpu_oracle::Params& p) {
  const size_t pairs = size_t(kRows) * p.tile_keys;
  constexpr size_t kPairArrays = 9;  // g_hi, g_lo, add, sigma, delta, e, e_sigma, e_rho, tail
  return sizeof(double) * (size_t(kRows) * p.d + kPairArrays * pairs) +
         sizeof(float) * size_t(p.tile_keys) * (p.k_ld + p.v_ld) + pairs + p.tile_keys;
}

class GpuOracle final : public Oracle {
 public:
  std::string name() const override { return "gpu"; }

  OracleResult compute(const afz_problem& p) const override {
    const oracle_detail::ProblemView view(p);  // the CPU tiers' validation and messages
    OracleResult out;
    view.prepare(out);
    if (out.rows() == 0) return out;
    gpu_oracle::DeviceProblem dev(p);
    gpu_oracle::Params params = dev.params();
    params.tile_keys = kTileKeys;
    params.dot_err = fs::dot_err(fs::padded(p.head_dim));
    params.heads_q = p.heads_q;
    params.group = p.heads_q / p.heads_kv;
    // Odd leading dimensions: the 32 keys a warp reads at one x fall in 32
    // different shared-memory banks.
    params.k_ld = p.head_dim | 1;
    params.v_ld = p.head_dim_v | 1;
    int device = 0, optin = 0;
    gpu_oracle::check(cudaGetDevice(&device), "cudaGetDevice");
    gpu_oracle::check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                      "cudaDeviceGetAttribute");
    while (params.tile_keys > 1 && shared_bytes(params) > size_t(optin)) params.tile_keys /= 2;
    const size_t smem = shared_bytes(params);
    if (smem > size_t(optin))
      throw std::invalid_argument("gpu oracle: head dims " + std::to_string(p.head_dim) + ", " +
                                  std::to_string(p.head_dim_v) + " need more shared memory than the device has");
    gpu_oracle::check(cudaFuncSetAttribute(attention_rows, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                      "cudaFuncSetAttribute");
    const int64_t blocks = int64_t(p.batch) * p.heads_q * ((p.max_seqlen_q + kRows - 1) / kRows);
    attention_rows<<<unsigned(blocks), kThreads, smem>>>(params);
    gpu_oracle::check(cudaGetLastError(), "attention_rows launch");
    dev.download(out);
    const unsigned long long bad = dev.bad_row();
    if (bad != kNoRow) {
      // A non-finite input on a visible path: the CPU tier, on that row
      // alone, throws the same one-line message the CPU run would.
      make_fast_oracle()->compute_rows(p, {int64_t(bad)}, out);
      throw std::invalid_argument("oracle: row " + std::to_string(bad) + " has a non-finite input");
    }
    return out;
  }

  // Recomputes everything on the device and copies the listed rows: the GPU
  // tier is a primary tier, never the one rows escalate to.
  void compute_rows(const afz_problem& p, const std::vector<int64_t>& rows, OracleResult& out) const override {
    const oracle_detail::ProblemView view(p);
    view.check_rows(out, rows);
    const OracleResult all = compute(p);
    for (int64_t r : rows) gpu_oracle::copy_row(all, r, out);
  }
};

}  // namespace

std::unique_ptr<Oracle> make_gpu_oracle(std::string* why) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    if (why) *why = e != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(e) : "no CUDA device";
    return nullptr;
  }
  return std::make_unique<GpuOracle>();
}

}  // namespace afz
