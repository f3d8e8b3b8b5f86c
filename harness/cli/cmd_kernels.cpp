// `attnfuzz kernels`: every kernel and what it supports.
#include <fmt/core.h>

#include "harness/cli/commands.h"
#include "kernels/abi/dtype.h"

namespace afz::cli {
namespace {

std::string dtypes(uint32_t bits) {
  std::string s;
  for (int t = 0; t < AFZ_DTYPE_COUNT; ++t)
    if (bits & (1u << t)) s += (s.empty() ? "" : ",") + std::string(dtype_name(afz_dtype(t)));
  return s;
}

struct FlagName {
  uint32_t flag;
  const char* name;
};
constexpr FlagName kFlagNames[] = {
    {AFZ_CAP_CAUSAL_TOP_LEFT, "causal-tl"}, {AFZ_CAP_CAUSAL_BOTTOM_RIGHT, "causal-br"},
    {AFZ_CAP_WINDOW, "window"},             {AFZ_CAP_BOOL_MASK, "bool-mask"},
    {AFZ_CAP_ADD_MASK, "add-mask"},         {AFZ_CAP_VARLEN, "varlen"},
    {AFZ_CAP_GQA, "gqa"},                   {AFZ_CAP_SOFTCAP, "softcap"},
    {AFZ_CAP_LSE, "lse"},                   {AFZ_CAP_STRIDED, "strided"},
    {AFZ_CAP_DV_NE_D, "dv!=d"},             {AFZ_CAP_GPU, "gpu"},
    {AFZ_CAP_NONDETERMINISTIC, "nondeterministic"},
    {AFZ_CAP_GRADS_IN_INPUT_DTYPE, "grads-in-input-dtype"},
    {AFZ_CAP_BWD_OWN_FORWARD, "own-forward"},
};

}  // namespace

std::string describe_capabilities(const afz_kernel& k) {
  std::string flags;
  for (const FlagName& f : kFlagNames)
    if (k.caps.flags & f.flag) flags += (flags.empty() ? "" : " ") + std::string(f.name);
  const afz_precision& pr = k.precision;
  return fmt::format("in {} out {} d {}..{}{} | {} | S in {}, P in {}, acc {}, exp {} ulp{}{} | masked row -> {}, "
                     "empty lse -> {}",
                     dtypes(k.caps.in_dtypes), dtypes(k.caps.out_dtypes), k.caps.min_head_dim, k.caps.max_head_dim,
                     k.caps.head_dim_multiple > 1 ? fmt::format(" step {}", k.caps.head_dim_multiple) : "", flags,
                     dtype_name(pr.score_dtype), pr.p_dtype == AFZ_P_DTYPE_OF_V ? "V's dtype" : dtype_name(pr.p_dtype),
                     dtype_name(pr.acc_dtype), pr.exp_ulps, pr.flush_subnormals ? ", flushes subnormals" : "",
                     pr.l_from_unrounded_p ? ", l from unrounded P" : "",
                     k.conventions.masked_row_output == AFZ_MASKED_ROW_ZERO ? "0" : "NaN",
                     k.conventions.empty_lse == AFZ_EMPTY_LSE_NEG_INF   ? "-inf"
                     : k.conventions.empty_lse == AFZ_EMPTY_LSE_POS_INF ? "+inf"
                     : k.conventions.empty_lse == AFZ_EMPTY_LSE_ZERO    ? "0"
                                                                        : "NaN");
}

Action add_kernels_command(CLI::App& app, Globals& g) {
  app.add_subcommand("kernels", "list the kernels and what each supports");
  return [&g]() {
    const KernelRegistry r = g.registry();
    for (const KernelEntry& e : r.entries()) {
      fmt::print("{:<28} {:<8} {}\n", e.kernel->name, e.origin, e.kernel->description ? e.kernel->description : "");
      if (!e.version.empty()) fmt::print("{:<28} runs {}\n", "", e.version);
      fmt::print("{:<28} {}\n", "", describe_capabilities(*e.kernel));
    }
    // Backward kernels (`--pass bwd|both`): the same caps, precision and
    // conventions fields, read by the backward verdict.
    if (!r.backward_entries().empty()) fmt::print("\nbackward kernels (--pass bwd|both):\n");
    for (const BackwardKernelEntry& e : r.backward_entries()) {
      afz_kernel as_forward{};
      as_forward.caps = e.kernel->caps;
      as_forward.caps.flags &= ~uint32_t(AFZ_CAP_LSE);
      as_forward.precision = e.kernel->precision;
      as_forward.conventions = e.kernel->conventions;
      fmt::print("{:<28} {:<8} {}\n", e.kernel->name, e.origin, e.kernel->description ? e.kernel->description : "");
      if (!e.version.empty()) fmt::print("{:<28} runs {}\n", "", e.version);
      fmt::print("{:<28} {}\n", "", describe_capabilities(as_forward));
    }
    return kExitOk;
  };
}

}  // namespace afz::cli
