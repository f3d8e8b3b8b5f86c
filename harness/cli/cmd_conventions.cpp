// `attnfuzz conventions`: the convention table (harness/campaign/conventions.h)
// of the named kernels, as Markdown, then one line per disagreement.
#include <fmt/core.h>

#include <fstream>

#include "harness/campaign/conventions.h"
#include "harness/cli/commands.h"

namespace afz::cli {

Action add_conventions_command(CLI::App& app, Globals& g) {
  auto* sub = app.add_subcommand(
      "conventions", "what each kernel does where conventions differ (masked rows, empty-row LSE, additive-mask "
                     "idioms, causal alignment), beside the exact function");
  auto kernels = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  sub->add_option("--kernel,-k", *kernels, "kernel name or comma list, or all")->required();
  sub->add_option("--out,-o", *out, "also write the table and the disagreements to this Markdown file");
  return [&g, kernels, out]() {
    const KernelRegistry reg = g.registry();
    const Runner runner(g.run_options());
    const std::vector<CampaignKernel> slots = resolve_kernels(reg, *kernels);
    require_device_if_all_gpu(slots);
    const ConventionTable t = probe_conventions(slots, runner);
    // A lost GPU: its kernels' cells would read `unsupported` and the
    // disagreements "none"; say what happened instead (exit 2).
    if (!t.gpu_lost.empty()) {
      fmt::print("conventions: the GPU was lost after {} of {} probes: {}; no table\n", t.probes_before_loss,
                 convention_probes().size(), t.gpu_lost);
      return kExitBadInput;
    }
    std::string text = t.markdown() + "\nDisagreements (between the kernels, or with the exact function):\n\n";
    const std::vector<std::string> lines = t.disagreements();
    for (const std::string& l : lines) text += "- " + l + "\n";
    if (lines.empty()) text += t.any_ran() ? "- none\n" : "- none judged: no kernel ran any probe (see the table)\n";
    fmt::print("{}", text);
    if (!out->empty()) {
      std::ofstream f(*out);
      f << text;
      if (!f) throw BadInput{*out + ": cannot write"};
    }
    return kExitOk;
  };
}

}  // namespace afz::cli
