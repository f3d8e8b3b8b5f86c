// Every defect of the mutant zoo (issue 3) is one override of one Steps
// function against the correct kernels, and the reference comparison of
// reference_kernels_test catches each of them on the same small problems:
// the kernel tests can fail, and the steps are cut where the zoo needs them.
// (The zoo proper lives in kernels/mutants; these are local to the test.)
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/fa1.h"
#include "kernels/cpu/splitkv.h"
#include "kernels/cpu/tiled.h"
#include "tests/kernels/test_problem.h"

namespace afz {
namespace {

using cpu::Fa2Steps;
using testing::ProblemSpec;
using testing::TestProblem;

struct NoAccRescale : Fa2Steps {
  template <typename T>
  static void rescale_acc(T*, int, T) {}
};
struct MaxStartsAtZero : Fa2Steps {
  template <typename T>
  static T initial_max() { return T(0); }
};
struct NoMRefGuard : Fa2Steps {
  template <typename T>
  static T reference(T m) { return m; }
};
struct OneMaxPerTile : Fa2Steps {
  template <typename T>
  static void row_max(const T* S, int rows, int cols, const T* m_old, T* m_new) {
    T m = cpu::kNegInf<T>;
    for (int r = 0; r < rows; ++r) {
      m = std::max(m, m_old[r]);
      for (int c = 0; c < cols; ++c) m = std::max(m, S[r * cols + c]);
    }
    for (int r = 0; r < rows; ++r) m_new[r] = m;
  }
};
struct Fa1WrongRatio : Fa2Steps {  // forgets l_old / l_new
  template <typename T>
  static T normalised_ratio(T, T alpha, T) { return alpha; }
};
struct SumInBf16 : Fa2Steps {
  template <typename T>
  static T rescaled_sum(T l, T alpha, T block_sum) { return T(round_to(AFZ_BF16, alpha * l + block_sum)); }
};
struct NoMaxSubtraction : Fa2Steps {
  template <typename T>
  static T reference(T) { return T(0); }
  template <typename T>
  static T rescale_factor(T, T) { return T(1); }
};
struct PartialBlockUnmasked : Fa2Steps {
  static int block_keys(int64_t j0, int block, int, int allocated_k) {
    return int(std::min<int64_t>(block, allocated_k - j0));
  }
};
struct CausalOffByOne : Fa2Steps {
  static int64_t last_visible_key(int64_t i, int64_t offset, int64_t right) {
    return right < 0 ? cpu::kUnboundedKey : i + offset + right + 1;
  }
};
struct ScaleDropped : Fa2Steps {
  template <typename T>
  static T scaled_score(T qk, T) { return qk; }
};
struct LseInLog2 : Fa2Steps {
  template <typename T>
  static T log_sum_exp(T m, T l) {
    constexpr T kLog2e = T(1.4426950408889634);
    return m * kLog2e + std::log2(l);
  }
};
struct MergeWithoutRescale : Fa2Steps {
  template <typename T>
  static T merge_factor(T, T) { return T(1); }
};

constexpr cpu::TiledConfig kSmallTiles{16, 16};
constexpr cpu::SplitKvConfig kSmallSplits{4, 16, 16};

struct Defect {
  const char* name;
  cpu::RunFn run;
  const void* config;
};

const Defect kDefects[] = {
    {"accumulator not rescaled", cpu::tiled_entry<NoAccRescale>, &kSmallTiles},
    {"m initialised to 0", cpu::tiled_entry<MaxStartsAtZero>, &kSmallTiles},
    {"no m_ref guard", cpu::tiled_entry<NoMRefGuard>, &kSmallTiles},
    {"one max for the whole tile", cpu::tiled_entry<OneMaxPerTile>, &kSmallTiles},
    {"FA1 with the wrong rescale ratio", cpu::fa1_entry<Fa1WrongRatio>, &kSmallTiles},
    {"l kept in bf16", cpu::tiled_entry<SumInBf16>, &kSmallTiles},
    {"no max subtraction", cpu::tiled_entry<NoMaxSubtraction>, &kSmallTiles},
    {"partial last block unmasked", cpu::tiled_entry<PartialBlockUnmasked>, &kSmallTiles},
    {"causal off by one", cpu::tiled_entry<CausalOffByOne>, &kSmallTiles},
    {"softmax scale dropped", cpu::tiled_entry<ScaleDropped>, &kSmallTiles},
    {"LSE in log2", cpu::tiled_entry<LseInLog2>, &kSmallTiles},
    {"split-KV merge without rescaling", cpu::splitkv_entry<MergeWithoutRescale>, &kSmallSplits},
};

// Relative check against direct softmax in double: a few percent is far
// beyond any rounding of these small problems and far below every defect's
// error on a problem that exercises it.
bool differs_from_reference(TestProblem& t) {
  const TestProblem::Reference ref = t.reference();
  const ProblemSpec& s = t.spec();
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads_q; ++h)
      for (int i = 0; i < s.seqlens_q[b]; ++i) {
        const int64_t row = t.lse_index(b, h, i);
        for (int x = 0; x < s.dv; ++x) {
          const double o = t.o(b, h, i, x), want = ref.o[row * s.dv + x];
          if (!(std::fabs(o - want) <= 0.02 * ref.cond[row * s.dv + x] + 1e-30)) return true;
        }
        const double lse = t.lse(b, h, i);
        if (ref.empty[row] ? !(std::isinf(lse) && lse < 0) : !(std::fabs(lse - ref.lse[row]) <= 1e-2)) return true;
      }
  return false;
}

std::vector<ProblemSpec> probing_problems() {
  std::vector<ProblemSpec> out;
  auto add = [&](const std::function<void(ProblemSpec&)>& shape) {
    ProblemSpec s;
    shape(s);
    out.push_back(s);
  };
  add([](ProblemSpec& s) { s.seqlens_q = {40}, s.seqlens_k = {100}; });
  add([](ProblemSpec& s) {  // the max arrives late
    s.seqlens_q = {20}, s.seqlens_k = {90};
    s.value = [](testing::Tensor t, int, int, int pos, int x, double v) {
      if (x == 0 && t == testing::Tensor::Q) return 4.0;
      if (x == 0 && t == testing::Tensor::K && pos >= 85) return 24.0;
      return v;
    };
  });
  add([](ProblemSpec& s) {  // every score far below zero
    s.seqlens_q = {10}, s.seqlens_k = {60};
    s.add_mask = [](int, int, int) { return -300.0f; };
  });
  add([](ProblemSpec& s) {  // rows of a tile on very different scales
    s.seqlens_q = {16}, s.seqlens_k = {40};
    s.add_mask = [](int, int i, int) { return i % 2 ? 150.0f : -150.0f; };
  });
  add([](ProblemSpec& s) {  // a window that leaves blocks empty for some rows
    s.seqlens_q = {64}, s.seqlens_k = {64};
    s.has_window = true, s.window_left = 2, s.window_right = 2;
  });
  add([](ProblemSpec& s) {  // causal, a partial last block before padding
    s.batch = 2, s.seqlens_q = {30, 20}, s.seqlens_k = {41, 20};
    s.has_window = true, s.window_left = -1, s.window_right = 0;
  });
  add([](ProblemSpec& s) {  // varlen: poison right behind a partial last block
    s.batch = 2, s.seqlens_q = {12, 9}, s.seqlens_k = {41, 20};
  });
  add([](ProblemSpec& s) {  // flat, long rows: l grows past 256
    s.seqlens_q = {2}, s.seqlens_k = {3000}, s.q_sigma = 0.01;
  });
  return out;
}

TEST(OneStepDefects, EachIsCaughtByTheReferenceComparison) {
  const std::vector<ProblemSpec> problems = probing_problems();
  // The correct kernels pass every probing problem.
  for (const ProblemSpec& s : problems) {
    TestProblem t(s);
    const afz_kernel k = cpu::emulating_kernel("tiled", "", cpu::tiled_entry<Fa2Steps>, &kSmallTiles);
    ASSERT_EQ(testing::run_kernel(k, t), "");
    ASSERT_FALSE(differs_from_reference(t));
  }
  for (const Defect& d : kDefects) {
    const afz_kernel k = cpu::emulating_kernel(d.name, "", d.run, d.config);
    std::string caught_by;
    for (size_t n = 0; n < problems.size() && caught_by.empty(); ++n) {
      TestProblem t(problems[n]);
      ASSERT_EQ(testing::run_kernel(k, t), "") << d.name;
      if (differs_from_reference(t)) caught_by = "problem " + std::to_string(n);
    }
    EXPECT_FALSE(caught_by.empty()) << d.name << " survived";
    std::printf("%-34s caught by %s\n", d.name, caught_by.c_str());
  }
}

}  // namespace
}  // namespace afz
