#include "harness/case/case_features.h"

#include <algorithm>
#include <fmt/format.h>

#include "harness/case/case_io.h"
#include "harness/case/transforms.h"
#include "kernels/abi/dtype.h"

namespace afz {
namespace {

// Bucket upper bounds for the shape class.  Key edges sit at the block
// sizes kernels tile with (16, 64, 128), so "fits in one block" and "needs
// two" land in different buckets.  Queries only tell one row (decode) from
// a tile of rows from more than one 128-row tile: minimization often
// cannot take a query tile down to one row (shrinking redraws the values),
// and finer query buckets would split one bug into several signatures.
constexpr int kKeyBuckets[] = {0, 1, 16, 64, 128, 512, 2048};
constexpr int kQueryBuckets[] = {0, 1, 128};

template <size_t N>
std::string bucket(int n, const int (&edges)[N]) {
  for (int b : edges)
    if (n <= b) return std::to_string(b);
  return "big";
}

std::string_view layout_name(Layout l) {
  switch (l) {
    case Layout::BSHD: return "bshd";
    case Layout::PackedQKV: return "packed_qkv";
    default: return "bhsd";
  }
}

std::string_view add_value_name(const AddMask& a) {
  switch (a.value_kind) {
    case AddValueKind::NegInf: return "-inf";
    case AddValueKind::Lowest: return "lowest";
    default: return "number";
  }
}

}  // namespace

std::vector<std::string> case_features(const Case& c) {
  std::vector<std::string> f;
  f.push_back("dtype=" + std::string(dtype_name(c.in_dtype)));
  if (c.out_dtype != c.in_dtype) f.push_back("out=" + std::string(dtype_name(c.out_dtype)));
  if (c.has_window) {
    const bool causal = c.window_left == -1 && c.window_right == 0;
    const char* align = c.align == AFZ_ALIGN_TOP_LEFT ? "tl" : "br";
    f.push_back(fmt::format("{}_{}", causal ? "causal" : "window", align));
  }
  if (c.bool_mask) f.push_back("bool_mask:" + c.bool_mask->kind);
  if (c.add_mask) f.push_back("add_mask:" + std::string(add_value_name(*c.add_mask)));
  if (c.softcap != 0) f.push_back("softcap");
  if (c.heads_q > c.heads_kv) f.push_back(c.heads_kv == 1 ? "mqa" : "gqa");
  if (std::adjacent_find(c.seqlens_q.begin(), c.seqlens_q.end(), std::not_equal_to<>()) != c.seqlens_q.end() ||
      std::adjacent_find(c.seqlens_k.begin(), c.seqlens_k.end(), std::not_equal_to<>()) != c.seqlens_k.end())
    f.push_back("varlen");
  const auto zero = [](const std::vector<int32_t>& s) { return std::find(s.begin(), s.end(), 0) != s.end(); };
  if (zero(c.seqlens_q) || zero(c.seqlens_k)) f.push_back("empty_seq");
  if (c.head_dim != c.head_dim_v) f.push_back("dv!=d");
  if (c.layout != Layout::BHSD) f.push_back("layout:" + std::string(layout_name(c.layout)));
  if (c.row_gap) f.push_back("row_gap");
  if (c.kv_broadcast == KvBroadcast::Heads) f.push_back("kv_broadcast:heads");
  if (c.kv_broadcast == KvBroadcast::Batch) f.push_back("kv_broadcast:batch");
  if (c.poison == Poison::Inf) f.push_back("poison:inf");
  if (c.poison == Poison::None) f.push_back("poison:none");
  for (const Transform& t : c.transforms) f.push_back("t:" + t.name);
  std::sort(f.begin(), f.end());
  f.erase(std::unique(f.begin(), f.end()), f.end());
  return f;
}

std::string shape_class(const Case& c) {
  return "q" + bucket(c.max_seqlen_q(), kQueryBuckets) + ".k" + bucket(c.max_seqlen_k(), kKeyBuckets);
}

CaseSize case_size(const Case& c) {
  CaseSize s;
  for (int b = 0; b < c.batch && b < int(c.seqlens_q.size()) && b < int(c.seqlens_k.size()); ++b)
    s.elements += int64_t(c.heads_q) * c.seqlens_q[b] * c.head_dim +
                  int64_t(c.heads_kv) * c.seqlens_k[b] * (c.head_dim + c.head_dim_v);
  const Distribution plain;
  // Every feature but fp32 inputs, the canonical dtype.
  s.features = int(case_features(c).size()) - (c.in_dtype == AFZ_F32 ? 1 : 0) + (c.scale ? 1 : 0);
  for (const Distribution* d : {&c.values_q, &c.values_k, &c.values_v}) s.features += *d == plain ? 0 : 1;
  for (const Transform& t : c.transforms) s.features += int(t.params.size());
  return s;
}

bool case_is_buildable(const Case& c) {
  if (validate_case(c)) return false;
  for (const Transform& t : c.transforms)
    if (!check_transform(t).empty()) return false;
  return true;
}

}  // namespace afz
