// Adversarial value transforms: the table behind `transform NAME key=value`.
//
// Each transform edits the logical tensors (doubles, before rounding to the
// input dtype).  Transforms that shape scores use a carrier coordinate: q's
// coordinate 0 is set to 1 and k_j's coordinate 0 to t_j / scale, so score
// s_ij = t_j + (the rest of the dot product).  That plants maxima, offsets
// and ties at chosen key positions independently of the random values.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "harness/case/case.h"
#include "harness/case/materialize.h"
#include "harness/case/rng.h"

namespace afz {

struct TransformParam {
  const char* key;
  double fallback;
  const char* meaning;
};

struct TransformDef {
  const char* name;
  const char* summary;
  std::vector<TransformParam> params;
  void (*apply)(const Case& c, const Transform& t, const CounterRng& rng, LogicalTensors& x);
};

const std::vector<TransformDef>& transform_table();
const TransformDef* find_transform(std::string_view name);
// One-line error for an unknown transform or parameter, empty if fine.
std::string check_transform(const Transform& t);

}  // namespace afz
