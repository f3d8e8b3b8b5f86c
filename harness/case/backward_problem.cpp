#include "harness/case/backward_problem.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/abi/dtype.h"

namespace afz {
namespace {

afz_tensor dense(void* data, afz_dtype dtype, int heads, int seq, int dim) {
  afz_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.stride[0] = int64_t(heads) * seq * dim;
  t.stride[1] = int64_t(seq) * dim;
  t.stride[2] = dim;
  t.stride[3] = 1;
  return t;
}

afz_tensor dense_f32(std::vector<float>& storage, int batch, int heads, int seq, int dim) {
  storage.assign(std::max<size_t>(size_t(batch) * heads * seq * dim, 1), 0.0f);
  return dense(storage.data(), AFZ_F32, heads, seq, dim);
}

uint32_t case_poison_bits(Poison p, afz_dtype t) {
  switch (p) {
    case Poison::Inf: return inf_bits(t, false);
    case Poison::None: return 0;
    default: return quiet_nan_bits(t);
  }
}

}  // namespace

BackwardMaterialized::BackwardMaterialized(Materialized& fwd) : fwd_(fwd) {
  const Case& c = fwd.spec();
  const afz_problem& p = fwd.problem();
  fwd_problem_ = p;
  fwd_problem_.o.data = nullptr;  // the backward reads neither
  fwd_problem_.lse = nullptr;
  problem_.fwd = &fwd_problem_;
  const int sq = p.max_seqlen_q, sk = p.max_seqlen_k, dv = p.head_dim_v, row = dv + c.row_gap;

  // dO: the recipe on its own stream, rounded to the input dtype, scattered
  // into [b][h][i][dv + row_gap] rows; padding and gaps hold poison.
  std::vector<double> logical(size_t(p.batch) * p.heads_q * sq * dv);
  fill_distribution(logical, c.values_do, c.seed, kStreamDout, dv);
  const afz_dtype in = c.in_dtype;
  const int esz = size_of(in);
  dout_storage_.assign(std::max<size_t>(size_t(p.batch) * p.heads_q * sq * row * esz, 64), 0);
  const uint32_t poison = case_poison_bits(c.poison, in);
  for (size_t at = 0; at + esz <= dout_storage_.size(); at += esz) store_bits(in, dout_storage_.data() + at, poison);
  afz_tensor& d = problem_.dout;
  d.data = dout_storage_.data();
  d.dtype = in;
  d.stride[0] = int64_t(p.heads_q) * sq * row;
  d.stride[1] = int64_t(sq) * row;
  d.stride[2] = row;
  d.stride[3] = 1;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.seqlens_q[b]; ++i)
        for (int x = 0; x < dv; ++x) {
          const double v = round_to(in, logical[((size_t(b) * p.heads_q + h) * sq + i) * dv + x]);
          const int64_t off = b * d.stride[0] + h * d.stride[1] + i * d.stride[2] + x;
          store(in, dout_storage_.data() + off * esz, v);
        }

  // O in the forward's output dtype, as the forward stores it.
  const afz_dtype o_dtype = p.o.dtype;
  o_storage_.assign(std::max<size_t>(size_t(p.batch) * p.heads_q * sq * dv, 1) * size_of(o_dtype), 0);
  problem_.out = dense(o_storage_.data(), o_dtype, p.heads_q, sq, dv);
  lse_storage_.assign(std::max<size_t>(size_t(p.batch) * p.heads_q * sq, 1), 0.0f);
  problem_.lse = lse_storage_.data();
  problem_.lse_stride[0] = int64_t(p.heads_q) * sq;
  problem_.lse_stride[1] = sq;
  problem_.lse_stride[2] = 1;
  problem_.dq = dense_f32(dq_, p.batch, p.heads_q, sq, p.head_dim);
  problem_.dk = dense_f32(dk_, p.batch, p.heads_kv, sk, p.head_dim);
  problem_.dv = dense_f32(dv_, p.batch, p.heads_kv, sk, dv);
  poison_outputs();
}

void BackwardMaterialized::set_forward_outputs(const GradResult& exact) {
  const afz_problem& p = fwd_problem_;
  const afz_dtype o_dtype = problem_.out.dtype;
  const int esz = size_of(o_dtype);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.max_seqlen_q; ++i) {
        const int64_t r = exact.row(b, h, i);
        lse_storage_[r] = float(round_to(AFZ_F32, exact.lse[r].hi, exact.lse[r].lo));
        for (int x = 0; x < p.head_dim_v; ++x) {
          const DD o = exact.o[r * p.head_dim_v + x];
          // One rounding of the exact value (hi + lo): no double rounding via fp32.
          const double stored = round_to(o_dtype, o.hi, o.lo);
          // |O| <= max |v_j| is finite in the input dtype but may not be in a
          // narrower output dtype (fp32 inputs, fp16 output): an Inf O is no
          // input a backward can be judged on.
          if (!std::isfinite(stored) && i < p.seqlens_q[b])
            throw std::runtime_error(fmt::format("backward: the forward output O[b={} h={} i={} x={}] = {:g} overflows "
                                                 "the output dtype {}",
                                                 b, h, i, x, o.hi, dtype_name(o_dtype)));
          store(o_dtype, o_storage_.data() + (r * p.head_dim_v + x) * esz, stored);
        }
      }
}

void BackwardMaterialized::poison_outputs() {
  const float poison = float_of(kPoisonF32);
  for (auto* v : {&dq_, &dk_, &dv_}) std::fill(v->begin(), v->end(), poison);
}

const std::vector<float>& BackwardMaterialized::storage(Grad g) const {
  return g == Grad::Q ? dq_ : g == Grad::K ? dk_ : dv_;
}

int64_t BackwardMaterialized::offset(Grad g, int b, int h, int s, int x) const {
  const afz_tensor& t = g == Grad::Q ? problem_.dq : g == Grad::K ? problem_.dk : problem_.dv;
  return b * t.stride[0] + h * t.stride[1] + s * t.stride[2] + x * t.stride[3];
}

float BackwardMaterialized::grad_at(Grad g, int b, int h, int s, int x) const { return storage(g)[offset(g, b, h, s, x)]; }

bool BackwardMaterialized::padding_untouched(std::string* where) const {
  const afz_problem& p = fwd_problem_;
  struct Out {
    Grad g;
    const char* name;
    int heads, extent, dim;
    const int32_t* lens;
  };
  const Out outs[] = {{Grad::Q, "dq", p.heads_q, p.max_seqlen_q, p.head_dim, p.seqlens_q},
                      {Grad::K, "dk", p.heads_kv, p.max_seqlen_k, p.head_dim, p.seqlens_k},
                      {Grad::V, "dv", p.heads_kv, p.max_seqlen_k, p.head_dim_v, p.seqlens_k}};
  for (const Out& o : outs)
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < o.heads; ++h)
        for (int s = o.lens[b]; s < o.extent; ++s)
          for (int x = 0; x < o.dim; ++x)
            if (bits_of(grad_at(o.g, b, h, s, x)) != kPoisonF32) {
              if (where)
                *where = std::string(o.name) + " written in padding at b=" + std::to_string(b) + " h=" +
                         std::to_string(h) + " s=" + std::to_string(s);
              return false;
            }
  return true;
}

}  // namespace afz
