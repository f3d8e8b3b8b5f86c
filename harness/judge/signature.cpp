#include "harness/judge/signature.h"

#include <fmt/format.h>


namespace afz {

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : bytes) {
    h ^= ch;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string Signature::text() const {
  std::string feats;
  for (const std::string& f : features) feats += (feats.empty() ? "" : ",") + f;
  return fmt::format("{}|{}|{}|{}", kernel, verdict_name(verdict), feats, shape);
}

std::string Signature::short_hash() const { return fmt::format("{:016x}", fnv1a64(text())); }

Signature signature_of(const std::string& kernel, VerdictClass verdict, const Case& c, const std::string& gradient) {
  Signature s{kernel, verdict, case_features(c), shape_class(c)};
  if (!gradient.empty()) s.features.push_back(std::string(kGradientFeaturePrefix) + gradient);
  return s;
}

}  // namespace afz
