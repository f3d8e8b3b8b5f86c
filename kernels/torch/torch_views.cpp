#include "torch_views.h"

#include <limits>
#include <sstream>
#include <stdexcept>

namespace afz::torchk {

std::optional<at::ScalarType> scalar_type_of(afz_dtype t) {
  switch (t) {
    case AFZ_F32: return at::kFloat;
    case AFZ_F16: return at::kHalf;
    case AFZ_BF16: return at::kBFloat16;
    case AFZ_U8: return at::kByte;
    default: return std::nullopt;
  }
}

const char* dtype_label(afz_dtype t) {
  switch (t) {
    case AFZ_F32: return "f32";
    case AFZ_F16: return "f16";
    case AFZ_BF16: return "bf16";
    case AFZ_F8E4M3: return "f8e4m3";
    case AFZ_U8: return "u8";
    default: return "?";
  }
}

at::Tensor wrap(const afz_tensor& t, const std::array<int64_t, 4>& extents, at::Device device) {
  const std::optional<at::ScalarType> st = scalar_type_of(t.dtype);
  if (!st) throw std::invalid_argument(std::string("dtype ") + dtype_label(t.dtype) + " has no torch equivalent here");
  return at::from_blob(t.data, {extents[0], extents[1], extents[2], extents[3]},
                       {t.stride[0], t.stride[1], t.stride[2], t.stride[3]},
                       at::TensorOptions().dtype(*st).device(device));
}

at::Tensor wrap_lse(const afz_problem& p, at::Device device) {
  if (!p.lse) return at::Tensor();
  return at::from_blob(p.lse, {p.batch, p.heads_q, p.max_seqlen_q},
                       {p.lse_stride[0], p.lse_stride[1], p.lse_stride[2]},
                       at::TensorOptions().dtype(at::kFloat).device(device));
}

std::vector<int32_t> host_int32(const int32_t* data, int64_t n, at::Device device) {
  std::vector<int32_t> out(size_t(n > 0 ? n : 0));
  if (n <= 0) return out;
  const at::Tensor src =
      at::from_blob(const_cast<int32_t*>(data), {n}, at::TensorOptions().dtype(at::kInt).device(device));
  // A synchronous copy on torch's current stream: ordered after the uploads.
  const at::Tensor host = src.cpu().contiguous();
  std::copy(host.data_ptr<int32_t>(), host.data_ptr<int32_t>() + n, out.begin());
  return out;
}

at::Tensor device_int32(const std::vector<int32_t>& values, at::Device device) {
  const at::Tensor host = at::from_blob(const_cast<int32_t*>(values.data()), {int64_t(values.size())},
                                        at::TensorOptions().dtype(at::kInt));
  // copy=true: the result must not alias `values`, which dies with the caller.
  return host.to(at::TensorOptions().dtype(at::kInt).device(device), /*non_blocking=*/false, /*copy=*/true);
}

std::string shape_text(at::IntArrayRef s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

int64_t bytes_of(std::initializer_list<at::Tensor> tensors) {
  int64_t n = 0;
  for (const at::Tensor& t : tensors)
    if (t.defined()) n += t.numel() * int64_t(t.element_size());
  return n;
}

std::string copy_checked(at::Tensor dst, const at::Tensor& src, const char* what) {
  if (src.sizes() != dst.sizes())
    return std::string("the operator returned ") + what + " of shape " + shape_text(src.sizes()) + ", expected " +
           shape_text(dst.sizes());
  dst.copy_(src);
  return "";
}

at::Tensor unit_inner_stride(const at::Tensor& t) {
  if (t.dim() == 0 || t.size(-1) <= 1 || t.stride(-1) == 1) return t;
  return t.contiguous();
}

at::Tensor repeat_kv_heads(const at::Tensor& kv, int64_t heads_q) {
  const int64_t heads_kv = kv.size(1);
  if (heads_kv == heads_q) return kv;
  const int64_t group = heads_q / heads_kv;
  return kv.unsqueeze(2).expand({kv.size(0), heads_kv, group, kv.size(2), kv.size(3)})
      .reshape({kv.size(0), heads_q, kv.size(2), kv.size(3)});
}

Bias additive_bias(const at::Tensor& bool_mask, const at::Tensor& add_mask, int64_t heads_q, at::ScalarType dtype,
                   int64_t key_pad) {
  Bias out;
  if (!bool_mask.defined() && !add_mask.defined()) return out;
  const at::Tensor& shape_of = add_mask.defined() ? add_mask : bool_mask;
  const std::vector<int64_t> shape = {shape_of.size(0), heads_q, shape_of.size(2), shape_of.size(3)};
  at::Tensor f32 = add_mask.defined() ? add_mask.expand(shape).to(at::kFloat)
                                      : at::zeros(shape, shape_of.options().dtype(at::kFloat));
  if (bool_mask.defined())
    f32 = f32.masked_fill(bool_mask.expand(shape).eq(0), -std::numeric_limits<float>::infinity());
  at::Tensor rounded = f32.to(dtype);
  if (dtype != at::kFloat) {
    // -inf and 0 always round trip; finite mask values (-1e4, -65504, ...)
    // may not, and the oracle adds the fp32 value.
    const int64_t changed = rounded.to(at::kFloat).ne(f32).sum().item<int64_t>();
    if (changed > 0) {
      out.inexact = std::to_string(changed) + " additive mask value(s) not representable in " +
                    std::string(c10::toString(dtype)) + ", the dtype the operator takes its bias in";
      return out;
    }
  }
  const int64_t sk = shape[3];
  const int64_t padded = key_pad > 1 ? (sk + key_pad - 1) / key_pad * key_pad : sk;
  out.bias = at::zeros({shape[0], shape[1], shape[2], padded}, rounded.options()).narrow(3, 0, sk);
  out.bias.copy_(rounded);
  return out;
}

std::vector<Slice> plan_slices(const std::vector<int32_t>& seqlens_q, const std::vector<int32_t>& seqlens_k) {
  std::vector<Slice> slices;
  const int64_t batch = int64_t(seqlens_q.size());
  if (batch == 0) return slices;
  bool uniform = true;
  for (int64_t b = 1; b < batch; ++b)
    uniform = uniform && seqlens_q[b] == seqlens_q[0] && seqlens_k[b] == seqlens_k[0];
  if (uniform) {
    if (seqlens_q[0] > 0) slices.push_back({0, batch, seqlens_q[0], seqlens_k[0]});
    return slices;
  }
  for (int64_t b = 0; b < batch; ++b)
    if (seqlens_q[b] > 0) slices.push_back({b, 1, seqlens_q[b], seqlens_k[b]});
  return slices;
}

bool alignments_coincide(const afz_problem& p) {
  for (int b = 0; b < p.batch; ++b) {
    const int32_t sq = p.seqlens_q[b], sk = p.seqlens_k[b];
    if (sq != sk && sq > 0 && sk > 0) return false;
  }
  return true;
}

}  // namespace afz::torchk
