// Adversarial case generators: one per class of the fuzzing issue (shapes,
// late maxima, flat rows, magnitude, masking, values, layouts, additive
// masks), and the backward classes of issue 14 (flagged `backward`).  Each is a small function of a counter-based RNG, registered in a
// table with a name and a default weight; a campaign mixes them by weight
// and any one of them can run alone.
//
// Case i of a campaign with seed S is a pure function of (S, i) and the mix:
// no generator keeps state between cases, so sharding, --jobs and resuming
// never change which cases run.  Only integer draws from CounterRng are used
// (no std:: distributions, no libm), so every machine builds the same cases.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/case/case.h"
#include "harness/case/rng.h"

namespace afz {

// Sequential draws from a counter-based stream: draw n uses counter n, so the
// k-th draw of a generator is the same on every machine.
struct Dice {
  CounterRng rng;
  uint64_t next = 0;

  uint64_t u64() { return rng.bits(next++); }
  uint64_t below(uint64_t n) { return rng.below(next++, n); }
  // Uniform in [lo, hi], both included.
  int range(int lo, int hi) { return lo + int(below(uint64_t(hi - lo) + 1)); }
  // True with probability permil / 1000.
  bool chance(int permil) { return int(below(1000)) < permil; }
  // One of the options, each equally likely: a table or a braced list.
  template <typename T, size_t N>
  T pick(const T (&options)[N]) { return options[below(N)]; }
};

struct GeneratorDef {
  const char* name;
  const char* summary;
  int default_weight;
  Case (*make)(Dice& dice);
  // A backward class (what breaks gradients: extreme LSEs, fully masked
  // rows, dO on a few rows, GQA sums; backward_generator_table()): its
  // cases record `pass bwd`, and only a backward (or both-pass) default mix
  // includes it.  Any class can be named in --classes.
  bool backward;
};

// Beyond this |LSE| (ln of fp32's largest value) exp(-LSE) or exp(LSE)
// overflows fp32: the bwd_lse_extreme class's rows reach past it.
inline constexpr double kBwdExtremeLse = 88.72;

// The forward classes: what forward campaigns, audits and the forward
// mutant gate sweep.
const std::vector<GeneratorDef>& generator_table();
// The backward classes (each flagged `backward`): in a backward or both-pass
// default mix (GeneratorMix::defaults(Pass::Bwd)), and in an audit's sweep
// only where the audit runs the backward pass.
const std::vector<GeneratorDef>& backward_generator_table();
// The opt-in classes (scale): never in a default mix, an audit's sweep or
// the mutant gate's default classes (their cases cost seconds to minutes
// each, past what CPU campaigns afford); `--classes scale` takes them.
const std::vector<GeneratorDef>& opt_in_generator_table();
// A class of any table by name.
const GeneratorDef* find_generator(std::string_view name);

// The work of a case in multiply-adds of q.k and p.v over every visible-or-
// not (b, h, i, j): what the CPU kernels and the oracle pay for it.
int64_t case_work(const Case& c);

// A weighted choice of generators.
class GeneratorMix {
 public:
  // Every generator of the pass at its default weight: Fwd the forward
  // classes (the backward ones left out); Bwd and Both every class, the
  // forward ones included (their masks, shapes and magnitudes reach the
  // gradients too).
  static GeneratorMix defaults(Pass pass = Pass::Fwd);
  // "late_max=3,masking=1" or "late_max,flat" (weight 1 each); "all" for the
  // pass's defaults (the opt-in classes only by name).  nullopt and a one-line *error for unknown names or bad weights.
  static std::optional<GeneratorMix> parse(std::string_view spec, std::string* error, Pass pass = Pass::Fwd);

  struct Entry {
    const GeneratorDef* gen;
    int weight;
  };
  const std::vector<Entry>& entries() const { return entries_; }
  std::string describe() const;  // canonical "name=w,..." form

  // The generator for case `index` of a campaign with `seed`.
  const GeneratorDef& choose(uint64_t seed, uint64_t index) const;

 private:
  std::vector<Entry> entries_;
  int total_ = 0;
};

struct GeneratedCase {
  Case c;
  const GeneratorDef* generator = nullptr;
};

// Case `index` of the campaign with `seed`: the generator is chosen by the
// mix from stream (seed, index); the case is built from the same stream.
GeneratedCase generate_case(const GeneratorMix& mix, uint64_t seed, uint64_t index);
// One generator alone (tests, `--classes NAME`).
Case generate_with(const GeneratorDef& gen, uint64_t seed, uint64_t index);

}  // namespace afz
