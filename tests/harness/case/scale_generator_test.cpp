// The scale class: opt-in, deterministic, every case past the thresholds it
// is for, within what the GPU kernels take and the GPU oracle affords.
// Nothing here builds a case's inputs (a huge K/V case is 64 GiB of them).
#include "harness/case/scale_generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "harness/case/case_file.h"
#include "harness/case/case_io.h"

namespace afz {
namespace {

constexpr uint64_t kSeed = 20250715;
// Enough cases that every kind, threshold side and alignment shows up.
constexpr int kCases = 600;

const GeneratorDef& scale_class() {
  const GeneratorDef* g = find_generator("scale");
  EXPECT_NE(g, nullptr);
  return *g;
}

// The last key row i of sequence b sees (-1: none), FlashAttention's band.
int64_t last_visible_key(const Case& c, int b, int64_t i) {
  const int64_t sq = c.seqlens_q[b], sk = c.seqlens_k[b];
  if (!c.has_window || c.window_right < 0) return sk - 1;
  const int64_t offset = c.align == AFZ_ALIGN_BOTTOM_RIGHT ? sk - sq : 0;
  return std::min(sk, i + offset + c.window_right + 1) - 1;
}

int64_t kv_elements(const Case& c) {
  return int64_t(c.batch) * c.heads_kv * c.max_seqlen_k() * std::max(c.head_dim, c.head_dim_v);
}

// Which thresholds a case is past, named; every scale case has one at least.
std::set<std::string> thresholds(const Case& c) {
  std::set<std::string> out;
  const int widest = *std::max_element(std::begin(kThresholdOffsets), std::end(kThresholdOffsets));
  for (int e : kWrapExponents)
    for (size_t b = 0; b < c.seqlens_k.size(); ++b) {
      const int64_t delta = int64_t(c.seqlens_k[b]) - (int64_t{1} << e);
      if (delta < 0 && -delta <= widest) out.insert("below 2^" + std::to_string(e));
      if (delta > 0 && delta <= widest) out.insert("above 2^" + std::to_string(e));
    }
  if (c.has_window && last_visible_key(c, 0, c.seqlens_q[0] - 1) >= kKeys2p15)
    out.insert(std::string(c.window_left < 0 ? "causal " : "window ") +
               (c.align == AFZ_ALIGN_TOP_LEFT ? "top-left" : "bottom-right") + " past 2^15");
  if (kv_elements(c) > kElements2p31) out.insert("K/V past 2^31 elements");
  if (c.max_seqlen_q() <= 4 && c.max_seqlen_k() >= kKeys2p17 - 64) out.insert("decode over 128K keys");
  return out;
}

TEST(ScaleClass, IsOptInOnly) {
  const GeneratorDef& g = scale_class();
  EXPECT_EQ(g.default_weight, 0);
  EXPECT_FALSE(g.backward);
  for (Pass pass : {Pass::Fwd, Pass::Bwd, Pass::Both})
    for (const auto& e : GeneratorMix::defaults(pass).entries()) EXPECT_NE(e.gen, &g) << pass_name(pass);
  for (const auto* table : {&generator_table(), &backward_generator_table()})
    for (const GeneratorDef& other : *table) EXPECT_NE(std::string(other.name), "scale");
  std::string error;
  const auto all = GeneratorMix::parse("all", &error);
  ASSERT_TRUE(all);
  for (const auto& e : all->entries()) EXPECT_NE(e.gen, &g);
  const auto named = GeneratorMix::parse("scale", &error);
  ASSERT_TRUE(named) << error;
  ASSERT_EQ(named->entries().size(), 1u);
  EXPECT_EQ(named->entries()[0].gen, &g);
  EXPECT_EQ(named->describe(), "scale=1");
  EXPECT_FALSE(GeneratorMix::parse("scalee", &error));
  EXPECT_NE(error.find("scale"), std::string::npos) << error;  // the unknown-class message lists it
}

TEST(ScaleClass, CasesAreDeterministicValidAndRoundTrip) {
  const GeneratorDef& g = scale_class();
  for (int i = 0; i < kCases; ++i) {
    const Case c = generate_with(g, kSeed, uint64_t(i));
    EXPECT_EQ(c, generate_with(g, kSeed, uint64_t(i))) << "case " << i;
    const auto bad = validate_case(c);
    ASSERT_FALSE(bad) << "case " << i << ": " << bad->format("generated") << "\n" << write_case(c);
    ParseError e;
    const std::optional<Case> back = parse_case(write_case(c), &e);
    ASSERT_TRUE(back) << e.format("written");
    EXPECT_EQ(*back, c) << "case " << i;
  }
  EXPECT_NE(generate_with(g, kSeed, 0), generate_with(g, kSeed + 1, 0));
}

// Shapes the GPU kernels take (kernels/cuda/gpu_kernels.cpp: bf16/fp16, one
// head dim of 32..128 by 32, no explicit masks or softcap), work within the
// budget, the max planted past the thresholds.
TEST(ScaleClass, CasesAreForTheGpuKernelsAndWithinBudget) {
  const GeneratorDef& g = scale_class();
  for (int i = 0; i < kCases; ++i) {
    const Case c = generate_with(g, kSeed, uint64_t(i));
    EXPECT_TRUE(c.in_dtype == AFZ_BF16 || c.in_dtype == AFZ_F16) << i;
    EXPECT_EQ(c.head_dim, c.head_dim_v) << i;
    EXPECT_TRUE(c.head_dim % 32 == 0 && c.head_dim >= 32 && c.head_dim <= 128) << i;
    EXPECT_FALSE(c.bool_mask || c.add_mask || c.softcap != 0) << i;
    EXPECT_LE(case_work(c), kScaleWorkBudget) << i << "\n" << write_case(c);
    ASSERT_EQ(c.transforms.size(), 1u) << i;
    const Transform& t = c.transforms[0];
    EXPECT_TRUE(t.name == "late_max" || (t.name == "growing_max" && t.get("block", 0) == kKeys2p15)) << i;
  }
}

TEST(ScaleClass, EveryCaseIsPastAThresholdAndEveryThresholdIsCovered) {
  const GeneratorDef& g = scale_class();
  std::set<std::string> seen;
  for (int i = 0; i < kCases; ++i) {
    const Case c = generate_with(g, kSeed, uint64_t(i));
    const std::set<std::string> t = thresholds(c);
    EXPECT_FALSE(t.empty()) << "case " << i << " is past no threshold:\n" << write_case(c);
    seen.insert(t.begin(), t.end());
  }
  std::set<std::string> want = {"K/V past 2^31 elements", "decode over 128K keys"};
  for (int e : kWrapExponents)
    for (const char* side : {"below 2^", "above 2^"}) want.insert(side + std::to_string(e));
  for (const char* band : {"causal ", "window "})
    for (const char* align : {"top-left", "bottom-right"}) want.insert(std::string(band) + align + " past 2^15");
  for (const std::string& w : want) EXPECT_TRUE(seen.count(w)) << "no case " << w;
}

// The huge K/V batch passes 2^31 elements by less than one sequence's slice:
// the smallest batch that wraps an int32 offset, no bigger than it needs.
TEST(ScaleClass, HugeKvCasesPassTwoToThe31ByLessThanOneSequence) {
  const GeneratorDef& g = scale_class();
  int huge = 0;
  for (int i = 0; i < kCases; ++i) {
    const Case c = generate_with(g, kSeed, uint64_t(i));
    if (kv_elements(c) <= kElements2p31) continue;
    ++huge;
    const int64_t slice = int64_t(c.heads_kv) * c.max_seqlen_k() * c.head_dim;
    EXPECT_LE(kv_elements(c) - slice, kElements2p31) << write_case(c);
    EXPECT_LE(kv_elements(c), kMaxElements) << write_case(c);
    // Q and O stay small: the host oracle result costs tens of bytes per O element.
    EXPECT_LE(int64_t(c.batch) * c.heads_q * c.max_seqlen_q() * c.head_dim_v, kElements2p31 >> 10) << write_case(c);
  }
  EXPECT_GT(huge, 0);
}

// reports/scale/cases, what reports/scale/h200_scale.sh runs: each file the
// generator's own case (its provenance names the seed and index), one of
// every kind, the huge K/V case among them.
TEST(ScaleClass, CommittedCasesAreTheGeneratorsOwn) {
  const std::string dir = std::string(ATTNFUZZ_SOURCE_DIR) + "/reports/scale/cases";
  std::set<std::string> seen;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string error;
    const std::optional<Case> c = load_case_file(entry.path().string(), &error);
    ASSERT_TRUE(c) << error;
    ASSERT_EQ(c->provenance.size(), 1u) << entry.path();
    unsigned long long seed = 0;
    int index = -1;
    ASSERT_EQ(std::sscanf(c->provenance[0].c_str(), "scale class, seed %llu, case %d", &seed, &index), 2);
    Case want = generate_with(scale_class(), seed, uint64_t(index));
    want.provenance = c->provenance;
    EXPECT_EQ(*c, want) << entry.path();
    const std::set<std::string> t = thresholds(*c);
    seen.insert(t.begin(), t.end());
    ++files;
  }
  EXPECT_GE(files, 10);
  for (const char* want : {"K/V past 2^31 elements", "decode over 128K keys", "below 2^15", "above 2^15",
                           "below 2^16", "above 2^16", "below 2^17", "causal top-left past 2^15",
                           "causal bottom-right past 2^15", "window top-left past 2^15",
                           "window bottom-right past 2^15"})
    EXPECT_TRUE(seen.count(want)) << want;
}

// The script's campaign (seed 1, cases 0-9) holds no huge K/V case, whose
// inputs alone take minutes to build today: it fits one device command.
TEST(ScaleClass, TheScriptsCampaignHoldsNoHugeCase) {
  constexpr uint64_t kScriptSeed = 1;
  constexpr int kScriptCases = 10;
  for (int i = 0; i < kScriptCases; ++i)
    EXPECT_LE(kv_elements(generate_with(scale_class(), kScriptSeed, uint64_t(i))), kElements2p31) << i;
}

}  // namespace
}  // namespace afz
