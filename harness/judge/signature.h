// Failure signatures: what makes two failures "the same bug".
//
// A signature is (kernel, verdict class, feature set, shape class).  A
// backward kernel's signature names it "NAME [bwd]" and carries the failing
// gradient as the feature "grad:dq" (dk, dv): a dQ defect and a dV defect of
// one kernel are two bugs, and neither is its forward kernel's.  The
// feature set names what the case exercises beyond a plain dense problem
// (masks, alignments, GQA, layouts, transforms, dtypes); the shape class is
// a coarse size bucket.  The campaign takes the signature of the *minimized*
// case: minimization drops every feature the failure does not need, so the
// signature names the ingredients the bug actually depends on, and two raw
// failures that reduce to the same ingredients are one bug.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "harness/case/case.h"
#include "harness/case/case_features.h"
#include "harness/judge/verdict.h"

namespace afz {

struct Signature {
  std::string kernel;
  VerdictClass verdict = VerdictClass::Pass;
  std::vector<std::string> features;
  std::string shape;

  // "kernel|verdict|feat1,feat2|shape": stable text, stored in corpus files.
  std::string text() const;
  // 16 hex digits of a hash of text(): short file names.
  std::string short_hash() const;
};

// `gradient`: "dq", "dk" or "dv" for a backward failure whose worst element
// lies in that gradient; "" otherwise.
Signature signature_of(const std::string& kernel, VerdictClass verdict, const Case& c,
                       const std::string& gradient = "");
// The feature a backward failure's gradient adds to its signature.
inline constexpr std::string_view kGradientFeaturePrefix = "grad:";

// FNV-1a 64 over bytes: the stable text hash used for names and pins.
uint64_t fnv1a64(std::string_view bytes);

}  // namespace afz
