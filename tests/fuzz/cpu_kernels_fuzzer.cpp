// Structure-aware libFuzzer target for the CPU reference kernel family.
//
// The bytes choose a generator class and its (seed, index) through
// FuzzedDataProvider, so every input is a valid adversarial case and
// coverage guides the choice of classes and parameters rather than syntax.
// Each case runs through every correct built-in CPU kernel; a failure
// verdict, or any sanitizer report in the kernels, oracles, bound or
// verdict, is a finding.  Deterministic; the only output is the repro case
// printed before trapping, which pastes back as a file for `attnfuzz repro`.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>

#include "harness/case/case.h"
#include "harness/case/generators.h"
#include "harness/run/runner.h"
#include "kernels/registry.h"

namespace {

// Bounds each input's work so the fuzzer keeps its pace (the campaigns
// cover long rows); libFuzzer drops inputs that return -1.
constexpr int64_t kMaxWork = int64_t{1} << 21;

const afz::KernelRegistry& registry() {
  static const afz::KernelRegistry r = afz::KernelRegistry::with_builtins();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const auto& table = afz::generator_table();
  const afz::GeneratorDef& gen = table[in.ConsumeIntegralInRange<size_t>(0, table.size() - 1)];
  const uint64_t seed = in.ConsumeIntegral<uint64_t>();
  const uint64_t index = in.ConsumeIntegral<uint32_t>();
  afz::Case c = afz::generate_with(gen, seed, index);
  if (afz::case_work(c) > kMaxWork) return -1;

  static const afz::Runner runner(afz::RunOptions{});
  afz::Materialized m(c);
  afz::OracleResult reference = runner.reference(m);
  for (const afz::KernelEntry& e : registry().entries()) {
    if (e.origin != "builtin" || (e.kernel->caps.flags & AFZ_CAP_GPU)) continue;
    const afz::CaseOutcome o = runner.run(*e.kernel, m, &reference);
    if (!afz::is_failure(o.verdict.cls)) continue;
    c.kernel = e.kernel->name;
    std::fprintf(stderr, "%s: %s (%s)\n%s", e.kernel->name, std::string(afz::verdict_name(o.verdict.cls)).c_str(),
                 o.verdict.detail.c_str(), afz::write_case(c).c_str());
    __builtin_trap();
  }
  return 0;
}
