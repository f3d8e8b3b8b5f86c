#include "harness/case/materialize.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "harness/case/case_io.h"
#include "harness/case/mask_patterns.h"
#include "harness/case/rng.h"
#include "harness/case/transforms.h"
#include "kernels/abi/dtype.h"

namespace afz {
namespace {

// RNG streams: one per tensor, so changing V's recipe leaves Q and K alone.
enum Stream : uint64_t { kStreamQ = 1, kStreamK = 2, kStreamV = 3, kStreamMask = 4, kStreamTransform = 100 };

double draw(const Distribution& dist, const CounterRng& rng, uint64_t n) {
  if (dist.kind == "uniform") return rng.symmetric(n) * dist.param;
  if (dist.kind == "int") {  // small integers in [-param, param]: exact products and sums
    const int64_t r = int64_t(dist.param < 0 ? 0 : dist.param);
    return double(int64_t(rng.below(n, uint64_t(2 * r + 1))) - r);
  }
  if (dist.kind == "few_rows") return rng.normal(n);  // the row's own draw decides whether it is kept (fill)
  return rng.normal(n) * dist.param;
}

// The counter of a row's keep-or-zero draw (few_rows): a sub-stream keyed by
// the tensor's own stream, so it never shares a counter with the values'.
constexpr uint64_t kRowSelectStream = 1;

// `row` elements per row (the last dimension): few_rows keeps whole rows.
void fill(std::vector<double>& out, const Distribution& dist, uint64_t seed, uint64_t stream, int row) {
  const CounterRng rng(seed, stream);
  for (size_t n = 0; n < out.size(); ++n) out[n] = draw(dist, rng, n);
  if (dist.kind != "few_rows" || row <= 0) return;
  const CounterRng rows(rng.key, kRowSelectStream);
  for (size_t r = 0; r * size_t(row) < out.size(); ++r)
    if (rows.below(r, uint64_t(kPermilScale)) >= uint64_t(dist.param))
      std::fill_n(out.begin() + std::ptrdiff_t(r * size_t(row)), row, 0.0);
}

// Physical strides of a [b][h][s][d] view and where each tensor starts.
struct View {
  int64_t stride[4];
  int64_t offset;  // in elements
};

View dense(Layout layout, int heads, int seq, int row) {
  if (layout == Layout::BSHD) return {{int64_t(seq) * heads * row, row, int64_t(heads) * row, 1}, 0};
  return {{int64_t(heads) * seq * row, int64_t(seq) * row, row, 1}, 0};
}

uint64_t fnv1a(uint64_t h, uint64_t word, int bytes) {
  for (int n = 0; n < bytes; ++n) {
    h ^= (word >> (8 * n)) & 0xff;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// A tensor with no elements (every sequence of length 0) still gets a
// non-null allocation: kernels and oracles may check pointers, and a
// zero-length batch must reach the kernel as a valid problem.
constexpr size_t kMinAllocation = 64;
size_t allocation(size_t bytes) { return std::max(bytes, kMinAllocation); }

void fill_bits(std::vector<uint8_t>& storage, afz_dtype t, uint32_t bits) {
  const int sz = size_of(t);
  for (size_t at = 0; at + sz <= storage.size(); at += sz) store_bits(t, storage.data() + at, bits);
}

uint32_t poison_bits(Poison p, afz_dtype t) {
  switch (p) {
    case Poison::Inf: return inf_bits(t, false);
    case Poison::None: return 0;
    default: return quiet_nan_bits(t);
  }
}

}  // namespace

uint32_t output_poison_bits(afz_dtype t) {
  switch (t) {
    case AFZ_F16: return kPoisonF16;
    case AFZ_BF16: return kPoisonBF16;
    default: return kPoisonF32;
  }
}

void fill_distribution(std::vector<double>& out, const Distribution& dist, uint64_t seed, uint64_t stream, int row) {
  fill(out, dist, seed, stream, row);
}

void generate_logical(const Case& c, LogicalTensors& x) {
  x.batch = c.batch;
  x.heads_q = c.heads_q;
  x.heads_kv = c.heads_kv;
  x.sq = c.max_seqlen_q();
  x.sk = c.max_seqlen_k();
  x.d = c.head_dim;
  x.dv = c.head_dim_v;
  x.q.assign(size_t(x.batch) * x.heads_q * x.sq * x.d, 0.0);
  x.k.assign(size_t(x.batch) * x.heads_kv * x.sk * x.d, 0.0);
  x.v.assign(size_t(x.batch) * x.heads_kv * x.sk * x.dv, 0.0);
  fill(x.q, c.values_q, c.seed, kStreamQ, x.d);
  fill(x.k, c.values_k, c.seed, kStreamK, x.d);
  fill(x.v, c.values_v, c.seed, kStreamV, x.dv);
  for (size_t n = 0; n < c.transforms.size(); ++n) {
    const TransformDef* def = find_transform(c.transforms[n].name);
    if (!def) throw std::runtime_error("unknown transform '" + c.transforms[n].name + "'");
    def->apply(c, c.transforms[n], CounterRng(c.seed, kStreamTransform + n), x);
  }
  // K and V shared across heads or batch: every copy equals the first.
  if (c.kv_broadcast != KvBroadcast::None) {
    for (int b = 0; b < x.batch; ++b)
      for (int h = 0; h < x.heads_kv; ++h) {
        const int b0 = c.kv_broadcast == KvBroadcast::Batch ? 0 : b;
        const int h0 = c.kv_broadcast == KvBroadcast::Heads ? 0 : h;
        for (int j = 0; j < x.sk; ++j) {
          for (int d = 0; d < x.d; ++d) x.K(b, h, j, d) = x.K(b0, h0, j, d);
          for (int d = 0; d < x.dv; ++d) x.V(b, h, j, d) = x.V(b0, h0, j, d);
        }
      }
  }
  for (double& v : x.q) v = round_to(c.in_dtype, v);
  for (double& v : x.k) v = round_to(c.in_dtype, v);
  for (double& v : x.v) v = round_to(c.in_dtype, v);
}

Materialized::Materialized(const Case& c) : case_(c) {
  if (auto err = validate_case(c)) throw std::runtime_error(err->field + ": " + err->message);
  generate_logical(c, logical_);
  LogicalTensors& x = logical_;
  seqlens_q_ = c.seqlens_q;
  seqlens_k_ = c.seqlens_k;
  const afz_dtype in = c.in_dtype;
  const int esz = size_of(in);
  const uint32_t poison = poison_bits(c.poison, in);

  afz_problem& p = problem_;
  p.abi_version = AFZ_ABI_VERSION;
  p.batch = c.batch;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.head_dim = c.head_dim;
  p.head_dim_v = c.head_dim_v;
  p.max_seqlen_q = x.sq;
  p.max_seqlen_k = x.sk;
  p.seqlens_q = seqlens_q_.data();
  p.seqlens_k = seqlens_k_.data();
  p.scale = c.effective_scale();
  p.softcap = float(round_to(AFZ_F32, c.softcap));
  p.has_window = c.has_window;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.align = c.align;

  // Q, K, V storage and views.
  View vq, vk, vv;
  uint8_t *bq, *bk, *bv;
  if (c.layout == Layout::PackedQKV) {
    if (c.head_dim != c.head_dim_v) throw std::runtime_error("layout: packed_qkv needs head_dim == head_dim_v");
    if (c.kv_broadcast != KvBroadcast::None) throw std::runtime_error("kv_broadcast: not possible with packed_qkv");
    const int s = std::max(x.sq, x.sk), row = c.head_dim + c.row_gap, heads = c.heads_q + 2 * c.heads_kv;
    const View base = dense(Layout::BSHD, heads, s, row);
    vq = base;
    vk = base;
    vv = base;
    vk.offset = int64_t(c.heads_q) * row;
    vv.offset = int64_t(c.heads_q + c.heads_kv) * row;
    qkv_storage_.resize(allocation(size_t(c.batch) * s * heads * row * esz));
    fill_bits(qkv_storage_, in, poison);
    bq = bk = bv = qkv_storage_.data();
  } else {
    const Layout l = c.layout;
    vq = dense(l, c.heads_q, x.sq, c.head_dim + c.row_gap);
    const int kv_heads = c.kv_broadcast == KvBroadcast::Heads ? 1 : c.heads_kv;
    const int kv_batch = c.kv_broadcast == KvBroadcast::Batch ? 1 : c.batch;
    vk = dense(l, kv_heads, x.sk, c.head_dim + c.row_gap);
    vv = dense(l, kv_heads, x.sk, c.head_dim_v + c.row_gap);
    if (c.kv_broadcast == KvBroadcast::Heads) vk.stride[1] = vv.stride[1] = 0;
    if (c.kv_broadcast == KvBroadcast::Batch) vk.stride[0] = vv.stride[0] = 0;
    q_storage_.resize(allocation(size_t(c.batch) * c.heads_q * x.sq * (c.head_dim + c.row_gap) * esz));
    k_storage_.resize(allocation(size_t(kv_batch) * kv_heads * x.sk * (c.head_dim + c.row_gap) * esz));
    v_storage_.resize(allocation(size_t(kv_batch) * kv_heads * x.sk * (c.head_dim_v + c.row_gap) * esz));
    for (auto* s : {&q_storage_, &k_storage_, &v_storage_}) fill_bits(*s, in, poison);
    bq = q_storage_.data();
    bk = k_storage_.data();
    bv = v_storage_.data();
  }
  auto tensor = [&](uint8_t* base, const View& v) {
    afz_tensor t{};
    t.data = base + v.offset * esz;
    t.dtype = in;
    std::copy(v.stride, v.stride + 4, t.stride);
    return t;
  };
  p.q = tensor(bq, vq);
  p.k = tensor(bk, vk);
  p.v = tensor(bv, vv);
  auto put = [&](const afz_tensor& t, int b, int h, int s, int d, double value) {
    uint8_t* at = static_cast<uint8_t*>(t.data) +
                  (b * t.stride[0] + h * t.stride[1] + s * t.stride[2] + d * t.stride[3]) * esz;
    store(in, at, value);  // value is already a dtype value: exact
  };
  // Only valid positions are written: padding keeps its poison.
  for (int b = 0; b < c.batch; ++b) {
    for (int h = 0; h < c.heads_q; ++h)
      for (int i = 0; i < seqlens_q_[b]; ++i)
        for (int d = 0; d < c.head_dim; ++d) put(p.q, b, h, i, d, x.Q(b, h, i, d));
    for (int h = 0; h < c.heads_kv; ++h)
      for (int j = 0; j < seqlens_k_[b]; ++j) {
        for (int d = 0; d < c.head_dim; ++d) put(p.k, b, h, j, d, x.K(b, h, j, d));
        for (int d = 0; d < c.head_dim_v; ++d) put(p.v, b, h, j, d, x.V(b, h, j, d));
      }
  }

  // Explicit masks, [b][i][j] broadcast over heads (stride 0).
  const CounterRng mask_rng(c.seed, kStreamMask);
  const int64_t mask_stride[4] = {int64_t(x.sq) * x.sk, 0, x.sk, 1};
  if (c.bool_mask) {
    bool_storage_.assign(size_t(c.batch) * x.sq * x.sk, 1);
    for (int b = 0; b < c.batch; ++b)
      for (int i = 0; i < x.sq; ++i)
        for (int j = 0; j < x.sk; ++j)
          if (pattern_masks(*c.bool_mask, mask_rng, b, i, j)) bool_storage_[(size_t(b) * x.sq + i) * x.sk + j] = 0;
    p.bool_mask.data = bool_storage_.data();
    p.bool_mask.dtype = AFZ_U8;
    std::copy(mask_stride, mask_stride + 4, p.bool_mask.stride);
  }
  if (c.add_mask) {
    double value = c.add_mask->value;
    if (c.add_mask->value_kind == AddValueKind::NegInf) value = -std::numeric_limits<double>::infinity();
    if (c.add_mask->value_kind == AddValueKind::Lowest) value = lowest_finite(c.in_dtype);
    const float fvalue = float(round_to(AFZ_F32, value));
    add_storage_.assign(size_t(c.batch) * x.sq * x.sk, 0.0f);
    for (int b = 0; b < c.batch; ++b)
      for (int i = 0; i < x.sq; ++i)
        for (int j = 0; j < x.sk; ++j)
          if (pattern_masks(c.add_mask->pattern, CounterRng(c.seed, kStreamMask + 1), b, i, j))
            add_storage_[(size_t(b) * x.sq + i) * x.sk + j] = fvalue;
    p.add_mask.data = add_storage_.data();
    p.add_mask.dtype = AFZ_F32;
    std::copy(mask_stride, mask_stride + 4, p.add_mask.stride);
  }

  // Outputs: O in Q's layout (row gaps included), LSE dense [b][h][i].
  const afz_dtype out = c.out_dtype;
  const View vo = dense(c.layout == Layout::BSHD || c.layout == Layout::PackedQKV ? Layout::BSHD : Layout::BHSD,
                        c.heads_q, x.sq, c.head_dim_v + c.row_gap);
  o_storage_.resize(allocation(size_t(c.batch) * c.heads_q * x.sq * (c.head_dim_v + c.row_gap) * size_of(out)));
  p.o.data = o_storage_.data();
  p.o.dtype = out;
  std::copy(vo.stride, vo.stride + 4, p.o.stride);
  lse_storage_.resize(std::max<size_t>(size_t(c.batch) * c.heads_q * x.sq, 1));
  p.lse = lse_storage_.data();
  p.lse_stride[0] = int64_t(c.heads_q) * x.sq;
  p.lse_stride[1] = x.sq;
  p.lse_stride[2] = 1;
  poison_outputs();
}

void Materialized::poison_outputs() {
  fill_bits(o_storage_, problem_.o.dtype, output_poison_bits(problem_.o.dtype));
  std::fill(lse_storage_.begin(), lse_storage_.end(), float_of(kPoisonF32));
}

static const uint8_t* element(const afz_tensor& t, int b, int h, int s, int d) {
  return static_cast<const uint8_t*>(t.data) +
         (b * t.stride[0] + h * t.stride[1] + s * t.stride[2] + d * t.stride[3]) * size_of(t.dtype);
}

double Materialized::o_at(int b, int h, int i, int x) const { return load(problem_.o.dtype, element(problem_.o, b, h, i, x)); }

uint32_t Materialized::o_bits_at(int b, int h, int i, int x) const {
  const uint8_t* at = element(problem_.o, b, h, i, x);
  if (size_of(problem_.o.dtype) == 4) { uint32_t w; std::memcpy(&w, at, 4); return w; }
  uint16_t w;
  std::memcpy(&w, at, 2);
  return w;
}

float Materialized::lse_at(int b, int h, int i) const {
  return problem_.lse[b * problem_.lse_stride[0] + h * problem_.lse_stride[1] + i * problem_.lse_stride[2]];
}

bool Materialized::visible(int b, int, int i, int j) const {
  const afz_problem& p = problem_;
  if (i >= p.seqlens_q[b] || j >= p.seqlens_k[b]) return false;
  if (p.has_window) {
    const int64_t offset = p.align == AFZ_ALIGN_BOTTOM_RIGHT ? int64_t(p.seqlens_k[b]) - p.seqlens_q[b] : 0;
    const int64_t diag = i + offset;  // the key aligned with query i
    if (p.window_left >= 0 && j < diag - p.window_left) return false;
    if (p.window_right >= 0 && j > diag + p.window_right) return false;
  }
  if (p.bool_mask.data && *element(p.bool_mask, b, 0, i, j) == 0) return false;
  return true;
}

double Materialized::add_mask_at(int b, int, int i, int j) const {
  if (!problem_.add_mask.data) return 0.0;
  return load(AFZ_F32, element(problem_.add_mask, b, 0, i, j));
}

uint64_t Materialized::input_hash() const {
  uint64_t h = 0xcbf29ce484222325ULL;
  const afz_dtype in = case_.in_dtype;
  const FloatFormat& f = format_of(in);
  auto mix = [&](double v) { h = fnv1a(h, round_bits(f, v), size_of(in)); };
  for (double v : logical_.q) mix(v);
  for (double v : logical_.k) mix(v);
  for (double v : logical_.v) mix(v);
  for (uint8_t m : bool_storage_) h = fnv1a(h, m, 1);
  for (float a : add_storage_) h = fnv1a(h, bits_of(a), 4);
  h = fnv1a(h, bits_of(problem_.scale), 4);
  return h;
}

std::vector<uint8_t> Materialized::output_bytes() const {
  std::vector<uint8_t> out(o_storage_);
  const uint8_t* l = reinterpret_cast<const uint8_t*>(lse_storage_.data());
  out.insert(out.end(), l, l + lse_storage_.size() * sizeof(float));
  return out;
}

bool Materialized::set_output_bytes(const std::vector<uint8_t>& bytes) {
  const size_t lse_bytes = lse_storage_.size() * sizeof(float);
  if (bytes.size() != o_storage_.size() + lse_bytes) return false;
  std::memcpy(o_storage_.data(), bytes.data(), o_storage_.size());
  std::memcpy(lse_storage_.data(), bytes.data() + o_storage_.size(), lse_bytes);
  return true;
}

}  // namespace afz
