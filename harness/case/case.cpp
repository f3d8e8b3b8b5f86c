// The case model: derived quantities, the vocabulary of patterns and
// distributions, and validate_case, the rules every case obeys whether it
// was read from a file (case_io.cpp) or built in memory by a generator.
#include "harness/case/case.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness/case/case_io.h"
#include "harness/case/case_text.h"
#include "harness/case/transforms.h"
#include "kernels/abi/dtype.h"

namespace afz {

namespace {
// The allocation extent of a varlen batch; an empty batch has extent 0.
int max_of(const std::vector<int32_t>& seqlens) {
  return seqlens.empty() ? 0 : *std::max_element(seqlens.begin(), seqlens.end());
}
}  // namespace

int Case::max_seqlen_q() const { return max_of(seqlens_q); }

std::string_view pass_name(Pass p) { return case_text::spell(case_text::kPasses, p); }
std::optional<Pass> parse_pass(std::string_view name) { return case_text::lookup(case_text::kPasses, name); }
int Case::max_seqlen_k() const { return max_of(seqlens_k); }

// Kernels take the scale as fp32 (afz_problem::scale), so the case's scale is
// the fp32 rounding of its double.  The default follows what FlashAttention's
// Python front end passes: 1/sqrt(d) in double, then rounded to fp32.  sqrt
// and the division are correctly rounded IEEE operations and round_to is
// exact integer code, so the result is the same bits on every machine
// (1/sqrt(d) is not itself the correctly rounded fp32 of d^-1/2 in every
// case, but it is the value users' kernels are actually called with).
float Case::effective_scale() const {
  const double s = scale ? *scale : 1.0 / std::sqrt(double(head_dim));
  return float(round_to(AFZ_F32, s));
}

// ------------------------------------------------------------ vocabulary --

namespace {

using namespace case_text;

constexpr int64_t kPos = kMaxSeqlen;  // any query or key position
constexpr PatternOrder kNoOrder{-1, -1, false};
constexpr PatternKind kPatterns[] = {
    {"rows_every", 1, 2, {{"K", 1, kPos}, {"OFFSET", 0, kPos - 1}}, {{1, 0, true}, kNoOrder},
     "query rows i with i % K == OFFSET (default 0) are fully masked"},
    {"cols_every", 1, 2, {{"K", 1, kPos}, {"OFFSET", 0, kPos - 1}}, {{1, 0, true}, kNoOrder},
     "key columns j with j % K == OFFSET (default 0) are masked in every row"},
    {"band", 2, 2, {{"LO", -kPos, kPos}, {"HI", -kPos, kPos}}, {{0, 1, false}, kNoOrder},
     "keys with LO <= j - i <= HI are kept, all others masked"},
    {"block", 4, 4, {{"I0", 0, kPos}, {"I1", 0, kPos}, {"J0", 0, kPos}, {"J1", 0, kPos}},
     {{0, 1, true}, {2, 3, true}}, "the rectangle I0 <= i < I1, J0 <= j < J1 is masked"},
    {"random", 1, 1, {{"PERMIL", 0, kPermilScale}}, {kNoOrder, kNoOrder},
     "each (i, j) is masked with probability PERMIL/1000, drawn from the case seed"},
    {"key_block", 4, 4, {{"BC", 1, kPos}, {"I0", 0, kPos}, {"I1", 0, kPos}, {"BLOCK", 0, kPos}},
     {{1, 2, false}, kNoOrder},
     "key block BLOCK (BLOCK*BC <= j < (BLOCK+1)*BC) is masked for rows I0 <= i <= I1 only: "
     "a key block empty for some rows of a query tile but not for others"},
};

constexpr DistributionKind kDistributions[] = {
    {"normal", "SIGMA", "bell-shaped (sum of four uniforms), mean 0, standard deviation SIGMA"},
    {"uniform", "A", "uniform on [-A, A)"},
    {"int", "R", "integers uniform in [-R, R]; R a whole number <= 2^24"},
    {"few_rows", "PERMIL",
     "each row (the last dimension) normal 1 with probability PERMIL/1000, else exactly 0; PERMIL a whole "
     "number <= 1000"},
};

std::string usage_of(const PatternKind& k) {
  std::string out;
  for (int n = 0; n < k.max_args; ++n) {
    if (n) out += ' ';
    out += n >= k.min_args ? "[" + std::string(k.args[n].name) + "]" : k.args[n].name;
  }
  return out;
}

std::string pattern_names() {
  std::string out;
  for (const PatternKind& k : kPatterns) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

std::string distribution_names() {
  std::string out;
  for (const DistributionKind& d : kDistributions) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

struct TensorExtent {
  const char* name;
  int64_t dims[4];
  const char* dim_names[4];
};

}  // namespace

std::span<const PatternKind> mask_pattern_kinds() { return kPatterns; }
std::span<const DistributionKind> distribution_kinds() { return kDistributions; }

const PatternKind* find_pattern_kind(std::string_view name) {
  for (const PatternKind& k : kPatterns)
    if (name == k.name) return &k;
  return nullptr;
}

std::string check_pattern(const MaskPattern& p) {
  const PatternKind* k = find_pattern_kind(p.kind);
  if (!k) return "unknown mask pattern '" + quote(p.kind) + "' (one of: " + pattern_names() + ")";
  const int n = int(p.args.size());
  if (n < k->min_args || n > k->max_args)
    return "pattern " + std::string(k->name) + " takes " + usage_of(*k) + ", got " + std::to_string(n) +
           (n == 1 ? " value" : " values");
  for (int a = 0; a < n; ++a)
    if (auto why = in_range(k->args[a].name, p.args[a], k->args[a].lo, k->args[a].hi); !why.empty())
      return "pattern " + std::string(k->name) + ": " + why;
  for (const PatternOrder& o : k->order) {
    if (o.lhs < 0 || o.lhs >= n || o.rhs >= n) continue;
    const int64_t l = p.args[o.lhs], r = p.args[o.rhs];
    if (o.strict ? l < r : l <= r) continue;
    return "pattern " + std::string(k->name) + " needs " + k->args[o.lhs].name + (o.strict ? " < " : " <= ") +
           k->args[o.rhs].name + ", got " + format_int(l) + " and " + format_int(r);
  }
  return {};
}

std::string check_distribution(const Distribution& d) {
  const auto* kind = std::find_if(std::begin(kDistributions), std::end(kDistributions),
                                  [&](const DistributionKind& k) { return d.kind == k.name; });
  if (kind == std::end(kDistributions))
    return "unknown distribution '" + quote(d.kind) + "' (one of: " + distribution_names() + ")";
  // !(x >= 0) also catches NaN.
  if (!std::isfinite(d.param) || !(d.param >= 0))
    return std::string(kind->name) + " " + kind->param + " must be finite and >= 0, got " + format_double(d.param);
  if (d.kind == "int" && (d.param != std::floor(d.param) || d.param > double(kMaxIntDistribution)))
    return "int R must be a whole number <= " + format_int(kMaxIntDistribution) + ", got " + format_double(d.param);
  if (d.kind == "few_rows" && (d.param != std::floor(d.param) || d.param > double(kPermilScale)))
    return "few_rows PERMIL must be a whole number <= " + format_int(kPermilScale) + ", got " + format_double(d.param);
  return {};
}

std::string check_transform_syntax(const Transform& t) {
  if (!is_identifier(t.name))
    return "transform name '" + quote(t.name) + "' must be a lowercase identifier ([a-z_][a-z0-9_]*)";
  if (t.params.size() > size_t(kMaxTransformParams))
    return "transform " + t.name + " has " + std::to_string(t.params.size()) + " parameters; at most " +
           std::to_string(kMaxTransformParams);
  for (size_t n = 0; n < t.params.size(); ++n) {
    const auto& [key, value] = t.params[n];
    if (!is_identifier(key))
      return "transform " + t.name + ": parameter name '" + quote(key) + "' must be a lowercase identifier";
    if (!std::isfinite(value)) return "transform " + t.name + ": " + key + " must be finite";
    for (size_t m = 0; m < n; ++m)
      if (t.params[m].first == key) return "transform " + t.name + ": parameter " + key + " given twice";
  }
  return {};
}

std::string check_kernel_name(std::string_view name) {
  if (name.size() > size_t(kMaxKernelName))
    return "kernel name is " + std::to_string(name.size()) + " characters long; at most " +
           std::to_string(kMaxKernelName);
  for (const unsigned char ch : name)
    if (ch <= ' ' || ch >= 0x7f || ch == '#')
      return "kernel name '" + quote(name) + "' must be printable ASCII without spaces or '#'";
  return {};
}

// Provenance entries are written back as "# provenance: TEXT" and read with
// surrounding blanks trimmed, so only trimmed one-line text round-trips.
std::string check_provenance(std::string_view p) {
  for (char ch : p)
    if (is_control(static_cast<unsigned char>(ch)))
      return "provenance holds control character " + hex_byte(static_cast<unsigned char>(ch));
  if (trim(p) != p) return "provenance '" + quote(p) + "' has leading or trailing blanks";
  return {};
}

// ------------------------------------------------------------ ParseError --

std::string ParseError::format(const std::string& file) const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line);
  out += ": ";
  if (!field.empty()) out += "field '" + field + "': ";
  return out + message;
}

// ------------------------------------------------------------- validate --

std::optional<ParseError> validate_case(const Case& c) {
  auto bad = [](std::string field, std::string message) {
    return std::optional<ParseError>(ParseError{0, std::move(field), std::move(message)});
  };
  for (const std::string& p : c.provenance)
    if (auto why = check_provenance(p); !why.empty()) return bad("provenance", why);
  if (auto why = check_kernel_name(c.kernel); !why.empty()) return bad("kernel", why);

  if (auto why = in_range("batch", c.batch, 1, kMaxBatch); !why.empty()) return bad("batch", why);
  if (auto why = in_range("heads_q", c.heads_q, 1, kMaxHeads); !why.empty()) return bad("heads", why);
  if (auto why = in_range("heads_kv", c.heads_kv, 1, kMaxHeads); !why.empty()) return bad("heads", why);
  if (c.heads_q % c.heads_kv != 0)
    return bad("heads", "heads_q " + std::to_string(c.heads_q) + " is not a multiple of heads_kv " +
                            std::to_string(c.heads_kv));

  for (const auto& [field, seqlens] : {std::pair{"seqlen_q", &c.seqlens_q}, std::pair{"seqlen_k", &c.seqlens_k}}) {
    if (seqlens->size() != size_t(c.batch))
      return bad(field, std::to_string(seqlens->size()) + " values for batch " + std::to_string(c.batch) +
                            " (give one per sequence, or one for all)");
    for (int32_t n : *seqlens)
      if (auto why = in_range(field, n, 0, kMaxSeqlen); !why.empty()) return bad(field, why);
  }
  if (auto why = in_range("head_dim", c.head_dim, 1, kMaxHeadDim); !why.empty()) return bad("head_dim", why);
  if (auto why = in_range("head_dim_v", c.head_dim_v, 1, kMaxHeadDim); !why.empty()) return bad("head_dim", why);

  for (afz_dtype t : {c.in_dtype, c.out_dtype})
    if (std::find(std::begin(kValueDtypes), std::end(kValueDtypes), t) == std::end(kValueDtypes))
      return bad("dtype", "dtypes are fp32, fp16, bf16 or fp8e4m3, got " + std::string(dtype_name(t)));

  if (c.scale && !fp32_finite(*c.scale))
    return bad("scale", "scale must be a number whose fp32 rounding is finite, got " + format_double(*c.scale));
  if (!fp32_finite(c.softcap) || !(c.softcap >= 0))
    return bad("softcap", "softcap must be >= 0 (0: none) and finite in fp32, got " + format_double(c.softcap));

  if (!known(kAligns, c.align)) return bad("window", "alignment must be top_left or bottom_right");
  if (c.has_window) {
    if (auto why = in_range("window left", c.window_left, -1, kMaxSeqlen); !why.empty()) return bad("window", why);
    if (auto why = in_range("window right", c.window_right, -1, kMaxSeqlen); !why.empty()) return bad("window", why);
  } else if (c.window_left != -1 || c.window_right != -1 || c.align != AFZ_ALIGN_BOTTOM_RIGHT) {
    // A case without a window writes no window line, so these fields could
    // not come back from the file: they must keep their defaults.
    return bad("window", "no window is set, so window_left/right must be -1 and align bottom_right");
  }

  if (c.bool_mask)
    if (auto why = check_pattern(*c.bool_mask); !why.empty()) return bad("bool_mask", why);
  if (c.add_mask) {
    const AddMask& a = *c.add_mask;
    if (a.value_kind == AddValueKind::Number) {
      if (!fp32_finite(a.value))
        return bad("add_mask", "value must be -inf, lowest or a number finite in fp32, got " + format_double(a.value));
    } else if (!known(kAddValues, a.value_kind)) {
      return bad("add_mask", "unknown value kind");
    } else if (a.value != 0 || std::signbit(a.value)) {
      return bad("add_mask", "value must be 0 unless the value kind is a number");
    }
    if (auto why = check_pattern(a.pattern); !why.empty()) return bad("add_mask", why);
  }

  if (!known(kLayouts, c.layout)) return bad("layout", "layout must be one of " + choices(kLayouts));
  if (auto why = in_range("row_gap", c.row_gap, 0, kMaxRowGap); !why.empty()) return bad("row_gap", why);
  if (!known(kBroadcasts, c.kv_broadcast)) return bad("kv_broadcast", "must be one of " + choices(kBroadcasts));
  if (!known(kPoisons, c.poison)) return bad("poison", "must be one of " + choices(kPoisons));
  if (c.layout == Layout::PackedQKV) {
    // One buffer holds q, k and v of a token side by side with one row stride.
    if (c.head_dim != c.head_dim_v)
      return bad("layout", "packed_qkv needs head_dim == head_dim_v, got " + std::to_string(c.head_dim) + " and " +
                               std::to_string(c.head_dim_v));
    if (c.kv_broadcast != KvBroadcast::None)
      return bad("kv_broadcast", "packed_qkv stores every K and V head; broadcast needs layout bhsd or bshd");
  }

  for (const auto& [field, dist] : {std::pair{"values_q", &c.values_q}, std::pair{"values_k", &c.values_k},
                                    std::pair{"values_v", &c.values_v}, std::pair{"values_do", &c.values_do}})
    if (auto why = check_distribution(*dist); !why.empty()) return bad(field, why);

  if (c.transforms.size() > size_t(kMaxTransforms))
    return bad("transform", std::to_string(c.transforms.size()) + " transforms; at most " +
                                std::to_string(kMaxTransforms));
  for (const Transform& t : c.transforms) {
    if (auto why = check_transform_syntax(t); !why.empty()) return bad("transform", why);
    if (auto why = check_transform(t); !why.empty()) return bad("transform", why);
  }

  // Memory: every buffer the materializer allocates, at its extent (the
  // longest sequence, rows padded by row_gap).  All products fit in int64:
  // the factors are bounded above (at most 2^10 * 2^20 * 768 * 2^17).
  const int64_t b = c.batch, sq = c.max_seqlen_q(), sk = c.max_seqlen_k();
  const int64_t row = int64_t(c.head_dim) + c.row_gap, row_v = int64_t(c.head_dim_v) + c.row_gap;
  std::vector<TensorExtent> extents = {
      {"q", {b, c.heads_q, sq, row}, {"batch", "heads_q", "seqlen_q", "row"}},
      {"k", {b, c.heads_kv, sk, row}, {"batch", "heads_kv", "seqlen_k", "row"}},
      {"v", {b, c.heads_kv, sk, row_v}, {"batch", "heads_kv", "seqlen_k", "row"}},
      {"o", {b, c.heads_q, sq, row_v}, {"batch", "heads_q", "seqlen_q", "row"}},
  };
  if (c.layout == Layout::PackedQKV)
    extents.push_back({"packed qkv", {b, std::max(sq, sk), int64_t(c.heads_q) + 2 * c.heads_kv, row},
                       {"batch", "seqlen", "heads_q+2*heads_kv", "row"}});
  if (c.bool_mask || c.add_mask) extents.push_back({"mask", {b, sq, sk, 1}, {"batch", "seqlen_q", "seqlen_k", "1"}});
  for (const TensorExtent& e : extents) {
    const int64_t n = e.dims[0] * e.dims[1] * e.dims[2] * e.dims[3];
    if (n <= kMaxElements) continue;
    std::string why = std::string(e.name) + " needs " + format_int(n) + " elements (";
    for (int d = 0; d < 4; ++d)
      why += (d ? " x " : "") + std::string(e.dim_names[d]) + " " + format_int(e.dims[d]);
    return bad("shape", why + "); at most " + format_int(kMaxElements) + " per tensor");
  }
  return std::nullopt;
}

}  // namespace afz
