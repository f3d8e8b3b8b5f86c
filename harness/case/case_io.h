// The case text format's vocabulary, as data.  The parser, the validator,
// the canonical writer, the fuzzer dictionary test and corpora/README.md all
// follow these tables, so a new mask pattern or distribution is one row here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "harness/case/case.h"

namespace afz {

// Limits of the format beyond case.h's: each keeps a hostile file from
// making the parser (or later the materializer) allocate without bound.
inline constexpr size_t kMaxCaseBytes = size_t{1} << 20;  // a whole case file
inline constexpr int kMaxRowGap = 1 << 16;            // elements between rows
inline constexpr int kMaxTransforms = 64;             // transform lines per case
inline constexpr int kMaxTransformParams = 16;        // key=value pairs per transform
inline constexpr int kMaxKernelName = 128;            // characters
// `values int R` draws integers in [-R, R]: R <= 2^24 keeps every value
// exact in fp32 and the generator's `2R + 1` far from overflow.
inline constexpr int64_t kMaxIntDistribution = int64_t{1} << 24;
inline constexpr int kPermilScale = 1000;             // `random PERMIL`: masked fraction, per mille

// The keys a case file may hold, in canonical (writer) order, with their
// argument synopsis for error messages and documentation.
struct CaseKey {
  const char* name;
  const char* usage;
};
std::span<const CaseKey> case_keys();

// A mask pattern kind (`bool_mask KIND ARGS`, `add_mask VALUE KIND ARGS`).
// Arguments are integers, each within [lo, hi]; `order` relates two of them.
struct PatternArg {
  const char* name;
  int64_t lo, hi;
};
struct PatternOrder {
  int lhs, rhs;   // argument indices; -1: unused
  bool strict;    // args[lhs] < args[rhs] (else <=)
};
struct PatternKind {
  const char* name;
  int min_args, max_args;  // args past min_args are optional (see `meaning`)
  PatternArg args[4];
  PatternOrder order[2];
  const char* meaning;
};
std::span<const PatternKind> mask_pattern_kinds();
const PatternKind* find_pattern_kind(std::string_view name);

// A value distribution (`values DIST PARAM`).
struct DistributionKind {
  const char* name;
  const char* param;
  const char* meaning;
};
std::span<const DistributionKind> distribution_kinds();

// One-line reasons why a piece of a case is invalid; empty when it is valid.
// validate_case and the parser share them, so a file and an in-memory case
// obey the same rules.
std::string check_pattern(const MaskPattern& p);
std::string check_distribution(const Distribution& d);
std::string check_transform_syntax(const Transform& t);  // spelling, finiteness, duplicates
std::string check_kernel_name(std::string_view name);      // printable ASCII, no blanks or '#'
std::string check_provenance(std::string_view text);       // one line, trimmed

// Numbers as the format spells them.  Decimal or hexadecimal (0x1.8p-3)
// floats, correctly rounded and locale-independent (std::from_chars); no
// inf or nan; no leading '+'.  format_double gives the shortest decimal that
// parses back to exactly x.
std::optional<double> parse_double(std::string_view s);
std::string format_double(double x);

}  // namespace afz
