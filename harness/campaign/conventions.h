// The convention table: what each kernel does where attention's conventions
// differ between libraries, observed on the same inputs and set beside the
// exact function.
//
// Each probe is a small case (data, in conventions.cpp) built so that one
// row sits exactly where conventions part: a fully masked row under each
// kind of mask (causal with seqlen_q > seqlen_k, a window, a boolean mask, an
// additive -inf mask), an empty key sequence, the additive-mask idioms people
// use in place of -inf (the dtype's lowest value, -1e4, -1e9), and causal
// alignment when seqlen_q != seqlen_k.  For every kernel the table records
// the probed row's O and LSE as the kernel wrote them (classified: 0, NaN,
// +-inf, "exact", or the value), the verdict against the kernel's declared
// conventions, and the exact function's own values.
#pragma once
#include <string>
#include <vector>

#include "harness/campaign/campaign.h"
#include "harness/run/runner.h"

namespace afz {

struct ConventionProbe {
  const char* name;
  const char* question;  // what the probe asks, one line
  const char* case_text; // the case (corpora/README.md format)
  int b, i;              // the probed row (head 0)
};
const std::vector<ConventionProbe>& convention_probes();

struct ConventionCell {
  std::string o, lse;   // observed at the probed row, classified
  std::string verdict;  // against the declared conventions ("unsupported: why" when declined)
};

struct ConventionTable {
  std::vector<std::string> kernels;
  std::vector<const ConventionProbe*> probes;
  std::vector<ConventionCell> exact;               // [probe]
  std::vector<std::vector<ConventionCell>> cells;  // [probe][kernel]
  // Set when the GPU was lost while probing (gpu_lost_reason()): probing
  // stopped, and only the first probes_before_loss probes ran everywhere.
  std::string gpu_lost;
  size_t probes_before_loss = 0;
  // True when at least one kernel ran at least one probe.
  bool any_ran() const;
  // One line per probe where the kernels that ran it disagree with each
  // other or with the exact function.
  std::vector<std::string> disagreements() const;
  std::string markdown() const;
};

ConventionTable probe_conventions(const std::vector<CampaignKernel>& kernels, const Runner& runner);

}  // namespace afz
