// The case text format: round trips, pinned files, every error path, and
// inputs meant to hurt (huge numbers, NUL bytes, very long lines).
#include "harness/case/case_io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "harness/case/rng.h"
#include "harness/case/transforms.h"
#include "kernels/abi/dtype.h"

namespace afz {
namespace {

namespace fs = std::filesystem;
using namespace std::literals;
const fs::path kExamples = fs::path(ATTNFUZZ_SOURCE_DIR) / "tests/harness/case/case_io";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Case parse_ok(std::string_view text) {
  ParseError e;
  auto c = parse_case(text, &e);
  EXPECT_TRUE(c.has_value()) << e.format("<text>") << "\n" << text;
  return c.value_or(Case{});
}

ParseError parse_err(std::string_view text) {
  ParseError e;
  auto c = parse_case(text, &e);
  EXPECT_FALSE(c.has_value()) << "parsed, but should not have:\n" << text;
  return e;
}

// ------------------------------------------------------ random cases --

// Draws from one counter stream; every call takes the next counter.
struct Draw {
  CounterRng rng;
  uint64_t n = 0;
  uint64_t below(uint64_t k) { return rng.below(n++, k); }
  int64_t range(int64_t lo, int64_t hi) { return lo + int64_t(below(uint64_t(hi - lo + 1))); }
  bool chance(int permil) { return int(below(1000)) < permil; }
  uint64_t bits() { return rng.bits(n++); }
  template <typename T, size_t N>
  const T& pick(const T (&items)[N]) { return items[below(N)]; }

  // Doubles of every shape the writer must get exactly right: short
  // decimals, powers of two, subnormals, -0, and arbitrary bit patterns.
  double any_double() {
    switch (below(6)) {
      case 0: return double(range(-100000, 100000)) / 1000;
      case 1: return exp2i(int(range(-1074, 1023))) * (chance(500) ? -1 : 1);
      case 2: return double_of(bits() & ((uint64_t{1} << 52) - 1));  // subnormal (or 0)
      case 3: return -0.0;
      default:
        while (true) {
          const double x = double_of(bits());
          if (std::isfinite(x)) return x;
        }
    }
  }
  double fp32_double() {  // finite after rounding to fp32
    while (true) {
      const double x = any_double();
      if (std::isfinite(round_to(AFZ_F32, x))) return x;
    }
  }
  double nonnegative_double() { return std::fabs(any_double()); }
  std::string text(size_t max_len, std::string_view alphabet) {
    std::string s(1 + below(max_len), ' ');
    for (char& ch : s) ch = alphabet[below(alphabet.size())];
    return s;
  }
};

constexpr afz_dtype kDtypes[] = {AFZ_F32, AFZ_F16, AFZ_BF16, AFZ_F8E4M3};
constexpr Layout kLayoutsAll[] = {Layout::BHSD, Layout::BSHD, Layout::PackedQKV};
constexpr KvBroadcast kBroadcastsAll[] = {KvBroadcast::None, KvBroadcast::Heads, KvBroadcast::Batch};
constexpr Poison kPoisonsAll[] = {Poison::NaN, Poison::Inf, Poison::None};
constexpr Pass kPassesAll[] = {Pass::Fwd, Pass::Bwd, Pass::Both};
constexpr afz_align kAlignsAll[] = {AFZ_ALIGN_TOP_LEFT, AFZ_ALIGN_BOTTOM_RIGHT};
constexpr std::string_view kPrintable =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 =:/.,-_#\t()[]'\"";

MaskPattern random_pattern(Draw& d) {
  const auto kinds = mask_pattern_kinds();
  const PatternKind& k = kinds[d.below(kinds.size())];
  MaskPattern p{k.name, {}};
  while (true) {  // rejection: the order constraints hold for a good share of draws
    p.args.resize(size_t(d.range(k.min_args, k.max_args)));
    for (size_t a = 0; a < p.args.size(); ++a) {
      const int64_t lo = k.args[a].lo, hi = k.args[a].hi;
      p.args[a] = d.chance(100) ? (d.chance(500) ? lo : hi) : d.range(std::max<int64_t>(lo, -64), std::min<int64_t>(hi, 300));
    }
    if (check_pattern(p).empty()) return p;
  }
}

Distribution random_distribution(Draw& d) {
  const auto kinds = distribution_kinds();
  Distribution x{kinds[d.below(kinds.size())].name, 0};
  x.param = x.kind == "int"        ? double(d.range(0, kMaxIntDistribution))
            : x.kind == "few_rows" ? double(d.range(0, kPermilScale))
                                   : d.nonnegative_double();
  return x;
}

// A case that is valid by construction, drawn from everything the format can say.
Case random_case(uint64_t seed) {
  Draw d{CounterRng(seed, 0xca5e)};
  Case c;
  for (int n = int(d.below(3)); n > 0; --n) {
    std::string p = d.text(60, kPrintable);
    while (!p.empty() && (p.back() == ' ' || p.back() == '\t')) p.pop_back();
    while (!p.empty() && (p.front() == ' ' || p.front() == '\t')) p.erase(p.begin());
    c.provenance.push_back(p);
  }
  if (d.chance(500)) c.kernel = d.text(20, "abcdefghijklmnopqrstuvwxyz_0123456789.+-/:");
  c.batch = int(d.chance(50) ? kMaxBatch : d.range(1, 5));
  c.heads_kv = int(d.range(1, 4));
  c.heads_q = c.heads_kv * int(d.range(1, 4));
  const bool uniform = d.chance(300);
  for (auto* s : {&c.seqlens_q, &c.seqlens_k}) {
    s->assign(size_t(c.batch), int32_t(d.range(0, 300)));
    if (!uniform)
      for (int32_t& n : *s) n = int32_t(d.chance(100) ? 0 : d.range(0, c.batch > 8 ? 3 : 300));
  }
  c.head_dim = int(d.range(1, 256));
  c.head_dim_v = d.chance(300) ? int(d.range(1, 256)) : c.head_dim;
  c.in_dtype = d.pick(kDtypes);
  c.out_dtype = d.chance(300) ? d.pick(kDtypes) : c.in_dtype;
  if (d.chance(500)) c.scale = d.fp32_double();
  if (d.chance(300)) c.softcap = std::fabs(d.fp32_double());
  switch (d.below(3)) {
    case 0: break;
    case 1: c.has_window = true, c.window_left = -1, c.window_right = 0, c.align = d.pick(kAlignsAll); break;
    default:
      c.has_window = true;
      c.window_left = int(d.range(-1, 300));
      c.window_right = int(d.range(-1, 300));
      c.align = d.pick(kAlignsAll);
  }
  if (d.chance(400)) c.bool_mask = random_pattern(d);
  if (d.chance(400)) {
    AddMask& a = c.add_mask.emplace();
    a.value_kind = AddValueKind(d.below(3));
    if (a.value_kind == AddValueKind::Number) a.value = d.fp32_double();
    a.pattern = random_pattern(d);
  }
  c.layout = d.pick(kLayoutsAll);
  c.row_gap = int(d.chance(100) ? kMaxRowGap : d.range(0, 20));
  c.kv_broadcast = d.pick(kBroadcastsAll);
  c.poison = d.pick(kPoisonsAll);
  c.pass = d.pick(kPassesAll);
  if (c.layout == Layout::PackedQKV) c.head_dim_v = c.head_dim, c.kv_broadcast = KvBroadcast::None;
  c.values_q = random_distribution(d);
  c.values_k = d.chance(500) ? c.values_q : random_distribution(d);
  c.values_v = d.chance(500) ? c.values_q : random_distribution(d);
  for (int n = int(d.below(4)); n > 0; --n) {
    const TransformDef& def = transform_table()[d.below(transform_table().size())];
    Transform t{def.name, {}};
    for (const TransformParam& p : def.params)
      if (d.chance(600)) t.params.emplace_back(p.key, d.any_double());
    c.transforms.push_back(t);
  }
  c.seed = d.bits();
  // The widest row gap with the largest shapes can pass the element limit.
  if (auto e = validate_case(c); e && e->field == "shape") c.row_gap = int(d.range(0, 20));
  return c;
}

// One field of a valid case spoiled, often (not always) making it invalid.
Case spoiled_case(uint64_t seed) {
  Case c = random_case(seed);
  Draw d{CounterRng(seed, 0x5b01)};
  const double nasty[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                          -1.0, 1e300, -0.0, 0.5};
  switch (d.below(16)) {
    case 0: c.batch = int(d.range(-2, 2 * kMaxBatch)); break;
    case 1: c.heads_q = int(d.range(0, 300)); break;
    case 2: c.seqlens_q.push_back(int32_t(d.range(-5, 5))); break;
    case 3: c.seqlens_k[0] = int32_t(d.range(-1, 2 * kMaxSeqlen)); break;
    case 4: c.head_dim = int(d.range(-1, 2 * kMaxHeadDim)); break;
    case 5: c.scale = d.pick(nasty); break;
    case 6: c.softcap = d.pick(nasty); break;
    case 7: c.window_left = int(d.range(-3, 3)), c.align = d.pick(kAlignsAll); break;
    case 8: c.bool_mask = MaskPattern{d.chance(500) ? "band" : "rows_every", {int64_t(d.bits()), d.range(-2, 2)}}; break;
    case 9: c.add_mask = AddMask{random_pattern(d), AddValueKind(d.below(3)), d.pick(nasty)}; break;
    case 10: c.row_gap = int(d.range(-1, 2 * kMaxRowGap)); break;
    case 11: c.values_v = Distribution{d.chance(500) ? "int" : "cauchy", d.pick(nasty)}; break;
    case 12: c.transforms.push_back(Transform{d.chance(500) ? "Late_max" : "late_max", {{"count", d.pick(nasty)}}}); break;
    case 13: c.provenance.push_back(d.chance(500) ? " padded" : "two\nlines"); break;
    case 14: c.kernel = d.chance(500) ? "a b" : "x#y"; break;
    default: c.layout = Layout::PackedQKV; break;
  }
  return c;
}

// -------------------------------------------------------------- tests --

TEST(CaseIo, VersionLineAloneGivesTheDefaults) {
  EXPECT_EQ(parse_ok("attnfuzz-case 1\n"), Case{});
  EXPECT_EQ(parse_ok("attnfuzz-case 1"), Case{});  // no final newline
  EXPECT_EQ(parse_ok("# c\n\n  attnfuzz-case \t 1  # trailing comment\n"), Case{});
  EXPECT_EQ(parse_ok("\xef\xbb\xbf" "attnfuzz-case 1\n"), Case{});  // a UTF-8 byte order mark is skipped
}

TEST(CaseIo, EveryKeyReadsIntoItsField) {
  const Case c = parse_ok(read_file(kExamples / "everything.case"));
  EXPECT_EQ(c.provenance, (std::vector<std::string>{"hand-written for tests/harness/case_io_test.cpp",
                                                     "a second one, indented with a tab"}));
  EXPECT_EQ(c.kernel, "cpu_tiled");
  EXPECT_EQ(c.pass, Pass::Both);
  EXPECT_EQ(c.batch, 3);
  EXPECT_EQ(c.heads_q, 8);
  EXPECT_EQ(c.heads_kv, 2);
  EXPECT_EQ(c.seqlens_q, (std::vector<int32_t>{128, 0, 77}));
  EXPECT_EQ(c.seqlens_k, (std::vector<int32_t>{1000, 1000, 1000}));  // one value for all
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.head_dim_v, 32);
  EXPECT_EQ(c.in_dtype, AFZ_F16);
  EXPECT_EQ(c.out_dtype, AFZ_F32);
  EXPECT_EQ(c.scale, 0.125);
  EXPECT_EQ(c.softcap, 50.0);
  EXPECT_TRUE(c.has_window);
  EXPECT_EQ(c.window_left, 16);
  EXPECT_EQ(c.window_right, 0);
  EXPECT_EQ(c.align, AFZ_ALIGN_TOP_LEFT);
  EXPECT_EQ(c.bool_mask, (MaskPattern{"key_block", {64, 0, 15, 2}}));
  EXPECT_EQ(c.add_mask, (AddMask{{"rows_every", {7, 3}}, AddValueKind::Number, -1e4}));
  EXPECT_EQ(c.layout, Layout::BSHD);
  EXPECT_EQ(c.row_gap, 3);
  EXPECT_EQ(c.kv_broadcast, KvBroadcast::Heads);
  EXPECT_EQ(c.poison, Poison::Inf);
  EXPECT_EQ(c.values_q, (Distribution{"uniform", 2}));
  EXPECT_EQ(c.values_k, (Distribution{"uniform", 2}));
  EXPECT_EQ(c.values_v, (Distribution{"int", 3}));  // values_v overrides values, whatever the order
  ASSERT_EQ(c.transforms.size(), 2u);
  EXPECT_EQ(c.transforms[0], (Transform{"late_max", {{"count", 5}, {"boost", 20}}}));
  EXPECT_EQ(c.transforms[1], (Transform{"scale_q", {{"factor", 1e4}}}));
  EXPECT_EQ(c.seed, 42u);
}

TEST(CaseIo, SmallForms) {
  EXPECT_EQ(parse_ok("attnfuzz-case 1\ncausal\n").align, AFZ_ALIGN_BOTTOM_RIGHT);
  const Case causal = parse_ok("attnfuzz-case 1\ncausal top_left\n");
  EXPECT_TRUE(causal.has_window);
  EXPECT_EQ(causal.window_left, -1);
  EXPECT_EQ(causal.window_right, 0);
  EXPECT_EQ(causal.align, AFZ_ALIGN_TOP_LEFT);
  // `window -1 0` is the same case as `causal`, and is written as causal.
  EXPECT_EQ(parse_ok("attnfuzz-case 1\nwindow -1 0 top_left\n"), causal);
  EXPECT_NE(write_case(causal).find("\ncausal top_left\n"), std::string::npos);
  EXPECT_EQ(parse_ok("attnfuzz-case 1\nheads 4\n").heads_kv, 4);
  EXPECT_EQ(parse_ok("attnfuzz-case 1\nhead_dim 96\n").head_dim_v, 96);
  EXPECT_EQ(parse_ok("attnfuzz-case 1\ndtype fp32\n").out_dtype, AFZ_F32);
  EXPECT_EQ(parse_ok("attnfuzz-case 1\nscale default\n").scale, std::nullopt);
  EXPECT_EQ(parse_ok("attnfuzz-case 1\nscale 0\n").scale, 0.0);
  EXPECT_EQ(parse_ok("attnfuzz-case 1\nseed 0xFFFFFFFFFFFFFFFF\n").seed, ~uint64_t{0});
  EXPECT_EQ(parse_ok("attnfuzz-case 1\nseed 18446744073709551615\n").seed, ~uint64_t{0});
  EXPECT_EQ(parse_ok("attnfuzz-case 1\r\nbatch 2\r\n").batch, 2);  // CRLF
  EXPECT_EQ(parse_ok("attnfuzz-case 1\nadd_mask -inf block 0 1 0 1\n").add_mask->value_kind, AddValueKind::NegInf);
  EXPECT_EQ(parse_ok("attnfuzz-case 1\nadd_mask lowest random 10\n").add_mask->value_kind, AddValueKind::Lowest);
  EXPECT_EQ(parse_ok("attnfuzz-case 1\ntransform ties\n").transforms[0], (Transform{"ties", {}}));
  EXPECT_EQ(parse_ok("attnfuzz-case 1\n# provenance:\n").provenance, std::vector<std::string>{""});
  EXPECT_EQ(parse_ok("attnfuzz-case 1\n#provenance:x  y \n").provenance, std::vector<std::string>{"x  y"});
  // Not provenance: a trailing comment, and a different word.
  EXPECT_TRUE(parse_ok("attnfuzz-case 1 # provenance: no\n# provenances: no\n").provenance.empty());
}

TEST(CaseIo, PinnedExampleFilesAreCanonical) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(kExamples)) {
    if (entry.path().extension() != ".case") continue;
    ++files;
    SCOPED_TRACE(entry.path().filename().string());
    const std::string text = read_file(entry.path());
    const Case c = parse_ok(text);
    fs::path canonical = entry.path();
    canonical.replace_extension(".canonical");
    const std::string expected = fs::exists(canonical) ? read_file(canonical) : text;
    EXPECT_EQ(write_case(c), expected);
    EXPECT_EQ(parse_ok(expected), c);
  }
  EXPECT_GE(files, 5);
}

TEST(CaseIo, RandomValidCasesRoundTripExactly) {
  constexpr int kCases = 3000;
  for (uint64_t seed = 0; seed < kCases; ++seed) {
    const Case c = random_case(seed);
    const auto invalid = validate_case(c);
    ASSERT_FALSE(invalid) << "seed " << seed << ": " << invalid->format("random");
    const std::string text = write_case(c);
    ParseError e;
    const auto back = parse_case(text, &e);
    ASSERT_TRUE(back) << "seed " << seed << ": " << e.format("written") << "\n" << text;
    ASSERT_EQ(*back, c) << "seed " << seed << "\n" << text << "\n---\n" << write_case(*back);
    ASSERT_EQ(write_case(*back), text) << "seed " << seed;
  }
}

TEST(CaseIo, EveryCaseThatValidatesRoundTrips) {
  constexpr int kCases = 3000;
  int valid = 0;
  for (uint64_t seed = 0; seed < kCases; ++seed) {
    const Case c = spoiled_case(seed);
    if (validate_case(c)) continue;
    ++valid;
    ParseError e;
    const auto back = parse_case(write_case(c), &e);
    ASSERT_TRUE(back) << "seed " << seed << ": " << e.format("written") << "\n" << write_case(c);
    ASSERT_EQ(*back, c) << "seed " << seed << "\n" << write_case(c);
  }
  // Both outcomes occur, so the property is exercised on both sides.
  EXPECT_GT(valid, kCases / 10);
  EXPECT_LT(valid, kCases * 9 / 10);
}

TEST(CaseIo, NumbersAreExactAndStrict) {
  EXPECT_EQ(parse_double("0x1p-3"), 0.125);
  EXPECT_EQ(parse_double("-0x1.8p1"), -3.0);
  EXPECT_EQ(parse_double("0X.8P1"), 1.0);
  EXPECT_EQ(parse_double("0.1"), 0.1);
  EXPECT_EQ(parse_double("1e-320"), 1e-320);  // subnormal
  EXPECT_EQ(parse_double("0x1p-1074"), 0x1p-1074);
  EXPECT_EQ(parse_double("1.7976931348623157e308"), std::numeric_limits<double>::max());
  EXPECT_EQ(parse_double(".5"), 0.5);
  EXPECT_TRUE(std::signbit(*parse_double("-0")));
  // Correct rounding: the decimal halfway between 1 and its successor, plus a hair.
  EXPECT_EQ(parse_double("1.00000000000000011102230246251565404236316680908203125"), 1.0);  // tie: even
  EXPECT_EQ(parse_double("1.000000000000000111022302462515654042363166809082031251"), 1.0 + 0x1p-52);
  for (std::string_view bad : {"", "-", "+1", "--1", "0x-1", "-0x-1", "0x", "1e", "1,5", ".", "e5", "inf", "-inf",
                               "nan", "infinity", "1e400", "-1e400", "1e-400", "0x1p99999", "1.5.2", "1 ", " 1", "0x1q"})
    EXPECT_FALSE(parse_double(bad)) << "'" << bad << "'";
  EXPECT_EQ(format_double(0.1), "0.1");
  EXPECT_EQ(format_double(-1e4), "-10000");
  EXPECT_EQ(format_double(0x1p-1074), "5e-324");
  EXPECT_EQ(format_double(-0.0), "-0");
  // Shortest form parses back to the same bits, over many bit patterns.
  CounterRng rng(7, 7);
  for (uint64_t n = 0; n < 20000; ++n) {
    const double x = double_of(rng.bits(n));
    if (!std::isfinite(x)) continue;
    const auto back = parse_double(format_double(x));
    ASSERT_TRUE(back) << format_double(x);
    ASSERT_EQ(bits_of(*back), bits_of(x)) << format_double(x);
  }
}

struct ErrorCase {
  std::string_view text;
  int line;
  const char* field;
  const char* message;  // a substring of the message
};

// Every error path, with the line and field it must name.
const ErrorCase kErrors[] = {
    // Structure.
    {"", 1, "attnfuzz-case", "missing the version line 'attnfuzz-case 1'"},
    {"# only a comment\n\n", 1, "attnfuzz-case", "missing the version line"},
    {"batch 2\nattnfuzz-case 1\n", 1, "attnfuzz-case", "before any key, found 'batch'"},
    {"attnfuzz-case 2\n", 1, "attnfuzz-case", "version 2 is not supported: this attnfuzz reads version 1"},
    {"attnfuzz-case one\n", 1, "attnfuzz-case", "version 'one' is not a number"},
    {"attnfuzz-case\n", 1, "attnfuzz-case", "expects one version number"},
    {"attnfuzz-case 1 1\n", 1, "attnfuzz-case", "expects one version number"},
    {"attnfuzz-case 1\nattnfuzz-case 1\n", 2, "attnfuzz-case", "appears twice (first on line 1)"},
    {"attnfuzz-case 1\nbatchh 2\n", 2, "batchh", "unknown key; did you mean 'batch'?"},
    {"attnfuzz-case 1\ncolour blue\n", 2, "colour", "unknown key"},
    {"attnfuzz-case 1\nbatch 2\nbatch 3\n", 3, "batch", "given twice (first on line 2)"},
    {"attnfuzz-case 1\ncausal\nwindow 1 1\n", 3, "window", "'causal' already set the window (first on line 2)"},
    {"attnfuzz-case 1\nbatch\n", 2, "batch", "expects B, got no value"},
    {"attnfuzz-case 1\nheads 1 2 3\n", 2, "heads", "expects HQ [HKV], got 3 values"},
    {"attnfuzz-case 1\nvalues normal\n", 2, "values", "expects DIST PARAM, got 1 value"},
    {"attnfuzz-case 1\nbatch 2\0\n"sv, 2, "", "control character 0x00"},
    {"attnfuzz-case 1\nbatch 2\r\r\n", 2, "", "control character 0x0d"},
    {"attnfuzz-case 1\n# bell \a in a comment\n", 2, "", "control character 0x07"},
    // Integers and ranges.
    {"attnfuzz-case 1\nbatch two\n", 2, "batch", "'two' is not an integer (batch is in [1, 1024])"},
    {"attnfuzz-case 1\nbatch 2.0\n", 2, "batch", "'2.0' is not an integer"},
    {"attnfuzz-case 1\nbatch +2\n", 2, "batch", "'+2' is not an integer"},
    {"attnfuzz-case 1\nbatch 0\n", 2, "batch", "batch must be in [1, 1024], got 0"},
    {"attnfuzz-case 1\nbatch 2147483648\n", 2, "batch", "got 2147483648"},
    {"attnfuzz-case 1\nbatch 99999999999999999999999\n", 2, "batch", "is out of range (batch is in [1, 1024])"},
    {"attnfuzz-case 1\nheads 300\n", 2, "heads", "heads_q must be in [1, 256], got 300"},
    {"attnfuzz-case 1\nheads 4 0\n", 2, "heads", "heads_kv must be in [1, 256], got 0"},
    {"attnfuzz-case 1\nseqlen_q 1 -1\n", 2, "seqlen_q", "seqlen_q must be in [0, 1048576], got -1"},
    {"attnfuzz-case 1\nseqlen_k 1048577\n", 2, "seqlen_k", "got 1048577"},
    {"attnfuzz-case 1\nhead_dim 0\n", 2, "head_dim", "head_dim must be in [1, 1024], got 0"},
    {"attnfuzz-case 1\nhead_dim 64 2048\n", 2, "head_dim", "head_dim_v must be in [1, 1024], got 2048"},
    {"attnfuzz-case 1\nrow_gap -1\n", 2, "row_gap", "row_gap must be in [0, 65536], got -1"},
    {"attnfuzz-case 1\nwindow -2 0\n", 2, "window", "window left must be in [-1, 1048576], got -2"},
    {"attnfuzz-case 1\nwindow 0 x\n", 2, "window", "'x' is not an integer"},
    {"attnfuzz-case 1\nseed -1\n", 2, "seed", "'-1' is not a seed"},
    {"attnfuzz-case 1\nseed 0x1ffffffffffffffff\n", 2, "seed", "does not fit in 64 bits"},
    {"attnfuzz-case 1\nseed 0xg\n", 2, "seed", "is not a seed"},
    // Words.
    {"attnfuzz-case 1\ndtype fp64\n", 2, "dtype", "unknown dtype 'fp64'"},
    {"attnfuzz-case 1\ndtype bf16 u8\n", 2, "dtype", "unknown dtype 'u8'"},
    {"attnfuzz-case 1\nlayout BHSD\n", 2, "layout", "layout must be one of bhsd, bshd, packed_qkv, got 'BHSD'"},
    {"attnfuzz-case 1\nkv_broadcast all\n", 2, "kv_broadcast", "must be one of none, heads, batch"},
    {"attnfuzz-case 1\npoison zero\n", 2, "poison", "must be one of nan, inf, none"},
    {"attnfuzz-case 1\npass sideways\n", 2, "pass", "pass must be one of fwd, bwd, both, got 'sideways'"},
    {"attnfuzz-case 1\ncausal diagonal\n", 2, "causal", "alignment must be one of top_left, bottom_right"},
    {"attnfuzz-case 1\nwindow 1 1 left\n", 2, "window", "alignment must be one of"},
    {"attnfuzz-case 1\nkernel a\xff\n", 2, "kernel", "kernel name 'a\\xff' must be printable ASCII"},
    // Floats.
    {"attnfuzz-case 1\nscale fast\n", 2, "scale", "scale 'fast' is not a number"},
    {"attnfuzz-case 1\nscale inf\n", 2, "scale", "is not a number"},
    {"attnfuzz-case 1\nscale 1e999\n", 2, "scale", "scale '1e999' is out of range for a double"},
    {"attnfuzz-case 1\nscale 1e39\n", 2, "scale", "scale 1e39 overflows fp32"},
    {"attnfuzz-case 1\nsoftcap -1\n", 2, "softcap", "softcap must be >= 0"},
    {"attnfuzz-case 1\nsoftcap nan\n", 2, "softcap", "is not a number"},
    // Masks.
    {"attnfuzz-case 1\nbool_mask stripes 3\n", 2, "bool_mask", "unknown mask pattern 'stripes' (one of: rows_every,"},
    {"attnfuzz-case 1\nbool_mask rows_every\n", 2, "bool_mask", "pattern rows_every takes K [OFFSET], got 0 values"},
    {"attnfuzz-case 1\nbool_mask block 0 1 2\n", 2, "bool_mask", "pattern block takes I0 I1 J0 J1, got 3 values"},
    {"attnfuzz-case 1\nbool_mask rows_every 0\n", 2, "bool_mask", "K must be in [1, 1048576], got 0"},
    {"attnfuzz-case 1\nbool_mask rows_every 7 7\n", 2, "bool_mask", "pattern rows_every needs OFFSET < K, got 7 and 7"},
    {"attnfuzz-case 1\nbool_mask band 3 -3\n", 2, "bool_mask", "pattern band needs LO <= HI, got 3 and -3"},
    {"attnfuzz-case 1\nbool_mask block 0 1 5 5\n", 2, "bool_mask", "pattern block needs J0 < J1, got 5 and 5"},
    {"attnfuzz-case 1\nbool_mask random 1001\n", 2, "bool_mask", "PERMIL must be in [0, 1000], got 1001"},
    {"attnfuzz-case 1\nbool_mask key_block 64 9 8 0\n", 2, "bool_mask", "needs I0 <= I1, got 9 and 8"},
    {"attnfuzz-case 1\nbool_mask key_block 0 0 8 0\n", 2, "bool_mask", "BC must be in [1, 1048576], got 0"},
    {"attnfuzz-case 1\nadd_mask -inf\n", 2, "add_mask", "expects -inf | lowest | X  KIND ARGS..., got 1 value"},
    {"attnfuzz-case 1\nadd_mask huge rows_every 2\n", 2, "add_mask", "add_mask value 'huge' is not a number"},
    {"attnfuzz-case 1\nadd_mask 1e39 rows_every 2\n", 2, "add_mask", "value 1e39 overflows fp32 (write -inf or lowest"},
    {"attnfuzz-case 1\nadd_mask -1e4 band 0\n", 2, "add_mask", "pattern band takes LO HI, got 1 value"},
    // Values and transforms.
    {"attnfuzz-case 1\nvalues cauchy 1\n", 2, "values", "unknown distribution 'cauchy' (one of: normal, uniform, int, few_rows)"},
    {"attnfuzz-case 1\nvalues_do few_rows 1001\n", 2, "values_do", "few_rows PERMIL must be a whole number <= 1000, got 1001"},
    {"attnfuzz-case 1\nvalues_do few_rows 2.5\n", 2, "values_do", "few_rows PERMIL must be a whole number <= 1000, got 2.5"},
    {"attnfuzz-case 1\nvalues_k normal -1\n", 2, "values_k", "normal SIGMA must be finite and >= 0, got -1"},
    {"attnfuzz-case 1\nvalues_v int 2.5\n", 2, "values_v", "int R must be a whole number <= 16777216, got 2.5"},
    {"attnfuzz-case 1\nvalues_q int 16777217\n", 2, "values_q", "got 16777217"},
    {"attnfuzz-case 1\ntransform Late_max\n", 2, "transform", "transform name 'Late_max' must be a lowercase identifier"},
    {"attnfuzz-case 1\ntransform late_max count\n", 2, "transform", "transform late_max: 'count' is not KEY=VALUE"},
    {"attnfuzz-case 1\ntransform late_max Count=1\n", 2, "transform", "parameter name 'Count' must be a lowercase"},
    {"attnfuzz-case 1\ntransform late_max count=five\n", 2, "transform", "transform late_max: count 'five' is not a number"},
    {"attnfuzz-case 1\ntransform late_max count=1 count=2\n", 2, "transform", "parameter count given twice"},
    {"attnfuzz-case 1\ntransform lat_max\n", 2, "transform", "unknown transform 'lat_max'"},
    {"attnfuzz-case 1\ntransform late_max cnt=3\n", 2, "transform", "transform 'late_max' has no parameter 'cnt'"},
    // Semantic checks (validate_case), pointed at the key's line.
    {"attnfuzz-case 1\n\nheads 6 4\n", 3, "heads", "heads_q 6 is not a multiple of heads_kv 4"},
    {"attnfuzz-case 1\nseqlen_q 1 2 3\nbatch 2\n", 2, "seqlen_q", "3 values for batch 2 (give one per sequence"},
    {"attnfuzz-case 1\nbatch 2\nseqlen_k 5 6 7\n", 3, "seqlen_k", "3 values for batch 2"},
    {"attnfuzz-case 1\nhead_dim 64 32\nlayout packed_qkv\n", 3, "layout", "packed_qkv needs head_dim == head_dim_v"},
    {"attnfuzz-case 1\nlayout packed_qkv\nkv_broadcast heads\n", 3, "kv_broadcast", "broadcast needs layout bhsd"},
    {"attnfuzz-case 1\nbatch 1024\nheads 256\nseqlen_q 16384\n", 4, "seqlen_q",
     "q needs 274877906944 elements (batch 1024 x heads_q 256 x seqlen_q 16384 x row 64); at most 4294967296"},
    {"attnfuzz-case 1\nrow_gap 65536\nbatch 1024\nheads 256\n", 4, "heads", "q needs"},
    {"attnfuzz-case 1\nseqlen_q 65537\nseqlen_k 65537\nbool_mask random 5\n", 4, "bool_mask",
     "mask needs 4295098369 elements"},
};

TEST(CaseIo, EveryErrorNamesItsLineAndField) {
  for (const ErrorCase& ec : kErrors) {
    SCOPED_TRACE(std::string(ec.text));
    const ParseError e = parse_err(ec.text);
    EXPECT_EQ(e.line, ec.line);
    EXPECT_EQ(e.field, ec.field);
    EXPECT_NE(e.message.find(ec.message), std::string::npos) << "message: " << e.message;
    const std::string one_line = e.format("x.case");
    EXPECT_EQ(one_line.find('\n'), std::string::npos) << one_line;
  }
}

TEST(CaseIo, ErrorFormatIsOneLineWithFileLineAndField) {
  EXPECT_EQ((ParseError{3, "batch", "batch must be in [1, 1024], got 0"}).format("cases/a.case"),
            "cases/a.case:3: field 'batch': batch must be in [1, 1024], got 0");
  EXPECT_EQ((ParseError{2, "", "control character 0x00"}).format("a.case"), "a.case:2: control character 0x00");
  EXPECT_EQ((ParseError{0, "heads", "not a multiple"}).format("mem"), "mem: field 'heads': not a multiple");
  ParseError e;
  parse_case("attnfuzz-case 1\n\n\nbatch 0\n", &e);
  EXPECT_EQ(e.format("b.case"), "b.case:4: field 'batch': batch must be in [1, 1024], got 0");
}

TEST(CaseIo, ValidateNamesTheFieldOfInMemoryCases) {
  auto field_of = [](const Case& c) {
    const auto e = validate_case(c);
    EXPECT_TRUE(e) << write_case(c);
    if (e) {
      EXPECT_EQ(e->line, 0);
    }
    return e ? e->field : std::string("(valid)");
  };
  EXPECT_FALSE(validate_case(Case{}));
  Case c;
  c.has_window = false, c.align = AFZ_ALIGN_TOP_LEFT;  // would not survive the file
  EXPECT_EQ(field_of(c), "window");
  c = Case{}, c.add_mask = AddMask{{"rows_every", {2}}, AddValueKind::Lowest, 5.0};
  EXPECT_EQ(field_of(c), "add_mask");
  c = Case{}, c.add_mask = AddMask{{"rows_every", {2}}, AddValueKind::Number, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_EQ(field_of(c), "add_mask");
  c = Case{}, c.provenance = {"two\nlines"};
  EXPECT_EQ(field_of(c), "provenance");
  c = Case{}, c.provenance = {"trailing "};
  EXPECT_EQ(field_of(c), "provenance");
  c = Case{}, c.kernel = "has space";
  EXPECT_EQ(field_of(c), "kernel");
  c = Case{}, c.kernel = std::string(kMaxKernelName + 1, 'k');
  EXPECT_EQ(field_of(c), "kernel");
  c = Case{}, c.batch = 2;  // seqlens still hold one value: only the parser broadcasts it
  EXPECT_EQ(field_of(c), "seqlen_q");
  c = Case{}, c.in_dtype = AFZ_U8;
  EXPECT_EQ(field_of(c), "dtype");
  c = Case{}, c.scale = std::numeric_limits<double>::infinity();
  EXPECT_EQ(field_of(c), "scale");
  c = Case{}, c.scale = 3.5e38;  // finite double, infinite in fp32
  EXPECT_EQ(field_of(c), "scale");
  c = Case{}, c.softcap = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(field_of(c), "softcap");
  c = Case{}, c.values_v = {"normal", std::numeric_limits<double>::quiet_NaN()};
  EXPECT_EQ(field_of(c), "values_v");
  c = Case{}, c.transforms.assign(kMaxTransforms + 1, Transform{"ties", {}});
  EXPECT_EQ(field_of(c), "transform");
  c = Case{}, c.transforms = {Transform{"late_max", {{"count", std::numeric_limits<double>::infinity()}}}};
  EXPECT_EQ(field_of(c), "transform");
  c = Case{}, c.bool_mask = MaskPattern{"rows_every", {1, 2, 3}};
  EXPECT_EQ(field_of(c), "bool_mask");
  c = Case{}, c.has_window = true, c.window_left = -1, c.window_right = kMaxSeqlen + 1;
  EXPECT_EQ(field_of(c), "window");
  c = Case{}, c.row_gap = kMaxRowGap + 1;
  EXPECT_EQ(field_of(c), "row_gap");
}

TEST(CaseIo, NastyInputsFailCleanly) {
  const std::string head = "attnfuzz-case 1\n";
  // A line of 300,000 numbers (600 KB): refused by count before any vector grows.
  std::string many = head + "seqlen_q";
  for (int n = 0; n < 300000; ++n) many += " 1";
  ParseError e = parse_err(many);
  EXPECT_EQ(e.line, 2);
  EXPECT_NE(e.message.find("more than 1024 values on one line"), std::string::npos) << e.message;
  // 1024 values are fine with batch 1024; 1025 are one too many.
  std::string full = head + "batch 1024\nseqlen_q";
  for (int n = 0; n < kMaxBatch; ++n) full += " " + std::to_string(n);
  EXPECT_EQ(parse_ok(full).seqlens_q[kMaxBatch - 1], kMaxBatch - 1);
  EXPECT_NE(parse_err(full + " 7").message.find("more than 1024 values"), std::string::npos);
  // Files over the size limit: refused before reading a line.
  e = parse_err(head + "# " + std::string(kMaxCaseBytes, 'x'));
  EXPECT_EQ(e.line, 1);
  EXPECT_NE(e.message.find("at most 1048576"), std::string::npos);
  // Just under it: a 1 MB comment, a 1 MB token, a 1 MB run of blanks.
  EXPECT_EQ(parse_ok(head + "# " + std::string(kMaxCaseBytes - 100, 'x')), Case{});
  e = parse_err(head + "kernel " + std::string(kMaxCaseBytes - 100, 'k'));
  EXPECT_NE(e.message.find("characters long"), std::string::npos);
  EXPECT_LT(e.format("f").size(), 200u);  // the token is not echoed whole
  e = parse_err(head + std::string(kMaxCaseBytes - 100, 'z') + " 1");
  EXPECT_LT(e.format("f").size(), 200u);
  EXPECT_EQ(parse_ok(head + std::string(kMaxCaseBytes - 100, ' ') + "batch 2"), parse_ok(head + "batch 2"));
  // Many lines, many transforms.
  std::string lines = head;
  for (int n = 0; n < 100000; ++n) lines += "\n";
  EXPECT_EQ(parse_ok(lines + "batch 3\n").batch, 3);
  std::string transforms = head;
  for (int n = 0; n <= kMaxTransforms; ++n) transforms += "transform ties\n";
  e = parse_err(transforms);
  EXPECT_EQ(e.line, kMaxTransforms + 2);
  EXPECT_NE(e.message.find("more than 64 transforms"), std::string::npos);
  // Huge numbers everywhere.
  for (std::string_view key : {"batch", "heads", "seqlen_q", "seqlen_k", "head_dim", "row_gap", "seed"})
    parse_err(head + std::string(key) + " 1" + std::string(400, '9') + "\n");
  parse_err(head + "scale 1" + std::string(400, '0') + "\n");
  parse_err(head + "scale 0x1" + std::string(400, '0') + "\n");
  EXPECT_EQ(parse_ok(head + "scale 0." + std::string(300, '0') + "1\n").scale, 1e-301);
  EXPECT_EQ(parse_ok(head + "scale 1" + std::string(400, '0') + "e-400\n").scale, 1.0);
  // NUL bytes anywhere, including before the version line.
  for (size_t at : {size_t{0}, size_t{5}, head.size(), head.size() + 3}) {
    std::string t = head + "batch 2\n";
    t.insert(t.begin() + long(at), '\0');
    e = parse_err(t);
    EXPECT_NE(e.message.find("control character 0x00"), std::string::npos) << e.message;
  }
}

TEST(CaseIo, DamagedFilesGiveErrorsOrValidCases) {
  // Every truncation and many single-byte edits of a full case: the result
  // is either a case that round-trips, or an error inside the file.
  const std::string text = read_file(kExamples / "everything.case");
  const int lines = int(std::count(text.begin(), text.end(), '\n')) + 1;
  CounterRng rng(11, 11);
  auto check = [&](const std::string& t) {
    ParseError e;
    if (auto c = parse_case(t, &e)) {
      const auto back = parse_case(write_case(*c), nullptr);
      ASSERT_TRUE(back);
      ASSERT_EQ(*back, *c);
    } else {
      ASSERT_GE(e.line, 1) << t;
      ASSERT_LE(e.line, lines) << t;
      ASSERT_FALSE(e.message.empty());
      ASSERT_EQ(e.format("f").find('\n'), std::string::npos);
    }
  };
  for (size_t n = 0; n <= text.size(); ++n) check(text.substr(0, n));
  for (uint64_t n = 0; n < 5000; ++n) {
    std::string t = text;
    t[rng.below(3 * n, t.size())] = char(rng.bits(3 * n + 1));
    check(t);
  }
}

TEST(CaseIo, EffectiveScaleIsTheFp32OfTheScale) {
  Case c;
  c.head_dim = 64;
  EXPECT_EQ(c.effective_scale(), 0.125f);
  c.head_dim = 128;
  EXPECT_EQ(bits_of(c.effective_scale()), bits_of(float(1.0 / std::sqrt(128.0))));
  EXPECT_EQ(bits_of(c.effective_scale()), 0x3db504f3u);  // pinned: 0.088388346...
  c.head_dim = 80;
  EXPECT_EQ(bits_of(c.effective_scale()), 0x3de4f92eu);  // 1/sqrt(80) = 0.111803398...
  c.scale = 0.1;
  EXPECT_EQ(c.effective_scale(), 0.1f);
  c.scale = -0x1p-149;  // the smallest fp32 subnormal survives
  EXPECT_EQ(c.effective_scale(), -0x1p-149f);
}

TEST(CaseIo, MaxSeqlenIsOverSequences) {
  Case c;
  c.seqlens_q = {3, 0, 9, 2};
  c.seqlens_k = {0, 0};
  EXPECT_EQ(c.max_seqlen_q(), 9);
  EXPECT_EQ(c.max_seqlen_k(), 0);
  c.seqlens_q.clear();
  EXPECT_EQ(c.max_seqlen_q(), 0);
}

TEST(CaseIo, SpecificationExampleParses) {
  // The first code block of corpora/README.md is a complete case file.
  const std::string spec = read_file(fs::path(ATTNFUZZ_SOURCE_DIR) / "corpora/README.md");
  const size_t open = spec.find("```\n", spec.find("## An example"));
  ASSERT_NE(open, std::string::npos);
  const size_t close = spec.find("```", open + 4);
  const Case c = parse_ok(spec.substr(open + 4, close - open - 4));
  EXPECT_EQ(c.seqlens_k, (std::vector<int32_t>{8191, 0, 1, 4097}));
  EXPECT_EQ(c.provenance.size(), 1u);
}

TEST(CaseIo, FuzzDictionaryHoldsTheWholeVocabulary) {
  // tests/fuzz/case.dict lists the format's words for libFuzzer; a word
  // added to a table here must reach it.
  std::set<std::string> dict;
  std::istringstream in(read_file(fs::path(ATTNFUZZ_SOURCE_DIR) / "tests/fuzz/case.dict"));
  for (std::string line; std::getline(in, line);) {
    const size_t open = line.find('"'), close = line.rfind('"');
    if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open) continue;
    dict.insert(line.substr(open + 1, close - open - 1));
  }
  ASSERT_FALSE(dict.empty());
  for (const CaseKey& k : case_keys()) EXPECT_TRUE(dict.count(k.name)) << k.name;
  for (const PatternKind& k : mask_pattern_kinds()) EXPECT_TRUE(dict.count(k.name)) << k.name;
  for (const DistributionKind& k : distribution_kinds()) EXPECT_TRUE(dict.count(k.name)) << k.name;
  for (const TransformDef& t : transform_table()) EXPECT_TRUE(dict.count(t.name)) << t.name;
  for (const char* w : {"attnfuzz-case", "provenance:", "default", "top_left", "bottom_right", "bhsd", "bshd",
                        "packed_qkv", "none", "heads", "batch", "nan", "inf", "-inf", "lowest", "fp32", "fp16", "bf16",
                        "fp8e4m3", "fwd", "bwd", "both"})
    EXPECT_TRUE(dict.count(w)) << w;
}

}  // namespace
}  // namespace afz
