// Minimizing a saved failure after the fact: `attnfuzz repro --minimize DIR`.
//
// Sweeps under a deadline save most failures as generated (their
// minimization budget is spent early), so a corpus from a device run is
// reproducible but not small.  This takes one such case, whose repro just
// failed, and shrinks it with the campaign's predicate: the same kernel slot
// (forward, or backward judged on dQ, dK, dV) fails with the same verdict
// class, a backward failure in the same gradient, a crash of the same kind
// (same_failure, campaign.h).  The result goes into
// a corpus folder under its own signature, with the source file and the
// original provenance kept beside the new verdict, so it is a one-line repro
// of the same defect.
#pragma once
#include <string>

#include "harness/campaign/campaign.h"
#include "harness/campaign/minimize.h"

namespace afz {

struct MinimizedFailure {
  MinimizeResult minimized;
  Verdict verdict;           // of the minimized case (the start's when nothing smaller failed)
  Case repro;                // the minimized case, stamped and with its provenance
  std::string signature;     // of the minimized case
  std::string raw_signature; // of the start
};

// `start` failed through `slot` with `first` (a failure verdict); `source`
// names its file for the provenance line.  The caller saves `repro` under
// `signature` (Corpus::save), as the campaign does with what it minimizes.
MinimizedFailure minimize_saved_failure(const CampaignKernel& slot, const Runner& runner, const Case& start,
                                        const Verdict& first, const std::string& source,
                                        const MinimizeOptions& options);

}  // namespace afz
