// The case: a small, versioned text file that fully determines one attention
// problem and its inputs.  See corpora/README.md for the format.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/abi/attnfuzz_kernel.h"

namespace afz {

inline constexpr int kCaseVersion = 1;

enum class Layout { BHSD, BSHD, PackedQKV };
enum class KvBroadcast { None, Heads, Batch };  // K and V with stride 0 across heads or batch
enum class Poison { NaN, Inf, None };           // what fills padding and row gaps
// Which pass a case is run through: the forward, the backward (dQ, dK, dV
// from dO), or both one after the other.  Saved failures record theirs.
enum class Pass { Fwd, Bwd, Both };

// An explicit mask pattern over (query i, key j) of each sequence, broadcast
// over heads.  kind and integer args, e.g. "rows_every 7 0", "band -3 0".
struct MaskPattern {
  std::string kind;
  std::vector<int64_t> args;
  bool operator==(const MaskPattern&) const = default;
};

// The additive mask puts `value` where the pattern masks and 0 elsewhere.
enum class AddValueKind { NegInf, Lowest, Number };
struct AddMask {
  MaskPattern pattern;
  AddValueKind value_kind = AddValueKind::NegInf;
  double value = 0;  // for Number
  bool operator==(const AddMask&) const = default;
};

// A value distribution for one tensor: "normal SIGMA", "uniform A", "int R",
// "few_rows PERMIL" (whole rows kept with probability PERMIL/1000, else 0).
struct Distribution {
  std::string kind = "normal";
  double param = 1.0;
  bool operator==(const Distribution&) const = default;
};

// An adversarial transform applied to the logical tensors before rounding,
// e.g. "late_max count=5 boost=20".  Parameters are named numbers.
struct Transform {
  std::string name;
  std::vector<std::pair<std::string, double>> params;
  double get(const std::string& key, double fallback) const {
    for (const auto& [k, v] : params)
      if (k == key) return v;
    return fallback;
  }
  bool operator==(const Transform&) const = default;
};

struct Case {
  std::string kernel;                   // optional: which kernel a saved failure belongs to
  Pass pass = Pass::Fwd;                // which pass a saved failure ran
  std::vector<std::string> provenance;  // TEXT of each "# provenance: TEXT" line, in order

  int batch = 1, heads_q = 1, heads_kv = 1;
  std::vector<int32_t> seqlens_q{1}, seqlens_k{1};  // one per sequence
  int head_dim = 64, head_dim_v = 64;
  afz_dtype in_dtype = AFZ_BF16, out_dtype = AFZ_BF16;
  std::optional<double> scale;          // default: fp32(1/sqrt(head_dim))
  double softcap = 0;

  bool has_window = false;              // causal is window (-1, 0)
  int window_left = -1, window_right = -1;
  afz_align align = AFZ_ALIGN_BOTTOM_RIGHT;
  std::optional<MaskPattern> bool_mask;
  std::optional<AddMask> add_mask;

  Layout layout = Layout::BHSD;
  int row_gap = 0;                      // extra elements between rows
  KvBroadcast kv_broadcast = KvBroadcast::None;
  Poison poison = Poison::NaN;

  Distribution values_q, values_k, values_v;
  // The backward pass's upstream gradient dO [b][h][i][dv] (its own RNG
  // stream; only read when a backward pass runs: `--pass bwd|both`).
  Distribution values_do;
  std::vector<Transform> transforms;
  uint64_t seed = 0;

  int max_seqlen_q() const;
  int max_seqlen_k() const;
  float effective_scale() const;
  bool operator==(const Case&) const = default;
};

// "fwd", "bwd", "both"; parse_pass is their inverse (nullopt for anything else).
std::string_view pass_name(Pass p);
std::optional<Pass> parse_pass(std::string_view name);

// Parse errors carry the line and field, for "file:line: field: message".
struct ParseError {
  int line = 0;
  std::string field;
  std::string message;
  std::string format(const std::string& file) const;
};

// Parses the text format.  Never throws, never aborts, on any input bytes.
// A parsed case has also passed validate_case, its errors pointed at the line
// of the offending key.
std::optional<Case> parse_case(std::string_view text, ParseError* error);
// Writes the canonical text form; parse_case(write_case(c)) == c.
std::string write_case(const Case& c);
// Semantic checks beyond syntax (heads divisible, seqlens within limits...).
std::optional<ParseError> validate_case(const Case& c);

// Limits that keep a hostile case file from exhausting memory.
inline constexpr int kMaxBatch = 1024;
inline constexpr int kMaxHeads = 256;
inline constexpr int kMaxSeqlen = 1 << 20;
inline constexpr int kMaxHeadDim = 1024;
// Per tensor: past 2^31, so that a case can hold a tensor whose flat int32
// offsets wrap (the scale class's K and V, harness/case/scale_generator.h);
// materialization indexes in int64.
inline constexpr int64_t kMaxElements = int64_t{1} << 32;

}  // namespace afz
