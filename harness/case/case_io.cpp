// The case text format: parser and canonical writer.
// The format is specified in corpora/README.md; the keys are the table
// below, mask patterns and distributions are in case.cpp, and the parser
// ends with validate_case (case.cpp) so a parsed case is a valid one.
//
// The parser takes arbitrary bytes (it runs under libFuzzer), so it
//  - never throws and never aborts: every failure is a ParseError;
//  - bounds every allocation before making it: the whole file, the tokens of
//    a line, the values of a list and the number of transforms are checked
//    against named limits first;
//  - reads numbers with std::from_chars only (correctly rounded, and no
//    locale: "0,5" never means one half).
#include "harness/case/case_io.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "harness/case/case_text.h"
#include "harness/case/transforms.h"
#include "kernels/abi/dtype.h"

namespace afz {

namespace {

using namespace case_text;

constexpr std::string_view kMagic = "attnfuzz-case";
constexpr std::string_view kProvenanceTag = "provenance:";
constexpr std::string_view kDefault = "default";
constexpr std::string_view kByteOrderMark = "\xef\xbb\xbf";  // UTF-8
// No key needs more words on one line than seqlen_q with one value per sequence.
constexpr size_t kMaxTokensPerLine = size_t(kMaxBatch) + 1;
// Typo suggestions for unknown keys: at most this many edits away.
constexpr int kMaxSuggestionDistance = 2;

constexpr CaseKey kKeys[] = {
    {"kernel", "NAME"},
    {"pass", "fwd | bwd | both (the pass a saved failure ran; default fwd)"},
    {"batch", "B"},
    {"heads", "HQ [HKV]"},
    {"seqlen_q", "N... (one per sequence, or one for all)"},
    {"seqlen_k", "N... (one per sequence, or one for all)"},
    {"head_dim", "D [DV]"},
    {"dtype", "IN [OUT]"},
    {"scale", "X | default"},
    {"softcap", "X"},
    {"causal", "[top_left | bottom_right]"},
    {"window", "LEFT RIGHT [top_left | bottom_right]"},
    {"bool_mask", "KIND ARGS..."},
    {"add_mask", "-inf | lowest | X  KIND ARGS..."},
    {"layout", "bhsd | bshd | packed_qkv"},
    {"row_gap", "G"},
    {"kv_broadcast", "none | heads | batch"},
    {"poison", "nan | inf | none"},
    {"values", "DIST PARAM"},
    {"values_q", "DIST PARAM"},
    {"values_k", "DIST PARAM"},
    {"values_v", "DIST PARAM"},
    {"values_do", "DIST PARAM (backward pass: dO; default normal 1)"},
    {"transform", "NAME [KEY=VALUE...]"},
    {"seed", "S (decimal or 0x hex, 64-bit)"},
};

int edit_distance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = int(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = int(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int substitute = diagonal + (a[i - 1] != b[j - 1]);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

// --------------------------------------------------------------- numbers --

enum class NumStatus { Ok, Syntax, Range };

NumStatus parse_number(std::string_view s, double* out) {
  bool negative = false;
  if (!s.empty() && s[0] == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  if (hex) s.remove_prefix(2);
  // The first character must start a digit string: this is what rejects a
  // second sign ("--1", "0x-1": from_chars would take the '-') and the words
  // "inf" and "nan", which from_chars accepts but a case never means.
  if (s.empty() || !((hex ? is_hex_digit(s[0]) : is_digit(s[0])) || s[0] == '.')) return NumStatus::Syntax;
  double x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x,
                                         hex ? std::chars_format::hex : std::chars_format::general);
  if (ec == std::errc::result_out_of_range) return NumStatus::Range;
  if (ec != std::errc() || end != s.data() + s.size()) return NumStatus::Syntax;
  if (!std::isfinite(x)) return NumStatus::Range;
  *out = negative ? -x : x;
  return NumStatus::Ok;
}

NumStatus parse_int(std::string_view s, int64_t* out) {
  // from_chars takes one leading '-' and nothing else before the digits.
  if (s.empty() || !(is_digit(s[0]) || (s[0] == '-' && s.size() > 1 && is_digit(s[1])))) return NumStatus::Syntax;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 10);
  if (ec == std::errc::result_out_of_range) return NumStatus::Range;
  if (ec != std::errc() || end != s.data() + s.size()) return NumStatus::Syntax;
  return NumStatus::Ok;
}

NumStatus parse_seed(std::string_view s, uint64_t* out) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty() || !(base == 16 ? is_hex_digit(s[0]) : is_digit(s[0]))) return NumStatus::Syntax;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  if (ec == std::errc::result_out_of_range) return NumStatus::Range;
  if (ec != std::errc() || end != s.data() + s.size()) return NumStatus::Syntax;
  return NumStatus::Ok;
}

std::string format_seed(uint64_t seed) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, seed, 16);
  return "0x" + std::string(buf, ec == std::errc() ? end : buf);
}

}  // namespace

std::span<const CaseKey> case_keys() { return kKeys; }

std::optional<double> parse_double(std::string_view s) {
  double x;
  if (parse_number(s, &x) != NumStatus::Ok) return std::nullopt;
  return x;
}

std::string format_double(double x) {
  // Shortest round-trip form: at most 24 characters ("-2.2250738585072014e-308").
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, ec == std::errc() ? end : buf);
}

// --------------------------------------------------------------- parser --

namespace {

using Args = std::span<const std::string_view>;

class CaseParser {
 public:
  std::optional<Case> run(std::string_view text, ParseError* error);

 private:
  struct KeyRule {
    std::string_view name;
    int min_args, max_args;
    bool repeatable;
    std::string_view slot;  // keys sharing a slot exclude each other (causal, window)
    bool (CaseParser::*read)(Args);
  };
  struct Seen {
    std::string_view slot, key;
    int line;
  };
  static const KeyRule kRules[];

  bool fail(std::string field, std::string message) {
    error_ = ParseError{line_, std::move(field), std::move(message)};
    return false;
  }
  bool read_line(std::string_view text);
  bool tokenize(std::string_view content);
  bool read_version(Args args);
  bool read_key(std::string_view name, Args args);
  bool finish();
  const Seen* seen(std::string_view slot_or_key) const {
    for (const Seen& s : seen_)
      if (s.slot == slot_or_key || s.key == slot_or_key) return &s;
    return nullptr;
  }
  void attribute(ParseError& e) const;
  std::string field() const { return std::string(key_); }

  // Typed arguments; each failure names the quantity `what`.
  bool int_arg(std::string_view tok, std::string_view what, int64_t lo, int64_t hi, int64_t* out);
  bool double_arg(std::string_view tok, std::string_view what, double* out);
  template <typename E, size_t N>
  bool word_arg(std::string_view tok, std::string_view what, const Spelling<E> (&table)[N], E* out);
  bool pattern_arg(Args args, MaskPattern* out);
  bool distribution_arg(Args args, Distribution* out);

  bool read_kernel(Args a);
  bool read_batch(Args a);
  bool read_heads(Args a);
  bool read_seqlen_q(Args a) { return read_seqlens(a, &c_.seqlens_q); }
  bool read_seqlen_k(Args a) { return read_seqlens(a, &c_.seqlens_k); }
  bool read_seqlens(Args a, std::vector<int32_t>* out);
  bool read_head_dim(Args a);
  bool read_dtype(Args a);
  bool read_scale(Args a);
  bool read_softcap(Args a);
  bool read_causal(Args a);
  bool read_window(Args a);
  bool read_bool_mask(Args a);
  bool read_add_mask(Args a);
  bool read_layout(Args a) { return word_arg(a[0], "layout", kLayouts, &c_.layout); }
  bool read_row_gap(Args a);
  bool read_kv_broadcast(Args a) { return word_arg(a[0], "kv_broadcast", kBroadcasts, &c_.kv_broadcast); }
  bool read_poison(Args a) { return word_arg(a[0], "poison", kPoisons, &c_.poison); }
  bool read_pass(Args a) { return word_arg(a[0], "pass", kPasses, &c_.pass); }
  bool read_values(Args a) { return distribution_arg(a, &values_all_); }
  bool read_values_q(Args a) { return distribution_arg(a, &values_one_[0].emplace()); }
  bool read_values_k(Args a) { return distribution_arg(a, &values_one_[1].emplace()); }
  bool read_values_v(Args a) { return distribution_arg(a, &values_one_[2].emplace()); }
  bool read_values_do(Args a) { return distribution_arg(a, &c_.values_do); }
  bool read_transform(Args a);
  bool read_seed(Args a);

  Case c_;
  ParseError error_;
  int line_ = 0;
  int version_line_ = 0;
  std::string_view key_;  // the key being read, for messages
  std::vector<std::string_view> tokens_;
  std::vector<Seen> seen_;
  Distribution values_all_;                   // `values`: q, k and v
  std::optional<Distribution> values_one_[3];  // `values_q/k/v` override it
};

const CaseParser::KeyRule CaseParser::kRules[] = {
    {"kernel", 1, 1, false, "kernel", &CaseParser::read_kernel},
    {"pass", 1, 1, false, "pass", &CaseParser::read_pass},
    {"batch", 1, 1, false, "batch", &CaseParser::read_batch},
    {"heads", 1, 2, false, "heads", &CaseParser::read_heads},
    {"seqlen_q", 1, kMaxBatch, false, "seqlen_q", &CaseParser::read_seqlen_q},
    {"seqlen_k", 1, kMaxBatch, false, "seqlen_k", &CaseParser::read_seqlen_k},
    {"head_dim", 1, 2, false, "head_dim", &CaseParser::read_head_dim},
    {"dtype", 1, 2, false, "dtype", &CaseParser::read_dtype},
    {"scale", 1, 1, false, "scale", &CaseParser::read_scale},
    {"softcap", 1, 1, false, "softcap", &CaseParser::read_softcap},
    {"causal", 0, 1, false, "window", &CaseParser::read_causal},
    {"window", 2, 3, false, "window", &CaseParser::read_window},
    {"bool_mask", 1, 5, false, "bool_mask", &CaseParser::read_bool_mask},
    {"add_mask", 2, 6, false, "add_mask", &CaseParser::read_add_mask},
    {"layout", 1, 1, false, "layout", &CaseParser::read_layout},
    {"row_gap", 1, 1, false, "row_gap", &CaseParser::read_row_gap},
    {"kv_broadcast", 1, 1, false, "kv_broadcast", &CaseParser::read_kv_broadcast},
    {"poison", 1, 1, false, "poison", &CaseParser::read_poison},
    {"values", 2, 2, false, "values", &CaseParser::read_values},
    {"values_q", 2, 2, false, "values_q", &CaseParser::read_values_q},
    {"values_k", 2, 2, false, "values_k", &CaseParser::read_values_k},
    {"values_v", 2, 2, false, "values_v", &CaseParser::read_values_v},
    {"values_do", 2, 2, false, "values_do", &CaseParser::read_values_do},
    {"transform", 1, 1 + kMaxTransformParams, true, "transform", &CaseParser::read_transform},
    {"seed", 1, 1, false, "seed", &CaseParser::read_seed},
};

std::optional<Case> CaseParser::run(std::string_view text, ParseError* error) {
  auto failed = [&]() -> std::optional<Case> {
    if (error) *error = error_;
    return std::nullopt;
  };
  if (text.size() > kMaxCaseBytes) {
    line_ = 1;
    fail("", "the file is " + std::to_string(text.size()) + " bytes; a case file holds at most " +
                 std::to_string(kMaxCaseBytes));
    return failed();
  }
  if (text.starts_with(kByteOrderMark)) text.remove_prefix(kByteOrderMark.size());  // editors on Windows add one
  size_t pos = 0;
  while (true) {
    const size_t newline = text.find('\n', pos);
    ++line_;
    const size_t length = newline == std::string_view::npos ? std::string_view::npos : newline - pos;
    if (!read_line(text.substr(pos, length))) return failed();
    if (newline == std::string_view::npos) break;
    pos = newline + 1;
  }
  if (!finish()) return failed();
  if (auto invalid = validate_case(c_)) {
    attribute(*invalid);
    error_ = *invalid;
    return failed();
  }
  return std::move(c_);
}

bool CaseParser::read_line(std::string_view text) {
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);  // CRLF files
  for (char ch : text)
    if (is_control(static_cast<unsigned char>(ch)))
      return fail("", "control character " + hex_byte(static_cast<unsigned char>(ch)) +
                          " (a case file is text: only tabs and line breaks)");
  const size_t hash = text.find('#');
  const std::string_view content = text.substr(0, hash);
  if (hash != std::string_view::npos && trim(content).empty()) {
    // A whole-line comment; "# provenance: TEXT" keeps TEXT.
    const std::string_view comment = trim(text.substr(hash + 1));
    if (comment.starts_with(kProvenanceTag)) c_.provenance.emplace_back(trim(comment.substr(kProvenanceTag.size())));
    return true;
  }
  if (!tokenize(content)) return false;
  if (tokens_.empty()) return true;
  const Args args = Args(tokens_).subspan(1);
  if (!version_line_) return read_version(args);
  return read_key(tokens_[0], args);
}

bool CaseParser::tokenize(std::string_view content) {
  tokens_.clear();
  size_t n = 0;
  while (true) {
    while (n < content.size() && is_blank_char(content[n])) ++n;
    if (n == content.size()) return true;
    const size_t start = n;
    while (n < content.size() && !is_blank_char(content[n])) ++n;
    // Checked before the push: a line of a million numbers costs nothing.
    if (tokens_.size() == kMaxTokensPerLine)
      return fail(quote(tokens_[0]), "more than " + std::to_string(kMaxTokensPerLine - 1) + " values on one line");
    tokens_.push_back(content.substr(start, n - start));
  }
}

bool CaseParser::read_version(Args args) {
  key_ = kMagic;
  const std::string expected = "'" + std::string(kMagic) + " " + std::to_string(kCaseVersion) + "'";
  if (tokens_[0] != kMagic)
    return fail(field(), "expected the version line " + expected + " before any key, found '" + quote(tokens_[0]) + "'");
  if (args.size() != 1) return fail(field(), "expects one version number, as in " + expected);
  int64_t v = 0;
  if (parse_int(args[0], &v) != NumStatus::Ok) return fail(field(), "version '" + quote(args[0]) + "' is not a number");
  if (v != kCaseVersion)
    return fail(field(), "version " + quote(args[0]) + " is not supported: this attnfuzz reads version " +
                             std::to_string(kCaseVersion));
  version_line_ = line_;
  return true;
}

bool CaseParser::read_key(std::string_view name, Args args) {
  key_ = name;
  const KeyRule* rule = nullptr;
  for (const KeyRule& r : kRules)
    if (r.name == name) rule = &r;
  if (!rule) {
    if (name == kMagic)
      return fail(field(), "the version line appears twice (first on line " + std::to_string(version_line_) + ")");
    std::string message = "unknown key";
    if (name.size() <= kMaxIdentifier)
      for (const CaseKey& k : kKeys)
        if (edit_distance(name, k.name) <= kMaxSuggestionDistance) {
          message += "; did you mean '" + std::string(k.name) + "'?";
          break;
        }
    return fail(quote(name), message);
  }
  if (!rule->repeatable)
    for (const Seen& s : seen_) {
      if (s.slot != rule->slot) continue;
      const std::string first = " (first on line " + std::to_string(s.line) + ")";
      if (s.key != name)
        return fail(field(), "'" + std::string(s.key) + "' already set the window" + first +
                                 "; causal is 'window -1 0'");
      return fail(field(), "given twice" + first);
    }
  const int n = int(args.size());
  if (n < rule->min_args || n > rule->max_args) {
    std::string usage;
    for (const CaseKey& k : kKeys)
      if (k.name == name) usage = k.usage;
    const std::string got = n == 0 ? "no value" : std::to_string(n) + (n == 1 ? " value" : " values");
    return fail(field(), "expects " + usage + ", got " + got);
  }
  if (rule->repeatable && c_.transforms.size() == size_t(kMaxTransforms))
    return fail(field(), "more than " + std::to_string(kMaxTransforms) + " transforms");
  if (!(this->*rule->read)(args)) return false;
  seen_.push_back({rule->slot, rule->name, line_});
  return true;
}

bool CaseParser::finish() {
  if (!version_line_) {
    line_ = 1;
    return fail(std::string(kMagic), "missing the version line '" + std::string(kMagic) + " " +
                                         std::to_string(kCaseVersion) + "': is this a case file?");
  }
  c_.values_q = values_one_[0].value_or(values_all_);
  c_.values_k = values_one_[1].value_or(values_all_);
  c_.values_v = values_one_[2].value_or(values_all_);
  // One seqlen stands for every sequence (batch is bounded, so is this).
  for (std::vector<int32_t>* s : {&c_.seqlens_q, &c_.seqlens_k})
    if (s->size() == 1 && c_.batch > 1 && c_.batch <= kMaxBatch) s->assign(size_t(c_.batch), s->front());
  return true;
}

// validate_case knows fields, not lines: point at the line of the key that
// set the field (or, for an oversized tensor, at the last shape key read).
void CaseParser::attribute(ParseError& e) const {
  const Seen* at = nullptr;
  if (e.field == "shape") {
    for (std::string_view k : {"batch", "heads", "seqlen_q", "seqlen_k", "head_dim", "row_gap", "layout",
                               "bool_mask", "add_mask"})
      if (const Seen* s = seen(k); s && (!at || s->line > at->line)) at = s;
  } else if (e.field.starts_with("values_") && !seen(e.field)) {
    at = seen("values");
  } else {
    at = seen(e.field);
  }
  e.line = at ? at->line : version_line_;
  if (at) e.field = std::string(at->key);
}

// ------------------------------------------------------ typed arguments --

bool CaseParser::int_arg(std::string_view tok, std::string_view what, int64_t lo, int64_t hi, int64_t* out) {
  const std::string range = " (" + std::string(what) + " is in [" + format_int(lo) + ", " + format_int(hi) + "])";
  switch (parse_int(tok, out)) {
    case NumStatus::Syntax: return fail(field(), "'" + quote(tok) + "' is not an integer" + range);
    case NumStatus::Range: return fail(field(), "'" + quote(tok) + "' is out of range" + range);
    case NumStatus::Ok: break;
  }
  if (auto why = in_range(what, *out, lo, hi); !why.empty()) return fail(field(), why);
  return true;
}

bool CaseParser::double_arg(std::string_view tok, std::string_view what, double* out) {
  switch (parse_number(tok, out)) {
    case NumStatus::Syntax:
      return fail(field(), std::string(what) + " '" + quote(tok) +
                               "' is not a number (decimal like 0.125 or 1e-3, or hex like 0x1p-3)");
    case NumStatus::Range: return fail(field(), std::string(what) + " '" + quote(tok) + "' is out of range for a double");
    case NumStatus::Ok: break;
  }
  return true;
}

template <typename E, size_t N>
bool CaseParser::word_arg(std::string_view tok, std::string_view what, const Spelling<E> (&table)[N], E* out) {
  if (auto v = lookup(table, tok)) {
    *out = *v;
    return true;
  }
  return fail(field(), std::string(what) + " must be one of " + choices(table) + ", got '" + quote(tok) + "'");
}

bool CaseParser::pattern_arg(Args args, MaskPattern* out) {
  const PatternKind* kind = find_pattern_kind(args[0]);
  if (!kind) return fail(field(), check_pattern({std::string(args[0]), {}}));  // names the known patterns
  out->kind = kind->name;
  out->args.clear();
  const Args values = args.subspan(1);
  if (values.size() < size_t(kind->min_args) || values.size() > size_t(kind->max_args))
    return fail(field(), check_pattern({out->kind, std::vector<int64_t>(values.size())}));
  for (size_t n = 0; n < values.size(); ++n) {
    const PatternArg& a = kind->args[n];
    int64_t v;
    if (!int_arg(values[n], a.name, a.lo, a.hi, &v)) return false;
    out->args.push_back(v);
  }
  if (auto why = check_pattern(*out); !why.empty()) return fail(field(), why);
  return true;
}

bool CaseParser::distribution_arg(Args args, Distribution* out) {
  out->kind = std::string(args[0]);
  const auto kinds = distribution_kinds();
  const auto kind = std::find_if(kinds.begin(), kinds.end(), [&](const DistributionKind& k) { return args[0] == k.name; });
  if (kind == kinds.end()) return fail(field(), check_distribution(*out));  // names the known distributions
  if (!double_arg(args[1], kind->param, &out->param)) return false;
  if (auto why = check_distribution(*out); !why.empty()) return fail(field(), why);
  return true;
}

// ------------------------------------------------------------ the keys --

bool CaseParser::read_kernel(Args a) {
  if (auto why = check_kernel_name(a[0]); !why.empty()) return fail(field(), why);
  c_.kernel = std::string(a[0]);
  return true;
}

bool CaseParser::read_batch(Args a) {
  int64_t b;
  if (!int_arg(a[0], "batch", 1, kMaxBatch, &b)) return false;
  c_.batch = int(b);
  return true;
}

bool CaseParser::read_heads(Args a) {
  int64_t hq, hkv;
  if (!int_arg(a[0], "heads_q", 1, kMaxHeads, &hq)) return false;
  hkv = hq;  // one value: as many K/V heads as query heads
  if (a.size() > 1 && !int_arg(a[1], "heads_kv", 1, kMaxHeads, &hkv)) return false;
  c_.heads_q = int(hq);
  c_.heads_kv = int(hkv);
  return true;
}

bool CaseParser::read_seqlens(Args a, std::vector<int32_t>* out) {
  out->clear();
  out->reserve(a.size());  // at most kMaxBatch: the rule's max_args
  for (std::string_view tok : a) {
    int64_t n;
    if (!int_arg(tok, key_, 0, kMaxSeqlen, &n)) return false;
    out->push_back(int32_t(n));
  }
  return true;
}

bool CaseParser::read_head_dim(Args a) {
  int64_t d, dv;
  if (!int_arg(a[0], "head_dim", 1, kMaxHeadDim, &d)) return false;
  dv = d;
  if (a.size() > 1 && !int_arg(a[1], "head_dim_v", 1, kMaxHeadDim, &dv)) return false;
  c_.head_dim = int(d);
  c_.head_dim_v = int(dv);
  return true;
}

bool CaseParser::read_dtype(Args a) {
  afz_dtype t[2] = {AFZ_BF16, AFZ_BF16};
  for (size_t n = 0; n < a.size(); ++n) {
    const auto d = parse_dtype(a[n]);
    if (!d) return fail(field(), "unknown dtype '" + quote(a[n]) + "' (fp32, fp16, bf16 or fp8e4m3)");
    t[n] = *d;
  }
  c_.in_dtype = t[0];
  c_.out_dtype = a.size() > 1 ? t[1] : t[0];
  return true;
}

bool CaseParser::read_scale(Args a) {
  if (a[0] == kDefault) {
    c_.scale.reset();
    return true;
  }
  double x;
  if (!double_arg(a[0], "scale", &x)) return false;
  if (!fp32_finite(x)) return fail(field(), "scale " + quote(a[0]) + " overflows fp32");
  c_.scale = x;
  return true;
}

bool CaseParser::read_softcap(Args a) {
  double x;
  if (!double_arg(a[0], "softcap", &x)) return false;
  if (!(x >= 0) || !fp32_finite(x)) return fail(field(), "softcap must be >= 0 (0: none) and finite in fp32");
  c_.softcap = x;
  return true;
}

bool CaseParser::read_causal(Args a) {
  c_.has_window = true;
  c_.window_left = -1;
  c_.window_right = 0;
  c_.align = AFZ_ALIGN_BOTTOM_RIGHT;
  return a.empty() || word_arg(a[0], "alignment", kAligns, &c_.align);
}

bool CaseParser::read_window(Args a) {
  int64_t left, right;
  if (!int_arg(a[0], "window left", -1, kMaxSeqlen, &left)) return false;
  if (!int_arg(a[1], "window right", -1, kMaxSeqlen, &right)) return false;
  c_.has_window = true;
  c_.window_left = int(left);
  c_.window_right = int(right);
  c_.align = AFZ_ALIGN_BOTTOM_RIGHT;
  return a.size() < 3 || word_arg(a[2], "alignment", kAligns, &c_.align);
}

bool CaseParser::read_bool_mask(Args a) { return pattern_arg(a, &c_.bool_mask.emplace()); }

bool CaseParser::read_add_mask(Args a) {
  AddMask& m = c_.add_mask.emplace();
  if (auto kind = lookup(kAddValues, a[0])) {
    m.value_kind = *kind;
  } else {
    m.value_kind = AddValueKind::Number;
    if (!double_arg(a[0], "add_mask value", &m.value)) return false;
    if (!fp32_finite(m.value))
      return fail(field(), "value " + quote(a[0]) + " overflows fp32 (write -inf or lowest for those)");
  }
  return pattern_arg(a.subspan(1), &m.pattern);
}

bool CaseParser::read_row_gap(Args a) {
  int64_t g;
  if (!int_arg(a[0], "row_gap", 0, kMaxRowGap, &g)) return false;
  c_.row_gap = int(g);
  return true;
}

bool CaseParser::read_transform(Args a) {
  Transform t;
  t.name = std::string(a[0]);
  if (!is_identifier(t.name)) return fail(field(), check_transform_syntax(t));
  for (std::string_view kv : a.subspan(1)) {
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos)
      return fail(field(), "transform " + t.name + ": '" + quote(kv) + "' is not KEY=VALUE");
    double value;
    const std::string key(kv.substr(0, eq));
    if (!is_identifier(key))
      return fail(field(), "transform " + t.name + ": parameter name '" + quote(key) + "' must be a lowercase identifier");
    if (!double_arg(kv.substr(eq + 1), "transform " + t.name + ": " + key, &value)) return false;
    t.params.emplace_back(key, value);
  }
  if (auto why = check_transform_syntax(t); !why.empty()) return fail(field(), why);
  if (auto why = check_transform(t); !why.empty()) return fail(field(), why);
  c_.transforms.push_back(std::move(t));
  return true;
}

bool CaseParser::read_seed(Args a) {
  switch (parse_seed(a[0], &c_.seed)) {
    case NumStatus::Syntax: return fail(field(), "'" + quote(a[0]) + "' is not a seed (decimal or 0x hex)");
    case NumStatus::Range: return fail(field(), "'" + quote(a[0]) + "' does not fit in 64 bits");
    case NumStatus::Ok: break;
  }
  return true;
}

}  // namespace

std::optional<Case> parse_case(std::string_view text, ParseError* error) {
  try {
    return CaseParser().run(text, error);
  } catch (const std::bad_alloc&) {
    // The only exception the parser can meet: every size is bounded before
    // it is allocated, so this is the machine, not the file.
    if (error) *error = ParseError{0, "", "out of memory while parsing"};
    return std::nullopt;
  }
}

// --------------------------------------------------------------- writer --

std::string write_case(const Case& c) {
  std::string out;
  auto put = [&](std::string_view key, const std::string& value) {
    out.append(key).append(" ").append(value).append("\n");
  };
  auto join = [](const std::vector<int32_t>& v) {
    std::string s;
    for (int32_t n : v) s += (s.empty() ? "" : " ") + std::to_string(n);
    return s;
  };
  // A list of equal lengths is written once: the parser gives it to every sequence.
  auto seqlens = [&](const std::vector<int32_t>& v) {
    const bool uniform = !v.empty() && std::all_of(v.begin(), v.end(), [&](int32_t n) { return n == v[0]; });
    return uniform && v.size() == size_t(c.batch) ? std::to_string(v[0]) : join(v);
  };
  auto pattern = [](const MaskPattern& p) {
    std::string s = p.kind;
    for (int64_t a : p.args) s += " " + format_int(a);
    return s;
  };
  auto dist = [](const Distribution& d) { return d.kind + " " + format_double(d.param); };
  auto pair = [](int a, int b) { return std::to_string(a) + (a == b ? "" : " " + std::to_string(b)); };

  for (const std::string& p : c.provenance) out += p.empty() ? "# provenance:\n" : "# provenance: " + p + "\n";
  put(kMagic, std::to_string(kCaseVersion));
  if (!c.kernel.empty()) put("kernel", c.kernel);
  if (c.pass != Pass::Fwd) put("pass", std::string(spell(kPasses, c.pass)));
  put("batch", std::to_string(c.batch));
  put("heads", pair(c.heads_q, c.heads_kv));
  put("seqlen_q", seqlens(c.seqlens_q));
  put("seqlen_k", seqlens(c.seqlens_k));
  put("head_dim", pair(c.head_dim, c.head_dim_v));
  put("dtype", std::string(dtype_name(c.in_dtype)) +
                   (c.out_dtype == c.in_dtype ? "" : " " + std::string(dtype_name(c.out_dtype))));
  put("scale", c.scale ? format_double(*c.scale) : std::string(kDefault));
  put("softcap", format_double(c.softcap));
  if (c.has_window) {
    const std::string align(spell(kAligns, c.align));
    if (c.window_left == -1 && c.window_right == 0) put("causal", align);
    else put("window", std::to_string(c.window_left) + " " + std::to_string(c.window_right) + " " + align);
  }
  if (c.bool_mask) put("bool_mask", pattern(*c.bool_mask));
  if (c.add_mask) {
    const AddMask& a = *c.add_mask;
    const std::string value = a.value_kind == AddValueKind::Number ? format_double(a.value)
                                                                   : std::string(spell(kAddValues, a.value_kind));
    put("add_mask", value + " " + pattern(a.pattern));
  }
  put("layout", std::string(spell(kLayouts, c.layout)));
  put("row_gap", std::to_string(c.row_gap));
  put("kv_broadcast", std::string(spell(kBroadcasts, c.kv_broadcast)));
  put("poison", std::string(spell(kPoisons, c.poison)));
  if (c.values_q == c.values_k && c.values_q == c.values_v) {
    put("values", dist(c.values_q));
  } else {
    put("values_q", dist(c.values_q));
    put("values_k", dist(c.values_k));
    put("values_v", dist(c.values_v));
  }
  // Written only when not the default, so forward-only case files keep their text.
  if (c.values_do != Distribution{}) put("values_do", dist(c.values_do));
  for (const Transform& t : c.transforms) {
    std::string s = t.name;
    for (const auto& [k, v] : t.params) s += " " + k + "=" + format_double(v);
    put("transform", s);
  }
  put("seed", format_seed(c.seed));
  return out;
}

}  // namespace afz
