#include "oracles/gpu/device_problem.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/abi/dtype.h"

namespace afz::gpu_oracle {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("gpu oracle: ") + what + ": " + cudaGetErrorName(e) + ": " +
                             cudaGetErrorString(e));
}

void* DeviceArena::alloc(size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, std::max<size_t>(bytes, 1)), "cudaMalloc");
  owned_.push_back(p);
  return p;
}

DeviceArena::~DeviceArena() {
  for (void* p : owned_) cudaFree(p);
}

DeviceTensor upload_tensor(DeviceArena& arena, const afz_tensor& t, const int64_t (&extent)[4]) {
  DeviceTensor d;
  if (!t.data) return d;
  d.dtype = t.dtype;
  d.elem_bytes = size_of(t.dtype);
  int64_t lo = 0, hi = 0;
  for (int a = 0; a < 4; ++a) {
    d.stride[a] = t.stride[a];
    if (extent[a] == 0) return DeviceTensor{};  // no element exists: nothing is ever read
    const int64_t reach = (extent[a] - 1) * t.stride[a];
    (reach < 0 ? lo : hi) += reach;
  }
  const size_t bytes = size_t(hi - lo + 1) * size_t(d.elem_bytes);
  char* base = static_cast<char*>(arena.alloc(bytes));
  const char* host = static_cast<const char*>(t.data) + lo * d.elem_bytes;
  check(cudaMemcpy(base, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (inputs)");
  d.data = base - lo * d.elem_bytes;
  return d;
}

DeviceProblem::DeviceProblem(const afz_problem& p) {
  const int64_t B = p.batch, Hq = p.heads_q, Hk = p.heads_kv, Sq = p.max_seqlen_q, Sk = p.max_seqlen_k;
  Params& a = params_;
  a.q = upload(p.q, {B, Hq, Sq, p.head_dim});
  a.k = upload(p.k, {B, Hk, Sk, p.head_dim});
  a.v = upload(p.v, {B, Hk, Sk, p.head_dim_v});
  a.bool_mask = upload(p.bool_mask, {B, Hq, Sq, Sk});
  a.add_mask = upload(p.add_mask, {B, Hq, Sq, Sk});
  a.has_bool_mask = a.bool_mask.data != nullptr;
  a.has_add_mask = a.add_mask.data != nullptr;
  auto* seqlens = static_cast<int32_t*>(alloc(2 * B * sizeof(int32_t)));
  check(cudaMemcpy(seqlens, p.seqlens_q, B * sizeof(int32_t), cudaMemcpyHostToDevice), "cudaMemcpy (seqlens)");
  check(cudaMemcpy(seqlens + B, p.seqlens_k, B * sizeof(int32_t), cudaMemcpyHostToDevice), "cudaMemcpy (seqlens)");
  a.seqlens_q = seqlens;
  a.seqlens_k = seqlens + B;
  a.max_sq = p.max_seqlen_q;
  a.d = p.head_dim;
  a.dv = p.head_dim_v;
  a.scale = p.scale;
  a.softcap = p.softcap;
  a.has_window = p.has_window != 0;
  a.bottom_right = p.align == AFZ_ALIGN_BOTTOM_RIGHT;
  a.window_left = p.window_left;
  a.window_right = p.window_right;

  // Zeroed: the element sums accumulate in place, and an empty row's terms are 0.
  const size_t rows = size_t(B * Hq * Sq), elems = rows * size_t(p.head_dim_v);
  auto zeroed = [&](size_t bytes) {
    void* d = alloc(bytes);
    check(cudaMemset(d, 0, bytes), "cudaMemset");
    return d;
  };
  Outputs& o = a.out;
  o.o = static_cast<DD*>(zeroed(elems * sizeof(DD)));
  for (double** arr : {&o.cond, &o.cond_score, &o.cond_tiny, &o.o_err})
    *arr = static_cast<double*>(zeroed(elems * sizeof(double)));
  o.lse = static_cast<DD*>(zeroed(rows * sizeof(DD)));
  o.empty = static_cast<uint8_t*>(zeroed(rows));
  for (double** arr : {&o.lse_cond_score, &o.max_abs_score, &o.max_sigma, &o.lse_err})
    *arr = static_cast<double*>(zeroed(rows * sizeof(double)));
  o.visible_keys = static_cast<int32_t*>(zeroed(rows * sizeof(int32_t)));
  o.max_key = static_cast<int32_t*>(zeroed(rows * sizeof(int32_t)));
  a.bad_row = static_cast<unsigned long long*>(alloc(sizeof(unsigned long long)));
  check(cudaMemset(a.bad_row, 0xff, sizeof(unsigned long long)), "cudaMemset");
}

void DeviceProblem::download(OracleResult& out) {
  check(cudaDeviceSynchronize(), "attention_rows");
  const Outputs& o = params_.out;
  auto get = [](auto& vec, const void* from) {
    check(cudaMemcpy(vec.data(), from, vec.size() * sizeof(vec[0]), cudaMemcpyDeviceToHost), "cudaMemcpy (result)");
  };
  get(out.o, o.o), get(out.cond, o.cond), get(out.cond_score, o.cond_score), get(out.cond_tiny, o.cond_tiny);
  get(out.o_err, o.o_err), get(out.lse, o.lse), get(out.empty, o.empty), get(out.lse_cond_score, o.lse_cond_score);
  get(out.max_abs_score, o.max_abs_score), get(out.max_sigma, o.max_sigma), get(out.lse_err, o.lse_err);
  get(out.visible_keys, o.visible_keys), get(out.max_key, o.max_key);
}

unsigned long long DeviceProblem::bad_row() {
  unsigned long long r = 0;
  check(cudaMemcpy(&r, params_.bad_row, sizeof r, cudaMemcpyDeviceToHost), "cudaMemcpy (flags)");
  return r;
}

namespace {
// [begin, begin + n) of each listed array of `from` into `to`.
template <class... Member>
void copy_range(const OracleResult& from, OracleResult& to, int64_t begin, int64_t n, Member... members) {
  (std::copy_n((from.*members).begin() + begin, n, (to.*members).begin() + begin), ...);
}
}  // namespace

void copy_row(const OracleResult& from, int64_t r, OracleResult& to) {
  using R = OracleResult;
  copy_range(from, to, r * from.dv, from.dv, &R::o, &R::cond, &R::cond_score, &R::cond_tiny, &R::o_err);
  copy_range(from, to, r, 1, &R::lse, &R::empty, &R::lse_cond_score, &R::max_abs_score, &R::max_sigma, &R::lse_err,
             &R::visible_keys, &R::max_key);
}

}  // namespace afz::gpu_oracle
