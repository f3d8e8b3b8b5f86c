// attnfuzz_torch_probe: runs the plugin's torch.* kernels on a real GPU the
// way the attnfuzz worker does (device pointers, sequence lengths on the
// device, an external stream, outputs poisoned with NaN first) and compares
// them with a direct softmax in double on the host.  No attnfuzz needed: it
// is the first check on a machine with a CUDA build of torch, before the
// harness's own campaign (kernels/torch/README.md).  Per kernel and scenario
// one line: how far O and the LSE are from the reference, what rows without
// a visible key hold (against the declared conventions), whether a rerun is
// bit-identical, or the kernel's reason for declining.
//
//   attnfuzz_torch_probe [path/to/libattnfuzz_torch.so]
//
// Exit status 0 when every kernel either declined or matched within the
// probe's loose tolerance with its declared conventions, else 1.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "attnfuzz_kernel.h"

#ifndef AFZ_TORCH_WITH_CUDA
int main() {
  std::puts("attnfuzz_torch_probe: this torch has no CUDA; nothing to probe");
  return 0;
}
#else
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Loose: a smoke test, not the harness's bound.  P rounded to bf16 moves each
// weight by 2^-9 relative; the output's own rounding adds one ulp.
constexpr double kTolerance = 0x1p-6;

enum class MaskKind { None, Bool, Additive };

struct Scenario {
  const char* name;
  int batch, heads_q, heads_kv, d, dv;
  std::vector<int> sq, sk;
  afz_dtype in = AFZ_BF16;
  bool bshd = false;
  bool has_window = false;
  int window_left = -1, window_right = -1;
  afz_align align = AFZ_ALIGN_TOP_LEFT;
  MaskKind mask = MaskKind::None;
};

at::ScalarType scalar(afz_dtype t) { return t == AFZ_F16 ? at::kHalf : t == AFZ_BF16 ? at::kBFloat16 : at::kFloat; }

struct Built {
  afz_problem p{};           // device problem, as the worker hands it
  afz_problem host{};        // same shapes, host sequence lengths, for supports()
  at::Tensor q, k, v;        // logical [B][H][S][D] fp32 on the host (rounded inputs)
  at::Tensor qd, kd, vd, od, lsed, boold, addd, sqd, skd;  // device storage
  at::Tensor bool_h, add_h;  // host masks [B][S][S]
  std::vector<int32_t> sq, sk;
};

// The values in `dtype`, laid out BHSD or BSHD on the device; padding rows NaN.
at::Tensor device_tensor(const at::Tensor& logical, const std::vector<int32_t>& lens, at::ScalarType dtype, bool bshd,
                         afz_tensor* out, afz_dtype afz) {
  at::Tensor t = logical.clone();
  for (size_t b = 0; b < lens.size(); ++b)
    t.select(0, int64_t(b)).narrow(1, lens[b], t.size(2) - lens[b]).fill_(std::nan(""));
  at::Tensor mem = bshd ? t.transpose(1, 2).contiguous() : t.contiguous();  // memory order
  at::Tensor dev = mem.to(at::TensorOptions().dtype(dtype).device(at::kCUDA));
  at::Tensor view = bshd ? dev.transpose(1, 2) : dev;                        // [B][H][S][D] indexing
  out->data = view.data_ptr();
  out->dtype = afz;
  for (int a = 0; a < 4; ++a) out->stride[a] = view.stride(a);
  return dev;
}

Built build(const Scenario& s, uint64_t seed) {
  Built x;
  x.sq.assign(s.sq.begin(), s.sq.end());
  x.sk.assign(s.sk.begin(), s.sk.end());
  int sqmax = 0, skmax = 0;
  for (size_t b = 0; b < x.sq.size(); ++b) {
    sqmax = std::max(sqmax, x.sq[b]);
    skmax = std::max(skmax, x.sk[b]);
  }
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](std::vector<int64_t> shape) {
    at::Tensor t = at::empty(shape, at::kFloat);
    float* p = t.data_ptr<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = normal(rng);
    return t.to(scalar(s.in)).to(at::kFloat);  // rounded to the input dtype
  };
  x.q = random({s.batch, s.heads_q, sqmax, s.d});
  x.k = random({s.batch, s.heads_kv, skmax, s.d});
  x.v = random({s.batch, s.heads_kv, skmax, s.dv});
  afz_problem& p = x.p;
  p.abi_version = AFZ_ABI_VERSION;
  p.batch = s.batch;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.head_dim = s.d;
  p.head_dim_v = s.dv;
  p.max_seqlen_q = sqmax;
  p.max_seqlen_k = skmax;
  p.scale = float(1.0 / std::sqrt(double(s.d)));
  p.has_window = s.has_window;
  p.window_left = s.window_left;
  p.window_right = s.window_right;
  p.align = s.align;
  x.qd = device_tensor(x.q, x.sq, scalar(s.in), s.bshd, &p.q, s.in);
  x.kd = device_tensor(x.k, x.sk, scalar(s.in), s.bshd, &p.k, s.in);
  x.vd = device_tensor(x.v, x.sk, scalar(s.in), s.bshd, &p.v, s.in);
  // O poisoned with NaN, in the input dtype (the fused operators return it).
  x.od = at::full(s.bshd ? std::vector<int64_t>{s.batch, sqmax, s.heads_q, s.dv}
                         : std::vector<int64_t>{s.batch, s.heads_q, sqmax, s.dv},
                  std::nan(""), at::TensorOptions().dtype(scalar(s.in)).device(at::kCUDA));
  const at::Tensor ov = s.bshd ? x.od.transpose(1, 2) : x.od;
  p.o.data = ov.data_ptr();
  p.o.dtype = s.in;
  for (int a = 0; a < 4; ++a) p.o.stride[a] = ov.stride(a);
  x.lsed = at::full({s.batch, s.heads_q, sqmax}, std::nan(""), at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
  p.lse = x.lsed.data_ptr<float>();
  for (int a = 0; a < 3; ++a) p.lse_stride[a] = x.lsed.stride(a);
  x.sqd = at::from_blob(x.sq.data(), {s.batch}, at::kInt).to(at::kCUDA);
  x.skd = at::from_blob(x.sk.data(), {s.batch}, at::kInt).to(at::kCUDA);
  p.seqlens_q = x.sqd.data_ptr<int32_t>();
  p.seqlens_k = x.skd.data_ptr<int32_t>();
  if (s.mask != MaskKind::None) {
    // [b][i][j], broadcast over heads; row 1 of sequence 0 sees no key.
    x.bool_h = at::ones({s.batch, sqmax, skmax}, at::kByte);
    x.add_h = at::zeros({s.batch, sqmax, skmax}, at::kFloat);
    for (int b = 0; b < s.batch; ++b)
      for (int i = 0; i < sqmax; ++i)
        for (int j = 0; j < skmax; ++j) {
          const bool drop = (b == 0 && i == 1) || (i + 2 * j) % 5 == 0;
          if (s.mask == MaskKind::Bool) x.bool_h.accessor<uint8_t, 3>()[b][i][j] = drop ? 0 : 1;
          else x.add_h.accessor<float, 3>()[b][i][j] = drop ? -INFINITY : ((i + j) % 3 == 0 ? -2.0f : 0.0f);
        }
    afz_tensor& m = s.mask == MaskKind::Bool ? p.bool_mask : p.add_mask;
    at::Tensor& dev = s.mask == MaskKind::Bool ? x.boold : x.addd;
    dev = (s.mask == MaskKind::Bool ? x.bool_h : x.add_h).to(at::kCUDA);
    m.data = dev.data_ptr();
    m.dtype = s.mask == MaskKind::Bool ? AFZ_U8 : AFZ_F32;
    const int64_t st[4] = {int64_t(sqmax) * skmax, 0, skmax, 1};
    std::memcpy(m.stride, st, sizeof st);
  }
  x.host = p;
  x.host.seqlens_q = x.sq.data();
  x.host.seqlens_k = x.sk.data();
  return x;
}

// What the registry would check before sending the case (the probe must not
// send a kernel what it does not declare).
std::string caps_reason(const afz_kernel& k, const afz_problem& p) {
  const afz_caps& c = k.caps;
  auto has = [&](uint32_t f) { return (c.flags & f) != 0; };
  if (!(c.in_dtypes & (1u << p.q.dtype))) return "input dtype";
  if (!(c.out_dtypes & (1u << p.o.dtype))) return "output dtype";
  if (p.head_dim < c.min_head_dim || p.head_dim > c.max_head_dim || p.head_dim % c.head_dim_multiple) return "head_dim";
  if (p.head_dim_v != p.head_dim && !has(AFZ_CAP_DV_NE_D)) return "head_dim_v";
  if (p.has_window) {
    const bool causal = p.window_left < 0 && p.window_right == 0;
    if (!causal && !has(AFZ_CAP_WINDOW)) return "window";
    if (!has(p.align == AFZ_ALIGN_BOTTOM_RIGHT ? AFZ_CAP_CAUSAL_BOTTOM_RIGHT : AFZ_CAP_CAUSAL_TOP_LEFT)) return "alignment";
  }
  if (p.bool_mask.data && !has(AFZ_CAP_BOOL_MASK)) return "bool mask";
  if (p.add_mask.data && !has(AFZ_CAP_ADD_MASK)) return "additive mask";
  bool varlen = false;
  for (int b = 0; b < p.batch; ++b)
    varlen = varlen || p.seqlens_q[b] != p.max_seqlen_q || p.seqlens_k[b] != p.max_seqlen_k || !p.seqlens_q[b] ||
             !p.seqlens_k[b];
  if (varlen && !has(AFZ_CAP_VARLEN)) return "varlen";
  if (p.heads_q != p.heads_kv && !has(AFZ_CAP_GQA)) return "gqa";
  char why[256] = {0};
  if (k.supports && k.supports(&k, &p, why, sizeof why)) return why;
  return "";
}

struct Row {
  bool empty = true;
  double lse = -kInf;
  std::vector<double> o, cond;
};

Row reference(const Built& x, const Scenario& s, int b, int h, int i) {
  Row r;
  const auto q = x.q.accessor<float, 4>(), k = x.k.accessor<float, 4>(), v = x.v.accessor<float, 4>();
  const int sq = x.sq[size_t(b)], sk = x.sk[size_t(b)], group = s.heads_q / s.heads_kv;
  const int64_t off = s.align == AFZ_ALIGN_BOTTOM_RIGHT ? sk - sq : 0;
  std::vector<double> sc(size_t(sk), -kInf);
  double m = -kInf;
  for (int j = 0; j < sk; ++j) {
    if (s.has_window) {
      if (s.window_left >= 0 && j < i + off - s.window_left) continue;
      if (s.window_right >= 0 && j > i + off + s.window_right) continue;
    }
    double a = 0;
    if (s.mask == MaskKind::Bool && x.bool_h.accessor<uint8_t, 3>()[b][i][j] == 0) continue;
    if (s.mask == MaskKind::Additive) a = x.add_h.accessor<float, 3>()[b][i][j];
    if (a == -kInf) continue;
    double dot = 0;
    for (int t = 0; t < s.d; ++t) dot += double(q[b][h][i][t]) * double(k[b][h / group][j][t]);
    sc[size_t(j)] = dot * double(x.p.scale) + a;
    m = std::max(m, sc[size_t(j)]);
  }
  r.o.assign(size_t(s.dv), 0.0);
  r.cond.assign(size_t(s.dv), 0.0);
  if (m == -kInf) return r;
  r.empty = false;
  double l = 0;
  for (int j = 0; j < sk; ++j) {
    const double pj = std::exp(sc[size_t(j)] - m);
    l += pj;
    for (int t = 0; t < s.dv; ++t) {
      const double vj = v[b][h / group][j][t];
      r.o[size_t(t)] += pj * vj;
      r.cond[size_t(t)] += pj * std::fabs(vj);
    }
  }
  for (int t = 0; t < s.dv; ++t) {
    r.o[size_t(t)] /= l;
    r.cond[size_t(t)] /= l;
  }
  r.lse = m + std::log(l);
  return r;
}

const char* lse_name(double v) {
  return std::isnan(v) ? "NaN" : v == kInf ? "+inf" : v == -kInf ? "-inf" : "finite";
}

bool run_once(const afz_kernel& k, Built& x, c10::cuda::CUDAStream stream, std::string* message, int* rc) {
  x.od.fill_(std::nan(""));
  x.lsed.fill_(std::nan(""));
  x.p.stream = stream.stream();
  char error[512] = {0};
  *rc = k.run(&k, &x.p, error, sizeof error);
  stream.synchronize();
  *message = error;
  return *rc == 0;
}

// One line for (kernel, scenario); false when it deserves a look.
bool probe(const afz_kernel& k, const Scenario& s) {
  Built x = build(s, 7);
  const bool want_lse = (k.caps.flags & AFZ_CAP_LSE) != 0;
  if (!want_lse) x.p.lse = x.host.lse = nullptr;  // as the harness does
  std::printf("%-20s %-26s ", k.name, s.name);
  if (std::string why = caps_reason(k, x.host); !why.empty()) {
    std::printf("declined by caps/supports: %s\n", why.c_str());
    return true;
  }
  const c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  std::string message;
  int rc = 0;
  if (!run_once(k, x, stream, &message, &rc)) {
    std::printf("%s: %s\n", rc == AFZ_RUN_UNSUPPORTED ? "unsupported" : "ERROR", message.c_str());
    return rc == AFZ_RUN_UNSUPPORTED;
  }
  const at::Tensor o1t = (s.bshd ? x.od.transpose(1, 2) : x.od).to(at::kFloat).cpu().contiguous();
  const at::Tensor l1t = x.lsed.cpu().contiguous();
  const auto o1 = o1t.accessor<float, 4>();
  const auto l1 = l1t.accessor<float, 3>();
  // Rerun: the forward passes are declared deterministic.
  const at::Tensor o_bits = x.od.clone(), l_bits = x.lsed.clone();
  run_once(k, x, stream, &message, &rc);
  const bool same = rc == 0 && at::equal(o_bits.view(at::kShort), x.od.view(at::kShort)) &&
                    at::equal(l_bits.view(at::kInt), x.lsed.view(at::kInt));
  double worst = 0, worst_lse = 0;
  int empty = 0, empty_bad = 0;
  std::string empty_seen;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads_q; ++h)
      for (int i = 0; i < x.sq[size_t(b)]; ++i) {
        const Row r = reference(x, s, b, h, i);
        const double lse = l1[b][h][i];
        if (r.empty) {
          ++empty;
          const double o0 = o1[b][h][i][0];
          const bool o_ok = k.conventions.masked_row_output == AFZ_MASKED_ROW_NAN ? std::isnan(o0) : o0 == 0.0;
          const double want = k.conventions.empty_lse == AFZ_EMPTY_LSE_POS_INF   ? kInf
                              : k.conventions.empty_lse == AFZ_EMPTY_LSE_NEG_INF ? -kInf
                              : k.conventions.empty_lse == AFZ_EMPTY_LSE_ZERO    ? 0.0
                                                                                 : std::nan("");
          const bool l_ok = !want_lse || (std::isnan(want) ? std::isnan(lse) : lse == want);
          if (!o_ok || !l_ok) ++empty_bad;
          if (empty_seen.empty() || (!l_ok && empty_bad == 1)) {
            char value[64];
            std::snprintf(value, sizeof value, " (%.9g)", lse);
            empty_seen = std::string("O=") + (std::isnan(o0) ? "NaN" : o0 == 0 ? "0" : "other") +
                         (want_lse ? std::string(" LSE=") + lse_name(lse) + (l_ok ? "" : value) : "");
          }
          continue;
        }
        for (int t = 0; t < s.dv; ++t)
          worst = std::max(worst, std::fabs(double(o1[b][h][i][t]) - r.o[size_t(t)]) /
                                      std::max(r.cond[size_t(t)], 1e-30));
        if (want_lse) worst_lse = std::max(worst_lse, std::fabs(lse - r.lse) / (1 + std::fabs(r.lse)));
      }
  const bool ok = !(worst > kTolerance) && !(worst_lse > kTolerance) && empty_bad == 0 && same;
  std::printf("%s  err/cond %.2e", ok ? "ok " : "BAD", worst);
  if (want_lse) std::printf("  lse %.2e", worst_lse);
  if (empty) std::printf("  empty rows %d: %s%s", empty, empty_seen.c_str(), empty_bad ? " (NOT as declared)" : "");
  std::printf("  %s\n", same ? "deterministic" : "RERUN DIFFERS");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : ATTNFUZZ_TORCH_PLUGIN;
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::printf("cannot load %s: %s\n", path, dlerror());
    return 1;
  }
  auto kernels = reinterpret_cast<afz_get_kernels_fn>(dlsym(h, AFZ_PLUGIN_SYMBOL));
  auto version = reinterpret_cast<afz_library_version_fn>(dlsym(h, AFZ_PLUGIN_VERSION_SYMBOL));
  const afz_kernel* ks = nullptr;
  int n = 0;
  if (!kernels || kernels(&ks, &n) != 0) return 1;
  std::printf("%s\n", version ? version() : "(no version)");
  const std::vector<Scenario> scenarios = {
      {"dense_128", 2, 4, 4, 64, 64, {128, 128}, {128, 128}},
      {"dense_fp16_bshd_d128", 2, 4, 4, 128, 128, {96, 96}, {200, 200}, AFZ_F16, true},
      {"causal_square", 2, 4, 4, 64, 64, {100, 100}, {100, 100}, AFZ_BF16, false, true, -1, 0},
      {"causal_topleft_64x160", 1, 4, 4, 64, 64, {64}, {160}, AFZ_BF16, false, true, -1, 0, AFZ_ALIGN_TOP_LEFT},
      {"causal_bottomright_64x160", 1, 4, 4, 64, 64, {64}, {160}, AFZ_BF16, false, true, -1, 0, AFZ_ALIGN_BOTTOM_RIGHT},
      {"causal_br_q_gt_k_96x40", 1, 2, 2, 64, 64, {96}, {40}, AFZ_BF16, false, true, -1, 0, AFZ_ALIGN_BOTTOM_RIGHT},
      {"gqa_8_2", 2, 8, 2, 64, 64, {77, 77}, {130, 130}},
      {"decode_gqa_q1", 3, 8, 2, 128, 128, {1, 1, 1}, {300, 300, 300}},
      {"varlen_ragged_empty", 3, 4, 4, 64, 64, {37, 0, 70}, {50, 13, 0}},
      {"varlen_decode_some_empty", 3, 8, 2, 64, 64, {1, 0, 1}, {90, 40, 0}},
      {"window_br_32_8", 2, 4, 4, 64, 64, {90, 60}, {120, 60}, AFZ_BF16, false, true, 32, 8, AFZ_ALIGN_BOTTOM_RIGHT},
      {"bool_mask_empty_row", 2, 4, 4, 64, 64, {48, 48}, {80, 80}, AFZ_BF16, false, false, -1, -1,
       AFZ_ALIGN_TOP_LEFT, MaskKind::Bool},
      {"additive_mask", 2, 4, 4, 64, 64, {48, 48}, {80, 80}, AFZ_BF16, false, false, -1, -1, AFZ_ALIGN_TOP_LEFT,
       MaskKind::Additive},
      {"dv_ne_d_64_32", 1, 4, 4, 64, 32, {40}, {70}},
  };
  bool all_ok = true;
  for (int i = 0; i < n; ++i) {
    if (!(ks[i].caps.flags & AFZ_CAP_GPU)) continue;
    for (const Scenario& s : scenarios) all_ok = probe(ks[i], s) && all_ok;
  }
  return all_ok ? 0 : 1;
}
#endif
