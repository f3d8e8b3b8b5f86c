#include "harness/case/generators.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "harness/campaign/minimize.h"
#include "harness/case/case_io.h"
#include "harness/case/materialize.h"
#include "harness/judge/signature.h"
#include "kernels/abi/dtype.h"

namespace afz {
namespace {

constexpr uint64_t kSeed = 20240531;
// Cases per class checked for validity (cheap) and materialized (not: the
// flat class's 8K-key rows cost tens of milliseconds each).
constexpr int kValidated = 300;
constexpr int kMaterialized = 12;

// The forward classes and the backward ones.
std::vector<GeneratorDef> every_class() {
  std::vector<GeneratorDef> all = generator_table();
  for (const GeneratorDef& g : backward_generator_table()) all.push_back(g);
  return all;
}

TEST(Generators, TableHasEveryAdversarialClass) {
  std::set<std::string> names;
  for (const GeneratorDef& g : generator_table()) {
    names.insert(g.name);
    EXPECT_GT(g.default_weight, 0) << g.name;
    EXPECT_NE(g.make, nullptr) << g.name;
  }
  for (const char* want :
       {"shapes", "late_max", "flat", "magnitude", "masking", "values", "layouts", "add_mask", "composed"})
    EXPECT_TRUE(names.count(want)) << want;
  for (const GeneratorDef& g : generator_table()) EXPECT_FALSE(g.backward) << g.name;
  std::set<std::string> backward;
  for (const GeneratorDef& g : backward_generator_table()) {
    backward.insert(g.name);
    EXPECT_TRUE(g.backward) << g.name;
    EXPECT_GT(g.default_weight, 0) << g.name;
    EXPECT_EQ(find_generator(g.name), &g) << g.name;
  }
  EXPECT_EQ(backward, (std::set<std::string>{"bwd_lse_extreme", "bwd_masked_rows", "bwd_do_rows", "bwd_gqa"}));
}

// Every case of every class is a valid case whose text round-trips.
TEST(Generators, CasesValidateAndRoundTrip) {
  for (const GeneratorDef& g : every_class())
    for (int i = 0; i < kValidated; ++i) {
      const Case c = generate_with(g, kSeed, uint64_t(i));
      ASSERT_TRUE(case_is_buildable(c)) << g.name << " case " << i << ": " << validate_case(c)->format("generated")
                                        << "\n" << write_case(c);
      ParseError e;
      const std::optional<Case> back = parse_case(write_case(c), &e);
      ASSERT_TRUE(back) << e.format(g.name);
      EXPECT_EQ(*back, c) << g.name << " case " << i;
    }
}

// Materialized inputs are finite: a planted score (the carrier coordinate)
// or a scaled q never overflows the input dtype.
TEST(Generators, CasesMaterializeWithFiniteInputs) {
  for (const GeneratorDef& g : every_class())
    for (int i = 0; i < kMaterialized; ++i) {
      const Case c = generate_with(g, kSeed, uint64_t(i));
      Materialized m(c);
      for (const std::vector<double>* t : {&m.logical().q, &m.logical().k, &m.logical().v})
        for (double v : *t) ASSERT_TRUE(std::isfinite(v)) << g.name << " case " << i << "\n" << write_case(c);
    }
}

TEST(Generators, WorkStaysWithinBudget) {
  constexpr int64_t kTypical = int64_t{1} << 21, kLongRows = int64_t{1} << 22;
  for (const GeneratorDef& g : every_class())
    for (int i = 0; i < kValidated; ++i) {
      const Case c = generate_with(g, kSeed, uint64_t(i));
      EXPECT_LE(case_work(c), std::string(g.name) == "flat" ? kLongRows : kTypical) << g.name << " case " << i;
    }
}

// The same (class, seed, index) gives the same case text on every machine:
// these hashes were taken once and must never change without a reason (a
// changed generator changes which cases a seeded campaign runs).
TEST(Generators, PinnedCaseTexts) {
  struct Pin {
    const char* generator;
    uint64_t seed, index, hash;
  };
  const Pin pins[] = {
      {"shapes", 1, 0, 0x592dc8f65ee3fa69ULL},
      {"shapes", 7, 123, 0xdf295afbcc48519cULL},
      {"late_max", 1, 5, 0xac6b11fba58d2137ULL},
      {"flat", 2, 3, 0xb57b9ed4b25729b9ULL},
      {"magnitude", 1, 9, 0xedcb4c49649f1a90ULL},
      {"masking", 3, 17, 0xb23c038704e3c5f7ULL},
      {"values", 5, 2, 0xfd944dea2dc60d57ULL},
      {"layouts", 1, 44, 0x22b8d79b55b7240dULL},
      {"add_mask", 9, 8, 0x84561f738c17c2a0ULL},
  };
  for (const Pin& p : pins) {
    const std::string text = write_case(generate_with(*find_generator(p.generator), p.seed, p.index));
    EXPECT_EQ(fnv1a64(text), p.hash) << p.generator << " seed " << p.seed << " index " << p.index << "\n" << text;
  }
}

TEST(Generators, CaseDependsOnlyOnSeedAndIndex) {
  const GeneratorMix mix = GeneratorMix::defaults();
  for (uint64_t i = 0; i < 50; ++i) {
    const GeneratedCase a = generate_case(mix, 3, i), b = generate_case(mix, 3, i);
    EXPECT_EQ(a.c, b.c);
    EXPECT_EQ(a.generator, b.generator);
    // The mix picks the class; the class alone builds the same case.
    EXPECT_EQ(generate_with(*a.generator, 3, i), a.c);
  }
  EXPECT_NE(generate_case(mix, 3, 7).c, generate_case(mix, 4, 7).c);
  EXPECT_NE(generate_case(mix, 3, 7).c, generate_case(mix, 3, 8).c);
}

TEST(Generators, MixParsesWeightsAndRejectsBadSpecs) {
  std::string error;
  auto mix = GeneratorMix::parse("late_max=3,masking=1", &error);
  ASSERT_TRUE(mix) << error;
  EXPECT_EQ(mix->describe(), "late_max=3,masking=1");
  auto alone = GeneratorMix::parse("flat", &error);
  ASSERT_TRUE(alone) << error;
  EXPECT_EQ(alone->describe(), "flat=1");
  EXPECT_EQ(GeneratorMix::parse("all", &error)->describe(), GeneratorMix::defaults().describe());

  EXPECT_FALSE(GeneratorMix::parse("late_max=3,nosuch=1", &error));
  EXPECT_NE(error.find("unknown generator class 'nosuch'"), std::string::npos) << error;
  EXPECT_FALSE(GeneratorMix::parse("late_max=x", &error));
  EXPECT_NE(error.find("weight"), std::string::npos) << error;
  EXPECT_FALSE(GeneratorMix::parse("late_max=-1", &error));
  EXPECT_FALSE(GeneratorMix::parse("late_max=0", &error));
  EXPECT_NE(error.find("weight 0"), std::string::npos) << error;
  EXPECT_FALSE(GeneratorMix::parse("flat,flat", &error));
  EXPECT_NE(error.find("twice"), std::string::npos) << error;
}

TEST(Generators, MixFollowsWeights) {
  std::string error;
  const GeneratorMix mix = *GeneratorMix::parse("late_max=3,masking=1", &error);
  constexpr int kCases = 4000;
  int late = 0;
  for (int i = 0; i < kCases; ++i) late += std::string(mix.choose(9, uint64_t(i)).name) == "late_max";
  // 3/4 expected; 4000 draws put 0.70..0.80 many standard deviations out.
  EXPECT_GT(late, kCases * 70 / 100);
  EXPECT_LT(late, kCases * 80 / 100);
}

// What each class claims to cover, it covers (counted over a few hundred cases).
TEST(Generators, ClassesCoverTheirAdversarialFeatures) {
  std::map<std::string, std::set<std::string>> seen;
  for (const GeneratorDef& g : every_class())
    for (int i = 0; i < kValidated; ++i) {
      const Case c = generate_with(g, kSeed, uint64_t(i));
      auto& s = seen[g.name];
      for (const std::string& f : case_features(c)) s.insert(f);
      const int sq = c.max_seqlen_q(), sk = c.max_seqlen_k();
      if (sq == 1) s.insert("sq=1");
      if (sk == 1) s.insert("sk=1");
      if (sq > 1 && sk > 1 && sq < sk) s.insert("sq<sk");
      if (sq > 1 && sk > 1 && sq > sk) s.insert("sq>sk");
      if (sk >= 8192) s.insert("sk>=8192");
      if (sk >= 2048 && sq <= 4) s.insert("decode");
      if (c.head_dim % 2 == 1) s.insert("odd_head_dim");
      if (c.head_dim >= 160) s.insert("d>=160");
      for (int32_t n : c.seqlens_k)
        if (n % 64 != 0 && n > 64) s.insert("partial_block");
      if (c.add_mask) s.insert("add_value=" + std::to_string(int(c.add_mask->value_kind)));
      if (c.add_mask && c.bool_mask) s.insert("add_and_bool");
      for (const Transform& t : c.transforms) {
        if (t.name == "shift_scores" && t.get("offset", 0) <= -1e4) s.insert("shift<=-1e4");
        if (t.name == "shift_scores" && t.get("offset", 0) < -90 && t.get("offset", 0) > -1e4) s.insert("shift<-90");
        if (t.name == "shift_scores" && t.get("offset", 0) > 11.09) s.insert("shift>11.09");
        if (t.name == "special_values") s.insert("special=" + std::to_string(int(t.get("kind", 0))));
      }
      if (c.has_window && c.align == AFZ_ALIGN_TOP_LEFT) s.insert("align_tl");
      if (c.has_window && c.align == AFZ_ALIGN_BOTTOM_RIGHT) s.insert("align_br");
    }
  auto expect = [&](const char* cls, std::initializer_list<const char*> features) {
    for (const char* f : features) EXPECT_TRUE(seen[cls].count(f)) << cls << " never produced " << f;
  };
  expect("shapes", {"sq=1", "sk=1", "sq<sk", "sq>sk", "gqa", "mqa", "varlen", "empty_seq", "odd_head_dim", "d>=160",
                    "dv!=d", "decode", "partial_block", "causal_tl", "causal_br"});
  expect("late_max", {"t:late_max", "t:growing_max", "t:early_max", "partial_block"});
  expect("flat", {"t:flat", "t:ties", "sk>=8192"});
  expect("magnitude", {"t:scale_q", "t:shift_scores", "t:row_contrast", "softcap", "shift<=-1e4", "shift<-90",
                       "shift>11.09"});
  expect("masking", {"causal_tl", "causal_br", "window_tl", "window_br", "bool_mask:rows_every",
                     "bool_mask:key_block", "bool_mask:band", "bool_mask:block", "bool_mask:random",
                     "bool_mask:cols_every", "empty_seq"});
  expect("values", {"poison:inf", "t:ties", "t:special_values", "special=0", "special=1", "special=2", "row_gap",
                    "varlen"});
  expect("layouts", {"layout:bshd", "layout:packed_qkv", "row_gap", "kv_broadcast:heads", "kv_broadcast:batch",
                     "gqa"});
  expect("add_mask", {"add_value=0", "add_value=1", "add_value=2", "add_and_bool"});
  expect("composed", {"t:late_max", "t:growing_max", "t:early_max", "t:shift_scores", "t:row_contrast", "t:scale_q",
                      "softcap", "causal_tl", "causal_br", "window_tl", "window_br", "bool_mask:key_block",
                      "add_value=0", "add_value=1", "add_value=2", "gqa", "mqa", "varlen", "empty_seq", "decode",
                      "partial_block"});
}

// The composed class puts extreme scores and structure in the same case:
// nearly every case has both (the work budget may drop a batch or heads).
TEST(Generators, ComposedCasesCombineExtremeScoresWithStructure) {
  const GeneratorDef& g = *find_generator("composed");
  const std::set<std::string> structure_prefixes = {"causal_", "window_", "bool_mask:", "add_mask:", "softcap",
                                                    "gqa", "mqa", "varlen", "empty_seq"};
  int both = 0;
  std::set<std::pair<std::string, std::string>> pairs;  // (transform, structural feature)
  for (int i = 0; i < kValidated; ++i) {
    const Case c = generate_with(g, kSeed, uint64_t(i));
    std::vector<std::string> structure;
    for (const std::string& f : case_features(c))
      for (const std::string& p : structure_prefixes)
        if (f.starts_with(p)) structure.push_back(f);
    both += !c.transforms.empty() && !structure.empty();
    for (const Transform& t : c.transforms)
      for (const std::string& f : structure) pairs.insert({t.name, f});
  }
  EXPECT_GE(both, kValidated * 9 / 10);
  for (const char* t : {"late_max", "growing_max", "shift_scores", "row_contrast"})
    for (const char* f : {"causal_br", "window_br", "bool_mask:key_block", "softcap", "gqa", "varlen"})
      EXPECT_TRUE(pairs.count({t, f})) << t << " never met " << f;
}

// The masking class makes fully masked rows, and rows that see no key in
// the first key block but do see later ones (the running-max guard).
TEST(Generators, MaskingMakesEmptyRowsAndLateFirstKeys) {
  const GeneratorDef& g = *find_generator("masking");
  int empty_rows = 0, late_first_key = 0;
  constexpr int kBlock = 16;
  for (int i = 0; i < 60; ++i) {
    Materialized m(generate_with(g, kSeed, uint64_t(i)));
    const afz_problem& p = m.problem();
    for (int b = 0; b < p.batch; ++b)
      for (int r = 0; r < p.seqlens_q[b]; ++r) {
        int first = -1;
        for (int j = 0; j < p.seqlens_k[b] && first < 0; ++j)
          if (m.visible(b, 0, r, j)) first = j;
        empty_rows += first < 0;
        late_first_key += first >= kBlock;
      }
  }
  EXPECT_GT(empty_rows, 0);
  EXPECT_GT(late_first_key, 0);
}

}  // namespace
}  // namespace afz
