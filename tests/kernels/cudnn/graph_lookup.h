// Finding a tensor or an operation in an SdpaGraph description by uid or
// name, for the forward and backward graph tests; a missing one throws, so
// the test fails with its name instead of dereferencing null.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cudnn/sdpa_graph.h"

namespace afz::cudnn::testing {

inline const GraphTensor& tensor(const SdpaGraph& g, int64_t uid) {
  const GraphTensor* t = g.tensor(uid);
  if (!t) throw std::runtime_error("no tensor uid " + std::to_string(uid));
  return *t;
}

inline const GraphOp& op(const SdpaGraph& g, const std::string& name) {
  for (const GraphOp& o : g.ops)
    if (o.name == name) return o;
  throw std::runtime_error("no op " + name);
}

}  // namespace afz::cudnn::testing
