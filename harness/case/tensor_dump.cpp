#include "harness/case/tensor_dump.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "harness/case/materialize.h"
#include "kernels/abi/dtype.h"

namespace afz {
namespace {

// NumPy's .npy v1.0: magic, a little-endian header length, a Python dict
// padded with spaces to a 64-byte boundary, then the raw C-order data.
template <class T>
void write_npy(const std::string& path, const std::vector<T>& data, const std::vector<int64_t>& shape) {
  static_assert(std::is_floating_point_v<T>);
  std::string dims;
  for (int64_t s : shape) dims += fmt::format("{},", s);
  std::string header = fmt::format("{{'descr': '<f{}', 'fortran_order': False, 'shape': ({}), }}", sizeof(T), dims);
  constexpr size_t kPreamble = 10, kAlign = 64;
  while ((kPreamble + header.size() + 1) % kAlign) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  const uint16_t len = uint16_t(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(reinterpret_cast<const char*>(&len), 2);
  f << header;
  f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size() * sizeof(T)));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::vector<float> narrowed(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

std::vector<double> exact_values(const GradTerms& t) {
  std::vector<double> out(t.value.size());
  for (size_t e = 0; e < out.size(); ++e) out[e] = t.value[e].hi + t.value[e].lo;
  return out;
}

// A [b][heads][s][dim] tensor as logical float32 from value_at(b, h, s, x);
// rows past a sequence's length stay 0.
template <class ValueAt>
std::vector<float> logical(int batch, int heads, int seq, int dim, const int32_t* lens, ValueAt value_at) {
  std::vector<float> out(size_t(batch) * heads * seq * dim, 0.0f);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int s = 0; s < lens[b]; ++s)
        for (int x = 0; x < dim; ++x) out[((size_t(b) * heads + h) * seq + s) * dim + x] = value_at(b, h, s, x);
  return out;
}

// An input tensor in its own dtype and strides.
auto element_of(const afz_tensor& t) {
  return [&t](int b, int h, int s, int x) {
    const int64_t off = b * t.stride[0] + h * t.stride[1] + s * t.stride[2] + x * t.stride[3];
    return float(load(t.dtype, static_cast<const uint8_t*>(t.data) + off * size_of(t.dtype)));
  };
}

}  // namespace

void dump_backward_tensors(const std::string& dir, const BackwardMaterialized& bm, const GradResult& exact,
                           bool kernel_ran) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot make " + dir + ": " + ec.message());
  const Materialized& m = bm.forward();
  const afz_problem& p = m.problem();
  const afz_backward_problem& bp = bm.problem();
  const LogicalTensors& x = m.logical();
  const int sq = p.max_seqlen_q, sk = p.max_seqlen_k;
  const std::vector<int64_t> q_shape{p.batch, p.heads_q, sq, p.head_dim}, k_shape{p.batch, p.heads_kv, sk, p.head_dim},
      v_shape{p.batch, p.heads_kv, sk, p.head_dim_v}, o_shape{p.batch, p.heads_q, sq, p.head_dim_v};
  write_npy(dir + "/q.npy", narrowed(x.q), q_shape);
  write_npy(dir + "/k.npy", narrowed(x.k), k_shape);
  write_npy(dir + "/v.npy", narrowed(x.v), v_shape);
  std::vector<float> bias(size_t(p.batch) * p.heads_q * sq * sk, -std::numeric_limits<float>::infinity());
  std::vector<float> lse(size_t(p.batch) * p.heads_q * sq, 0.0f);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h)
      for (int i = 0; i < p.seqlens_q[b]; ++i) {
        for (int j = 0; j < p.seqlens_k[b]; ++j)
          if (m.visible(b, h, i, j))
            bias[((size_t(b) * p.heads_q + h) * sq + i) * sk + j] = float(m.add_mask_at(b, h, i, j));
        lse[(size_t(b) * p.heads_q + h) * sq + i] =
            bp.lse[b * bp.lse_stride[0] + h * bp.lse_stride[1] + i * bp.lse_stride[2]];
      }
  write_npy(dir + "/bias.npy", bias, {p.batch, p.heads_q, sq, sk});
  write_npy(dir + "/dout.npy", logical(p.batch, p.heads_q, sq, p.head_dim_v, p.seqlens_q, element_of(bp.dout)), o_shape);
  write_npy(dir + "/o.npy", logical(p.batch, p.heads_q, sq, p.head_dim_v, p.seqlens_q, element_of(bp.out)), o_shape);
  write_npy(dir + "/lse.npy", lse, {p.batch, p.heads_q, sq});
  write_npy(dir + "/exact_dq.npy", exact_values(exact.dq), q_shape);
  write_npy(dir + "/exact_dk.npy", exact_values(exact.dk), k_shape);
  write_npy(dir + "/exact_dv.npy", exact_values(exact.dv), v_shape);
  if (kernel_ran) {
    using G = BackwardMaterialized::Grad;
    auto grad = [&bm](G g) { return [&bm, g](int b, int h, int s, int x) { return bm.grad_at(g, b, h, s, x); }; };
    write_npy(dir + "/kernel_dq.npy", logical(p.batch, p.heads_q, sq, p.head_dim, p.seqlens_q, grad(G::Q)), q_shape);
    write_npy(dir + "/kernel_dk.npy", logical(p.batch, p.heads_kv, sk, p.head_dim, p.seqlens_k, grad(G::K)), k_shape);
    write_npy(dir + "/kernel_dv.npy", logical(p.batch, p.heads_kv, sk, p.head_dim_v, p.seqlens_k, grad(G::V)), v_shape);
  } else {
    // An earlier dump's gradients into the same folder would read as this run's.
    for (const char* g : {"dq", "dk", "dv"}) std::filesystem::remove(dir + "/kernel_" + g + ".npy", ec);
  }
  std::string lens_q, lens_k;
  for (int b = 0; b < p.batch; ++b) {
    lens_q += fmt::format("{}{}", b ? "," : "", p.seqlens_q[b]);
    lens_k += fmt::format("{}{}", b ? "," : "", p.seqlens_k[b]);
  }
  std::ofstream meta(dir + "/meta.json");
  meta << fmt::format(
      "{{\"dtype\": \"{}\", \"scale\": {:.17g}, \"seqlens_q\": [{}], \"seqlens_k\": [{}], \"max_sigma\": {:.17g}, "
      "\"max_abs_lse\": {:.17g}, \"kernel_ran\": {}}}\n",
      dtype_name(p.q.dtype), double(p.scale), lens_q, lens_k, exact.max_sigma, exact.max_abs_lse, kernel_ran);
  if (!meta) throw std::runtime_error("cannot write " + dir + "/meta.json");
}

}  // namespace afz
