// The emulating CPU kernels on small problems: against direct softmax in
// double within a precision-derived tolerance, bit-identical to each other
// where they must be, exact 0 / -inf on masked rows, and never a write to
// padding or row gaps.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/registry.h"
#include "tests/kernels/test_problem.h"

namespace afz {
namespace {

using testing::Layout;
using testing::ProblemSpec;
using testing::Tensor;
using testing::TestProblem;

const std::vector<std::string> kReferenceKernels = {
    "cpu.direct", "cpu.online",  "cpu.tiled",   "cpu.tiled.br128_bc32", "cpu.tiled.br16_bc16",
    "cpu.fa1",    "cpu.splitkv", "cpu.splitkv.s16_bc16"};

const KernelRegistry& registry() {
  static const KernelRegistry r = KernelRegistry::with_builtins();
  return r;
}

const afz_kernel& kernel(const std::string& name) {
  const afz_kernel* k = registry().find(name);
  if (!k) throw std::runtime_error("kernel " + name + " not registered");
  return *k;
}

constexpr double kEps32 = 0x1p-24;
constexpr afz_dtype kInputDtypes[] = {AFZ_F32, AFZ_F16, AFZ_BF16};

void causal(ProblemSpec& s, afz_align align) {
  s.has_window = true;
  s.window_left = -1;
  s.window_right = 0;
  s.align = align;
}

void window(ProblemSpec& s, int left, int right, afz_align align) {
  s.has_window = true;
  s.window_left = left;
  s.window_right = right;
  s.align = align;
}

struct NamedProblem {
  const char* name;
  std::function<void(ProblemSpec&)> shape;
};

// Small problems that between them cover every feature the kernels claim.
const std::vector<NamedProblem>& problem_table() {
  static const std::vector<NamedProblem> table = {
      {"basic", [](ProblemSpec& s) {
         s.batch = 2, s.heads_q = s.heads_kv = 2, s.d = s.dv = 32;
         s.seqlens_q = {37, 37}, s.seqlens_k = {37, 37};
       }},
      {"decode_long_row", [](ProblemSpec& s) { s.seqlens_q = {1}, s.seqlens_k = {700}; }},
      {"partial_tiles", [](ProblemSpec& s) { s.seqlens_q = {130}, s.seqlens_k = {129}; }},
      {"causal_bottom_right", [](ProblemSpec& s) {
         s.seqlens_q = {50}, s.seqlens_k = {70};
         causal(s, AFZ_ALIGN_BOTTOM_RIGHT);
       }},
      {"causal_top_left", [](ProblemSpec& s) {
         s.seqlens_q = {70}, s.seqlens_k = {50};
         causal(s, AFZ_ALIGN_TOP_LEFT);
       }},
      {"causal_bottom_right_more_queries", [](ProblemSpec& s) {  // the first 30 rows see no key
         s.seqlens_q = {70}, s.seqlens_k = {40};
         causal(s, AFZ_ALIGN_BOTTOM_RIGHT);
       }},
      {"window_bottom_right", [](ProblemSpec& s) {
         s.seqlens_q = {90}, s.seqlens_k = {90};
         window(s, 20, 5, AFZ_ALIGN_BOTTOM_RIGHT);
       }},
      {"window_top_left", [](ProblemSpec& s) {
         s.seqlens_q = {60}, s.seqlens_k = {150};
         window(s, 7, 0, AFZ_ALIGN_TOP_LEFT);
       }},
      {"narrow_window_many_blocks", [](ProblemSpec& s) {  // blocks empty for some rows of a tile
         s.seqlens_q = {200}, s.seqlens_k = {200};
         window(s, 3, 3, AFZ_ALIGN_BOTTOM_RIGHT);
       }},
      {"varlen_with_empty_sequences", [](ProblemSpec& s) {
         s.batch = 3, s.seqlens_q = {17, 0, 40}, s.seqlens_k = {50, 9, 0};
       }},
      {"gqa_bshd_row_gaps", [](ProblemSpec& s) {
         s.heads_q = 6, s.heads_kv = 2, s.layout = Layout::BSHD, s.row_gap = 3;
         s.seqlens_q = {33}, s.seqlens_k = {45};
       }},
      {"kv_broadcast_over_heads", [](ProblemSpec& s) {
         s.heads_q = 4, s.heads_kv = 2, s.kv_broadcast_heads = true;
         s.seqlens_q = {20}, s.seqlens_k = {70};
       }},
      {"mqa_decode", [](ProblemSpec& s) {
         s.heads_q = 8, s.heads_kv = 1, s.seqlens_q = {1}, s.seqlens_k = {333};
       }},
      {"softcap", [](ProblemSpec& s) {
         s.softcap = 5, s.q_sigma = 4, s.seqlens_q = {30}, s.seqlens_k = {80};
       }},
      {"bool_mask_rows_and_band", [](ProblemSpec& s) {
         s.seqlens_q = {40}, s.seqlens_k = {60};
         s.bool_mask = [](int, int i, int j) { return i % 7 != 3 && j <= i + 25 && j >= i - 10; };
       }},
      {"add_mask_mixed", [](ProblemSpec& s) {
         s.seqlens_q = {30}, s.seqlens_k = {50};
         s.add_mask = [](int, int i, int j) -> float {
           if (i == 4 || j % 5 == 0) return -INFINITY;  // row 4 entirely
           if (j % 5 == 1) return -std::numeric_limits<float>::max();
           if (j % 5 == 2) return -1e4f;
           return float((i * j) % 3) * 0.5f;
         };
       }},
      {"all_scores_below_minus_2000", [](ProblemSpec& s) {
         s.seqlens_q = {20}, s.seqlens_k = {150};
         s.add_mask = [](int, int, int) { return -2000.0f; };
       }},
      {"dv_ne_d", [](ProblemSpec& s) { s.d = 24, s.dv = 40, s.seqlens_q = {19}, s.seqlens_k = {77}; }},
      {"late_maxima", [](ProblemSpec& s) {
         s.seqlens_q = {64}, s.seqlens_k = {300};
         s.value = [](Tensor t, int, int, int pos, int x, double v) {
           if (x != 0) return v;
           if (t == Tensor::Q) return 4.0;
           if (t == Tensor::K && pos >= 295) return 24.0;
           return v;
         };
       }},
      {"scores_near_1e4", [](ProblemSpec& s) { s.q_sigma = 1e4, s.seqlens_q = {16}, s.seqlens_k = {200}; }},
      {"bf16_in_fp32_out", [](ProblemSpec& s) {
         s.out = AFZ_F32, s.seqlens_q = {25}, s.seqlens_k = {90};
       }},
  };
  return table;
}

ProblemSpec spec_for(const NamedProblem& np, afz_dtype dtype) {
  ProblemSpec s;
  s.in = s.out = dtype;
  s.seed = 0x5eed0000 + dtype;
  np.shape(s);
  return s;
}

// |o - ref| <= cond (2 u_P + 4 eps32 (2 d sigma + N + 8)) + ulp_out(ref): P
// rounded to V's dtype, scores rounded in proportion to their magnitude
// sigma over d products, N fp32 additions into l and the accumulator, and the
// final rounding.  Loose on purpose; the verdict owns the tight bound.
double element_tolerance(const TestProblem& t, const TestProblem::Reference& ref, int64_t row, int64_t e) {
  const double u_p = unit_roundoff(t.spec().in);
  const double score = 2.0 * t.spec().d * ref.score_mag[row] + ref.keys[row] + 8;
  return ref.cond[e] * (2 * u_p + 4 * kEps32 * score) + ulp(t.spec().out, std::fabs(ref.o[e]));
}

double lse_tolerance(const TestProblem& t, const TestProblem::Reference& ref, int64_t row) {
  return 4 * kEps32 * (std::fabs(ref.lse[row]) + 2.0 * t.spec().d * ref.score_mag[row] + ref.keys[row] + 8);
}

// Checks every valid element and row against the reference, and that every
// other element of O (padding rows, row gaps) and of LSE still holds poison.
::testing::AssertionResult matches_reference(const TestProblem& t, const TestProblem::Reference& ref) {
  const ProblemSpec& s = t.spec();
  const int size = size_of(s.out);
  std::vector<bool> written(t.o_storage().size() / size, false);
  std::vector<bool> lse_written(size_t(s.batch) * s.heads_q * t.sq(), false);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads_q; ++h)
      for (int i = 0; i < s.seqlens_q[b]; ++i) {
        const int64_t row = t.lse_index(b, h, i);
        lse_written[row] = true;
        const std::string where = "(b " + std::to_string(b) + ", h " + std::to_string(h) + ", i " + std::to_string(i);
        for (int x = 0; x < s.dv; ++x) {
          written[t.o_offset(b, h, i, x)] = true;
          const int64_t e = row * s.dv + x;
          const double o = t.o(b, h, i, x);
          if (ref.empty[row]) {
            if (t.o_bits(b, h, i, x) != 0)
              return ::testing::AssertionFailure() << "masked row " << where << ") O = " << o << ", want +0";
          } else if (!(std::fabs(o - ref.o[e]) <= element_tolerance(t, ref, row, e))) {
            return ::testing::AssertionFailure() << where << ", x " << x << "): " << o << " vs " << ref.o[e]
                                                 << ", tolerance " << element_tolerance(t, ref, row, e);
          }
        }
        if (!s.with_lse) continue;
        const float lse = t.lse(b, h, i);
        if (ref.empty[row]) {
          if (!(std::isinf(lse) && lse < 0))
            return ::testing::AssertionFailure() << "masked row " << where << ") LSE = " << lse << ", want -inf";
        } else if (!(std::fabs(lse - ref.lse[row]) <= lse_tolerance(t, ref, row))) {
          return ::testing::AssertionFailure() << where << ") LSE " << lse << " vs " << ref.lse[row];
        }
      }
  const uint32_t poison = testing::out_poison_bits(s.out);
  for (size_t e = 0; e < written.size(); ++e) {
    uint32_t bits = 0;
    std::memcpy(&bits, t.o_storage().data() + e * size, size);
    if (!written[e] && bits != poison)
      return ::testing::AssertionFailure() << "O element " << e << " outside the valid rows was written";
  }
  if (s.with_lse)
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads_q; ++h)
        for (int i = 0; i < t.sq(); ++i)
          if (!lse_written[t.lse_index(b, h, i)] && t.lse_bits(b, h, i) != testing::kOutPoisonF32)
            return ::testing::AssertionFailure() << "LSE of padding row (b " << b << ", i " << i << ") was written";
  return ::testing::AssertionSuccess();
}

TEST(ReferenceKernels, AllRegisteredWithDeclaredConventions) {
  for (const std::string& name : kReferenceKernels) {
    const afz_kernel& k = kernel(name);
    EXPECT_EQ(k.conventions.masked_row_output, AFZ_MASKED_ROW_ZERO) << name;
    EXPECT_EQ(k.conventions.empty_lse, AFZ_EMPTY_LSE_NEG_INF) << name;
    EXPECT_EQ(k.precision.score_dtype, AFZ_F32) << name;
    EXPECT_EQ(k.precision.acc_dtype, AFZ_F32) << name;
    EXPECT_EQ(k.precision.p_dtype, AFZ_P_DTYPE_OF_V) << name;
    EXPECT_TRUE(k.caps.flags & AFZ_CAP_LSE) << name;
    EXPECT_FALSE(k.caps.flags & AFZ_CAP_GPU) << name;
  }
}

TEST(ReferenceKernels, MatchDirectSoftmaxInDoubleOnEveryFeature) {
  for (const NamedProblem& np : problem_table())
    for (afz_dtype dtype : kInputDtypes) {
      TestProblem t(spec_for(np, dtype));
      const TestProblem::Reference ref = t.reference();
      for (const std::string& name : kReferenceKernels) {
        SCOPED_TRACE(std::string(np.name) + " " + std::string(dtype_name(dtype)) + " " + name);
        const afz_kernel& k = kernel(name);
        ASSERT_EQ(unsupported_reason(k, t.problem()), "");
        t.poison_outputs();
        ASSERT_EQ(testing::run_kernel(k, t), "");
        EXPECT_TRUE(matches_reference(t, ref));
      }
    }
}

// With one key block, every form performs the same fp32 operations in the
// same order (alpha = 0 on the only block, an empty split adds 0 * 0, FA1's
// first ratio is 0), so all must be bit-identical to cpu.direct.
TEST(ReferenceKernels, BitIdenticalToDirectWhenOneBlockHoldsAllKeys) {
  const std::vector<NamedProblem> single_block = {
      {"plain", [](ProblemSpec& s) { s.seqlens_q = {20}, s.seqlens_k = {13}; }},
      {"causal_empty_rows", [](ProblemSpec& s) {
         s.seqlens_q = {20}, s.seqlens_k = {13};
         causal(s, AFZ_ALIGN_BOTTOM_RIGHT);
       }},
      {"varlen_gqa_bshd", [](ProblemSpec& s) {
         s.batch = 3, s.heads_q = 4, s.heads_kv = 2, s.layout = Layout::BSHD, s.row_gap = 1;
         s.seqlens_q = {5, 0, 16}, s.seqlens_k = {16, 3, 0};
       }},
      {"masks_softcap", [](ProblemSpec& s) {
         s.seqlens_q = {18}, s.seqlens_k = {16}, s.softcap = 3, s.q_sigma = 3;
         s.bool_mask = [](int, int i, int j) { return (i + j) % 4 != 0 && i != 5; };
         s.add_mask = [](int, int i, int j) { return j == 2 ? -INFINITY : float(i % 3) - 1.0f; };
       }},
  };
  for (const NamedProblem& np : single_block)
    for (afz_dtype dtype : kInputDtypes) {
      TestProblem t(spec_for(np, dtype));
      ASSERT_EQ(testing::run_kernel(kernel("cpu.direct"), t), "");
      const std::vector<uint8_t> direct_o = t.o_storage();
      std::vector<uint32_t> direct_lse;
      for (int b = 0; b < t.spec().batch; ++b)
        for (int h = 0; h < t.spec().heads_q; ++h)
          for (int i = 0; i < t.sq(); ++i) direct_lse.push_back(t.lse_bits(b, h, i));
      for (const std::string& name : kReferenceKernels) {
        SCOPED_TRACE(std::string(np.name) + " " + std::string(dtype_name(dtype)) + " " + name);
        t.poison_outputs();
        ASSERT_EQ(testing::run_kernel(kernel(name), t), "");
        EXPECT_TRUE(t.o_storage() == direct_o);
        size_t n = 0;
        for (int b = 0; b < t.spec().batch; ++b)
          for (int h = 0; h < t.spec().heads_q; ++h)
            for (int i = 0; i < t.sq(); ++i) EXPECT_EQ(t.lse_bits(b, h, i), direct_lse[n++]);
      }
    }
}

// Across many blocks the forms differ only by fp32 rounding (and by where P
// is rounded to the input dtype): in fp32 they agree to a few ulps of fp32.
TEST(ReferenceKernels, AgreeWithEachOtherAcrossManyBlocks) {
  ProblemSpec s;
  s.batch = 2, s.heads_q = 4, s.heads_kv = 2, s.seqlens_q = {150, 97}, s.seqlens_k = {400, 333};
  window(s, 100, 20, AFZ_ALIGN_BOTTOM_RIGHT);
  TestProblem t(s);
  ASSERT_EQ(testing::run_kernel(kernel("cpu.direct"), t), "");
  std::vector<double> direct;
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 4; ++h)
      for (int i = 0; i < s.seqlens_q[b]; ++i)
        for (int x = 0; x < s.dv; ++x) direct.push_back(t.o(b, h, i, x));
  for (const std::string& name : kReferenceKernels) {
    t.poison_outputs();
    ASSERT_EQ(testing::run_kernel(kernel(name), t), "");
    double worst = 0;
    size_t n = 0;
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 4; ++h)
        for (int i = 0; i < s.seqlens_q[b]; ++i)
          for (int x = 0; x < s.dv; ++x) worst = std::max(worst, std::fabs(t.o(b, h, i, x) - direct[n++]));
    EXPECT_LE(worst, 2e-6) << name;
    std::printf("%-22s max |o - cpu.direct| = %.3g (fp32)\n", name.c_str(), worst);
  }
}

TEST(ReferenceKernels, MaskedRowsAreExactlyZeroWithNegativeInfinityLse) {
  // Rows emptied by a window, an explicit mask, an additive -inf row and a
  // zero-length key sequence.
  ProblemSpec s;
  s.batch = 3, s.in = s.out = AFZ_BF16;
  s.seqlens_q = {70, 12, 9}, s.seqlens_k = {40, 30, 0};
  causal(s, AFZ_ALIGN_BOTTOM_RIGHT);  // sequence 0: rows 0..29 see nothing
  s.bool_mask = [](int b, int i, int) { return !(b == 1 && i % 7 == 3); };
  s.add_mask = [](int b, int i, int) { return b == 1 && i == 11 ? -INFINITY : 0.0f; };
  TestProblem t(s);
  const TestProblem::Reference ref = t.reference();
  int empty_rows = 0;
  for (int b = 0; b < s.batch; ++b)
    for (int i = 0; i < s.seqlens_q[b]; ++i) empty_rows += ref.empty[t.lse_index(b, 0, i)];
  for (const std::string& name : kReferenceKernels) {
    t.poison_outputs();
    ASSERT_EQ(testing::run_kernel(kernel(name), t), "") << name;
    int checked = 0;
    for (int b = 0; b < s.batch; ++b)
      for (int i = 0; i < s.seqlens_q[b]; ++i) {
        if (!ref.empty[t.lse_index(b, 0, i)]) continue;
        ++checked;
        for (int x = 0; x < s.dv; ++x) ASSERT_EQ(t.o_bits(b, 0, i, x), 0u) << name << " b " << b << " i " << i;
        ASSERT_TRUE(std::isinf(t.lse(b, 0, i)) && t.lse(b, 0, i) < 0) << name << " b " << b << " i " << i;
      }
    EXPECT_EQ(checked, empty_rows) << name;
  }
  // 30 rows before the causal diagonal, rows 3 and 10 by the boolean mask,
  // row 11 by the additive mask, 9 rows without keys.
  EXPECT_EQ(empty_rows, 30 + 2 + 1 + 9);
}

TEST(ReferenceKernels, DeterministicBitForBit) {
  ProblemSpec s;
  s.in = s.out = AFZ_F16, s.heads_q = 2, s.seqlens_q = {77}, s.seqlens_k = {190};
  window(s, 50, 10, AFZ_ALIGN_TOP_LEFT);
  TestProblem t(s);
  for (const std::string& name : kReferenceKernels) {
    ASSERT_EQ(testing::run_kernel(kernel(name), t), "");
    const std::vector<uint8_t> first = t.o_storage();
    t.poison_outputs();
    ASSERT_EQ(testing::run_kernel(kernel(name), t), "");
    EXPECT_TRUE(first == t.o_storage()) << name;
  }
}

TEST(ReferenceKernels, MalformedProblemsGiveOneLineErrors) {
  ProblemSpec s;
  s.heads_q = 2, s.heads_kv = 2;
  TestProblem t(s);
  const afz_problem good = t.problem();
  const std::vector<std::pair<std::function<void(afz_problem&)>, std::string>> breakages = {
      {[](afz_problem& p) { p.abi_version = 99; }, "ABI version 99"},
      {[](afz_problem& p) { p.heads_kv = 3; }, "not a multiple of heads_kv"},
      {[](afz_problem& p) { p.seqlens_q = nullptr; }, "null seqlens"},
      {[](afz_problem& p) { p.max_seqlen_k = 4; }, "seqlens_k[0] = 8 outside [0, 4]"},
      {[](afz_problem& p) { p.k.data = nullptr; }, "k: null data pointer"},
      {[](afz_problem& p) { p.v.dtype = AFZ_U8; }, "v: dtype u8 is not an input dtype"},
      {[](afz_problem& p) { p.scale = NAN; }, "scale is not finite"},
      {[](afz_problem& p) { p.head_dim = 0; }, "head dims"},
  };
  for (const std::string& name : kReferenceKernels)
    for (const auto& [breakage, message] : breakages) {
      afz_problem p = good;
      breakage(p);
      char error[256] = {0};
      const afz_kernel& k = kernel(name);
      EXPECT_NE(k.run(&k, &p, error, sizeof error), 0) << name << " " << message;
      EXPECT_NE(std::string(error).find(message), std::string::npos) << name << ": " << error;
      EXPECT_EQ(std::string(error).find('\n'), std::string::npos);
    }
  char error[8] = {0};  // a short buffer truncates, never overflows
  const afz_kernel& k = kernel("cpu.tiled");
  EXPECT_NE(k.run(&k, nullptr, error, sizeof error), 0);
  EXPECT_EQ(std::string(error), "null pr");
}

}  // namespace
}  // namespace afz
