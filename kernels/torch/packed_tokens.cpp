#include "packed_tokens.h"

#include <algorithm>

#include "torch_views.h"

namespace afz::torchk {

TokenPacking token_packing(const std::vector<int32_t>& lengths) {
  TokenPacking pk;
  pk.lengths = lengths;
  pk.cumulative.push_back(0);
  for (const int32_t len : lengths) {
    pk.cumulative.push_back(pk.cumulative.back() + len);
    pk.max_length = std::max<int64_t>(pk.max_length, len);
  }
  return pk;
}

at::Tensor pack_tokens(const at::Tensor& x, const TokenPacking& pk) {
  std::vector<at::Tensor> rows;
  for (size_t b = 0; b < pk.lengths.size(); ++b)
    // [H][s][D] -> [s][H][D]: token-major.
    rows.push_back(x.select(0, int64_t(b)).narrow(1, 0, pk.lengths[b]).transpose(0, 1));
  if (rows.empty()) return at::empty({0, x.size(1), x.size(3)}, x.options());
  return at::cat(rows, 0).contiguous();
}

at::Tensor pack_lse_heads_by_tokens(const at::Tensor& lse, const TokenPacking& pk) {
  std::vector<at::Tensor> columns;
  for (size_t b = 0; b < pk.lengths.size(); ++b)
    columns.push_back(lse.select(0, int64_t(b)).narrow(1, 0, pk.lengths[b]));
  if (columns.empty()) return at::empty({lse.size(1), 0}, lse.options());
  return at::cat(columns, 1).contiguous();
}

std::string unpack_tokens(const at::Tensor& packed, const at::Tensor& dst, const TokenPacking& pk, const char* what) {
  const std::vector<int64_t> expected = {pk.total(), dst.size(1), dst.size(3)};
  if (!packed.defined()) return std::string("the operator returned no ") + what;
  if (packed.sizes() != at::IntArrayRef(expected))
    return std::string("the operator returned ") + what + " of shape " + shape_text(packed.sizes()) + ", expected " +
           shape_text(expected);
  for (size_t b = 0; b < pk.lengths.size(); ++b) {
    if (pk.lengths[b] == 0) continue;
    // [s][H][D] -> [H][s][D], into the sequence's valid rows.
    const at::Tensor rows = packed.narrow(0, pk.start(b), pk.lengths[b]).transpose(0, 1);
    dst.select(0, int64_t(b)).narrow(1, 0, pk.lengths[b]).copy_(rows);
  }
  return "";
}

}  // namespace afz::torchk
