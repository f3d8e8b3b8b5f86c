#include "harness/campaign/audit.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <numeric>
#include <regex>
#include <set>
#include <stdexcept>
#include <tuple>

#include "harness/campaign/corpus.h"
#include "harness/campaign/in_flight.h"
#include "harness/campaign/ordered_pool.h"
#include "harness/campaign/stop_request.h"
#include "harness/case/case_file.h"
#include "harness/judge/signature.h"
#include "harness/run/gpu/gpu_run.h"
#include "kernels/abi/dtype.h"

namespace afz {
namespace {

// ------------------------------------------------------------ the axes --

constexpr afz_dtype kAuditDtypes[] = {AFZ_F32, AFZ_F16, AFZ_BF16};
// Head dims of real models, smallest to largest a FlashAttention kernel takes.
constexpr int kRepresentativeHeadDims[] = {8, 64, 128, 256};
// One size off the usual grid: the first one a kernel claims (33 needs a
// head_dim_multiple of 1; 72 and 96 are multiples of 8 that are not powers of 2).
constexpr int kOddHeadDims[] = {33, 72, 96};

struct MaskDef {
  MaskKind kind;
  const char* label;
};
constexpr MaskDef kMasks[] = {
    {MaskKind::None, "nomask"},          {MaskKind::CausalTopLeft, "causal_tl"},
    {MaskKind::CausalBottomRight, "causal_br"}, {MaskKind::Window, "window"},
    {MaskKind::Bool, "bool"},            {MaskKind::AddNegInf, "add_-inf"},
    {MaskKind::AddLowest, "add_lowest"}, {MaskKind::AddLarge, "add_-1e4"},
};

struct LayoutDef {
  LayoutKind kind;
  const char* label;
};
constexpr LayoutDef kLayouts[] = {
    {LayoutKind::Bhsd, "bhsd"},        {LayoutKind::Bshd, "bshd"},          {LayoutKind::PackedQkv, "packed_qkv"},
    {LayoutKind::RowGaps, "row_gap3"}, {LayoutKind::KvBroadcast, "kv_stride0"},
};

// Forced feature values.
// Two KV heads, so a kernel that maps query head h to h % heads_kv instead
// of h / group reads the wrong head; two query heads per KV head.
constexpr int kKvHeads = 2, kGqaGroup = 2;
// A window that cuts both sides of the diagonal (where the class has none).
constexpr int kWindowLeft = 48, kWindowRight = 16;
// The large finite negative of additive masks (HF-style -1e4: exp underflows
// in fp32 only after the max subtraction).
constexpr double kLargeNegative = -1e4;
// An odd row gap: rows start unaligned.
constexpr int kRowGap = 3;
// Unsupported reasons named on the summary line of each matrix.
constexpr size_t kSummaryReasons = 4;
// Varlen rows: at most this many of the class's sequences are kept.
constexpr int kMaxVarlenSequences = 4;
// Queries of the varlen row's last sequence, which has no keys at all
// (its rows are fully masked: the conventions are exercised).
constexpr int kEmptySequenceQueries = 5;
// Keys cut from the second sequence: its last key block is a partial one.
constexpr int kSecondSequenceCut = 17;

// Boolean patterns for classes that bring none: fully masked rows, masked
// key columns, a band, a random half (chosen by the case's own seed).
const MaskPattern kFallbackPatterns[] = {
    {"rows_every", {3, 1}}, {"cols_every", {5, 2}}, {"band", {-20, 4}}, {"random", {500}}};

// Multiply-adds per sweep case (case_work): keeps one kernel's sweep of
// ~20,000 cases within a couple of minutes on two cores.  The flat class's
// point is a long row, so it gets more, spent on keys.
constexpr int64_t kSweepWorkBudget = int64_t{1} << 18;
constexpr int64_t kLongRowWorkBudget = int64_t{1} << 20;
constexpr const char* kLongRowClass = "flat";
// Shrinking keeps at least this many keys as long as it can: two blocks of
// 64 and one more key, so late maxima still cross a block boundary.
constexpr int kKeysKept = 129;
constexpr int kQueriesKept = 8;

// Seed streams: the sweep's and the fuzz phase's cases never coincide with
// a plain campaign's of the same seed.
constexpr uint64_t kSweepSeedSalt = 0xa0d17'5eed'0001ull;
constexpr uint64_t kFuzzSeedSalt = 0xa0d17'5eed'0002ull;
// The fuzz phase's focus: classes with a failing sweep cell weigh this much more.
constexpr int kFocusWeightFactor = 4;
// Candidate cases per cell for one in the row's dtype: a class draws each
// dtype with probability at least 1/5, so 64 tries all miss with
// probability below 1e-6.
constexpr uint64_t kDtypeAttempts = 64;
// The fuzz phase gets at least this share of --time, even when the sweep
// took longer than the whole budget: an audit always fuzzes a little.
constexpr double kMinFuzzShare = 0.25;
// Below this the fuzz phase is not worth starting.
constexpr double kMinFuzzSeconds = 1.0;
// Minimizations per kernel x verdict class x generator class; failing
// cells past them keep their case as generated as the repro.
constexpr int kMaxMinimizedPerColumn = 8;
// Sweep cases computed ahead of the consumer, per worker: deep enough that a
// slow case (a worker restarted after a crash) does not idle the others.
constexpr int kLookaheadPerJob = 8;

constexpr const char* kFuzzRow = "fuzz phase (random features)";

bool claims_head_dim(const afz_caps& c, int d) {
  const int multiple = std::max(1, c.head_dim_multiple);
  return d >= c.min_head_dim && d <= c.max_head_dim && d % multiple == 0;
}

struct Stopwatch {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

void set_window(Case& c, int left, int right, afz_align align) {
  c.has_window = true;
  c.window_left = left;
  c.window_right = right;
  c.align = align;
}

void halve(std::vector<int32_t>& lengths) {
  for (int32_t& n : lengths) n = (n + 1) / 2;  // 0 stays 0, 1 stays 1
}

// Shrinks sequence lengths only (every forced feature stays): queries to
// a few, keys to two blocks and one, then queries to one, keys to one.
void shrink_to(Case& c, int64_t budget) {
  while (case_work(c) > budget) {
    if (c.max_seqlen_q() > kQueriesKept) halve(c.seqlens_q);
    else if (c.max_seqlen_k() > kKeysKept) halve(c.seqlens_k);
    else if (c.max_seqlen_q() > 1) halve(c.seqlens_q);
    else if (c.max_seqlen_k() > 1) halve(c.seqlens_k);
    else return;
  }
}

void force_mask(Case& c, MaskKind kind) {
  const bool class_window = c.has_window && !(c.window_left < 0 && c.window_right == 0);
  const int left = c.window_left, right = c.window_right;
  const afz_align align = c.align;
  const MaskPattern pattern = c.add_mask   ? c.add_mask->pattern
                              : c.bool_mask ? *c.bool_mask
                                            : kFallbackPatterns[c.seed % std::size(kFallbackPatterns)];
  c.has_window = false;
  c.window_left = c.window_right = -1;
  c.align = AFZ_ALIGN_BOTTOM_RIGHT;  // the format's value when no window is set
  c.bool_mask.reset();
  c.add_mask.reset();
  switch (kind) {
    case MaskKind::None: break;
    case MaskKind::CausalTopLeft: set_window(c, -1, 0, AFZ_ALIGN_TOP_LEFT); break;
    case MaskKind::CausalBottomRight: set_window(c, -1, 0, AFZ_ALIGN_BOTTOM_RIGHT); break;
    case MaskKind::Window:
      if (class_window) set_window(c, left, right, align);
      else set_window(c, kWindowLeft, kWindowRight, align);
      break;
    case MaskKind::Bool: c.bool_mask = pattern; break;
    case MaskKind::AddNegInf: c.add_mask = AddMask{pattern, AddValueKind::NegInf, 0}; break;
    case MaskKind::AddLowest: c.add_mask = AddMask{pattern, AddValueKind::Lowest, 0}; break;
    case MaskKind::AddLarge: c.add_mask = AddMask{pattern, AddValueKind::Number, kLargeNegative}; break;
  }
}

void force_sequences(Case& c, bool varlen) {
  auto at_least_one = [](int32_t n) { return std::max<int32_t>(n, 1); };
  if (!varlen) {
    // One sequence whose lengths are the extents: nothing for a kernel
    // without varlen support to decline.
    c.batch = 1;
    c.seqlens_q = {at_least_one(c.seqlens_q[0])};
    c.seqlens_k = {at_least_one(c.seqlens_k[0])};
    return;
  }
  bool differ = false;
  for (int b = 1; b < c.batch; ++b) differ |= c.seqlens_q[b] != c.seqlens_q[0] || c.seqlens_k[b] != c.seqlens_k[0];
  if (c.batch >= 2 && differ) {  // the class's own varlen batch
    c.batch = std::min(c.batch, kMaxVarlenSequences);
    c.seqlens_q.resize(size_t(c.batch));
    c.seqlens_k.resize(size_t(c.batch));
    return;
  }
  // The class's sequence, one with a partial last key block, one without keys.
  const int32_t sq = at_least_one(c.seqlens_q[0]), sk = at_least_one(c.seqlens_k[0]);
  c.batch = 3;
  c.seqlens_q = {sq, at_least_one(sq / 2 + 1), std::min<int32_t>(sq, kEmptySequenceQueries)};
  c.seqlens_k = {sk, at_least_one(sk - kSecondSequenceCut), 0};
}

void force_layout(Case& c, LayoutKind kind) {
  c.layout = Layout::BHSD;
  c.row_gap = 0;
  c.kv_broadcast = KvBroadcast::None;
  switch (kind) {
    case LayoutKind::Bhsd: break;
    case LayoutKind::Bshd: c.layout = Layout::BSHD; break;
    case LayoutKind::PackedQkv: c.layout = Layout::PackedQKV; break;
    case LayoutKind::RowGaps: c.row_gap = kRowGap; break;
    case LayoutKind::KvBroadcast: c.kv_broadcast = KvBroadcast::Heads; break;
  }
}

int verdict_rank(VerdictClass v) { return int(v); }

}  // namespace

// ------------------------------------------------------- rows and cases --

std::string AuditRow::name() const {
  const char* mask_label = "?";
  for (const MaskDef& m : kMasks)
    if (m.kind == mask) mask_label = m.label;
  const char* layout_label = "?";
  for (const LayoutDef& l : kLayouts)
    if (l.kind == layout) layout_label = l.label;
  return fmt::format("{} d{} {} {} {} {}", dtype_name(dtype), head_dim, mask_label, gqa ? "gqa" : "mha",
                     varlen ? "varlen" : "fixed", layout_label);
}

std::vector<const GeneratorDef*> audit_classes(const std::vector<CampaignKernel>& kernels) {
  std::vector<const GeneratorDef*> out;
  for (const GeneratorDef& g : generator_table()) out.push_back(&g);
  const bool backward = std::any_of(kernels.begin(), kernels.end(), [](const CampaignKernel& k) { return k.backward; });
  if (backward)
    for (const GeneratorDef& g : backward_generator_table()) out.push_back(&g);
  return out;
}

std::vector<AuditRow> audit_rows(const std::vector<const afz_kernel*>& kernels) {
  auto any_claims = [&](auto&& pred) {
    for (const afz_kernel* k : kernels)
      if (pred(k->caps)) return true;
    return false;
  };
  std::vector<afz_dtype> dtypes;
  for (afz_dtype t : kAuditDtypes)
    if (any_claims([&](const afz_caps& c) { return (c.in_dtypes & (1u << t)) && (c.out_dtypes & (1u << t)); }))
      dtypes.push_back(t);
  std::vector<int> dims;
  for (int d : kRepresentativeHeadDims)
    if (any_claims([&](const afz_caps& c) { return claims_head_dim(c, d); })) dims.push_back(d);
  for (int d : kOddHeadDims)
    if (any_claims([&](const afz_caps& c) { return claims_head_dim(c, d); })) {
      dims.push_back(d);
      break;
    }
  std::vector<AuditRow> rows;
  for (afz_dtype t : dtypes)
    for (int d : dims)
      for (const MaskDef& m : kMasks)
        for (bool gqa : {false, true})
          for (bool varlen : {false, true})
            for (const LayoutDef& l : kLayouts) rows.push_back({t, d, m.kind, gqa, varlen, l.kind});
  return rows;
}

Case force_features(Case c, const AuditRow& row) {
  c.in_dtype = c.out_dtype = row.dtype;
  c.head_dim = c.head_dim_v = row.head_dim;
  force_mask(c, row.mask);
  c.heads_kv = kKvHeads;
  c.heads_q = row.gqa ? kKvHeads * kGqaGroup : kKvHeads;
  force_sequences(c, row.varlen);
  force_layout(c, row.layout);
  return c;
}

Case audit_cell_case(uint64_t seed, size_t row_index, const AuditRow& row, const GeneratorDef& gen, int n,
                     int cases_per_cell) {
  const uint64_t index = uint64_t(row_index) * uint64_t(cases_per_cell) + uint64_t(n);
  // Generators choose values for their input dtype (the largest finite
  // value only in fp16; planted scores within the dtype's range): take the
  // first of the cell's candidate cases generated in the row's dtype, so
  // forcing the dtype never breaks what the class made sure of.
  Case generated;
  for (uint64_t attempt = 0; attempt < kDtypeAttempts; ++attempt) {
    generated = generate_with(gen, seed ^ kSweepSeedSalt, index * kDtypeAttempts + attempt);
    if (generated.in_dtype == row.dtype) break;
  }
  const bool dtype_matches = generated.in_dtype == row.dtype;
  // Planted scores were sized for the generated scale (1/sqrt(head_dim)):
  // the case keeps that scale explicitly when the head dim changes.
  if (!generated.scale && !generated.transforms.empty() && generated.head_dim != row.head_dim)
    generated.scale = double(generated.effective_scale());
  Case c = force_features(std::move(generated), row);
  // No candidate in the row's dtype (never seen with the built-in classes):
  // a transform sized for another dtype is dropped rather than overflow the inputs.
  if (!dtype_matches) c.transforms.clear();
  shrink_to(c, std::string_view(gen.name) == kLongRowClass ? kLongRowWorkBudget : kSweepWorkBudget);
  return c;
}

std::vector<std::string> convention_differences(const std::vector<const afz_kernel*>& kernels) {
  std::vector<std::string> out;
  auto compare = [&](const char* what, auto value_of) {
    std::map<std::string, std::vector<std::string>> by_value;
    for (const afz_kernel* k : kernels) by_value[value_of(*k)].push_back(k->name);
    if (by_value.size() < 2) return;
    std::string line = std::string(what) + ":";
    bool first = true;
    for (const auto& [value, names] : by_value) {
      line += (first ? " " : "; ") + value + " (";
      for (size_t i = 0; i < names.size(); ++i) line += (i ? ", " : "") + names[i];
      line += ")";
      first = false;
    }
    out.push_back(line);
  };
  compare("masked row output", [](const afz_kernel& k) { return masked_row_name(k.conventions.masked_row_output); });
  compare("LSE of an empty row", [](const afz_kernel& k) { return empty_lse_name(k.conventions.empty_lse); });
  compare("causal alignments", [](const afz_kernel& k) {
    const bool tl = k.caps.flags & AFZ_CAP_CAUSAL_TOP_LEFT, br = k.caps.flags & AFZ_CAP_CAUSAL_BOTTOM_RIGHT;
    return std::string(tl && br ? "top-left and bottom-right" : tl ? "top-left only" : br ? "bottom-right only" : "none");
  });
  return out;
}

// ------------------------------------------------------------ the audit --

namespace {

// One sweep case through every kernel.
struct SweepWork {
  Case c;
  std::vector<CaseOutcome> outcomes;  // per kernel
  double generate_s = 0, oracle_s = 0;
  std::string error;
};

class Audit {
 public:
  Audit(const AuditOptions& o, const Runner& runner) : o_(o), runner_(runner) {
    if (o.kernels.empty()) throw std::runtime_error("audit: no kernels to audit");
    if (o.cases_per_cell < 1) throw std::runtime_error("audit: --cases-per-cell must be at least 1");
    if (o.shards < 1 || o.shard < 0 || o.shard >= o.shards)
      throw std::runtime_error(fmt::format("audit: shard {} of {} does not exist", o.shard, o.shards));
    if (o.end_cell >= 0 && (o.first_cell < 0 || o.first_cell >= o.end_cell))
      throw std::runtime_error(fmt::format("audit: cells {}-{} is an empty range", o.first_cell, o.end_cell));
    if (!o.corpus_dir.empty()) {
      std::string error;
      corpus_ = Corpus::open(o.corpus_dir, &error);
      if (!corpus_) throw std::runtime_error(error);
      for (const std::string& e : corpus_->load_errors()) report_.errors.push_back("corpus: " + e);
      for (std::string& sig : corpus_->signatures()) known_at_start_.insert(std::move(sig));
    }
    for (const CampaignKernel& k : o.kernels) kernels_.push_back(k.kernel);
    rows_ = audit_rows(kernels_);
    classes_ = audit_classes(o.kernels);
    const std::vector<std::string> notes = convention_differences(kernels_);
    for (const afz_kernel* k : kernels_) {
      ReportAudit a;
      a.kernel = k->name;
      for (const AuditRow& r : rows_) a.rows.push_back(r.name());
      for (const GeneratorDef* g : classes_) a.columns.push_back(g->name);
      // Tagged here, so that a reader of the report (and the summary) tells
      // them from the sweep's own notes (stops, skipped cells, budgets).
      for (const std::string& n : notes) a.notes.push_back("conventions differ: " + n);
      report_.audits.push_back(std::move(a));
      for (const GeneratorDef* g : classes_) report_.cells.push_back({k->name, g->name, 0, {}});
    }
    class_cases_.assign(classes_.size(), 0);
    kernel_s_.assign(kernels_.size(), 0);
    for (const afz_kernel* k : kernels_) timing_at_start_.push_back(library_kernel_timing(*k));
  }

  Report run();

 private:
  SweepWork compute(int64_t cell, int n) const;
  void consume(int64_t cell, int n, SweepWork& w);
  std::string failure(size_t k, const SweepWork& w, VerdictClass cls, int64_t cell, int n);
  void fuzz_phase(double seconds);
  std::string repro_command(size_t k, const std::string& path, VerdictClass cls) const;
  std::optional<CaseOutcome> run_one(size_t k, const Case& c) const;
  Report finish(const std::string& stop_reason);

  const AuditOptions& o_;
  const Runner& runner_;
  Stopwatch clock_;
  std::string started_utc_ = utc_now();
  Report report_;
  std::optional<Corpus> corpus_;
  std::set<std::string> known_at_start_;
  std::vector<const afz_kernel*> kernels_;
  std::vector<AuditRow> rows_;
  std::vector<const GeneratorDef*> classes_;
  std::map<std::string, std::string> raw_to_signature_;
  std::map<std::string, size_t> by_signature_;
  std::vector<int64_t> class_cases_;
  std::vector<double> kernel_s_;
  // Libraries' own time splits when the run began (afz_kernel_timing).
  std::vector<std::optional<afz_kernel_timing>> timing_at_start_;
  std::set<std::string> failing_classes_;
  std::map<std::tuple<size_t, VerdictClass, size_t>, int> minimized_;  // kernel, verdict, class
  int64_t unminimized_by_budget_ = 0;  // new raw signatures saved as generated: the budget was spent
  int64_t sweep_cases_ = 0, fuzz_cases_ = 0;
  // Sweep cells with a kernel's outcome dropped because the GPU was lost.
  std::set<int64_t> lost_cells_;
};

std::optional<CaseOutcome> Audit::run_one(size_t k, const Case& c) const {
  try {
    return run_campaign_kernel(o_.kernels[k], runner_, c, /*rerun=*/false);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string Audit::repro_command(size_t k, const std::string& path, VerdictClass cls) const {
  return repro_command_line(o_.kernels[k].origin, runner_.options(), path, cls);
}

SweepWork Audit::compute(int64_t cell, int n) const {
  const size_t r = size_t(cell) / classes_.size(), g = size_t(cell) % classes_.size();
  SweepWork w;
  w.outcomes.resize(kernels_.size());
  Stopwatch generate;
  w.c = audit_cell_case(o_.seed, r, rows_[r], *classes_[g], n, o_.cases_per_cell);
  try {
    auto inputs = std::make_unique<Materialized>(w.c);
    w.generate_s = generate.seconds();
    // Capabilities first: a cell no kernel takes costs no oracle time.
    std::vector<std::string> declined(kernels_.size());
    bool any = false;
    for (size_t k = 0; k < kernels_.size(); ++k) {
      declined[k] = unsupported_reason(*kernels_[k], inputs->problem());
      any |= declined[k].empty() && !o_.kernels[k].backward;  // the forward oracle is for forward kernels
    }
    OracleResult reference;
    if (any) {
      Stopwatch oracle;
      reference = runner_.reference(*inputs);
      w.oracle_s = oracle.seconds();
    }
    for (size_t k = 0; k < kernels_.size(); ++k) {
      if (!declined[k].empty()) {
        w.outcomes[k].verdict.cls = VerdictClass::Unsupported;
        w.outcomes[k].verdict.detail = declined[k];
        continue;
      }
      w.outcomes[k] = run_campaign_kernel(o_.kernels[k], runner_, w.c, *inputs, &reference, /*rerun=*/false);
      // A backward slot materializes its own inputs and runs its own oracle.
      w.generate_s += w.outcomes[k].timing.generate;
      w.oracle_s += w.outcomes[k].timing.oracle;
    }
  } catch (const std::exception& e) {
    w.error = e.what();
  }
  return w;
}

// A failing sweep case: its signature, minimized and saved the first time
// its raw signature is met (as the campaign does).
std::string Audit::failure(size_t k, const SweepWork& w, VerdictClass cls, int64_t cell, int n) {
  const afz_kernel& kernel = *kernels_[k];
  const std::string gradient = failure_gradient(o_.kernels[k], w.outcomes[k].verdict);
  const std::string raw = signature_of(kernel.name, cls, w.c, gradient).text();
  if (auto it = raw_to_signature_.find(raw); it != raw_to_signature_.end()) {
    report_.count_raw_occurrence(raw);
    ++report_.failures[by_signature_[it->second]].occurrences;
    return it->second;
  }
  const size_t r = size_t(cell) / classes_.size(), g = size_t(cell) % classes_.size();
  ReportFailure f;
  f.kernel = kernel.name;
  f.verdict = cls;
  f.pass = o_.kernels[k].backward ? "bwd" : "";
  f.gradient = gradient;
  f.raw_signature = raw;
  f.generator = classes_[g]->name;
  f.seed = o_.seed;
  f.case_index = cell * o_.cases_per_cell + n;
  f.occurrences = 1;

  CaseOutcome last = w.outcomes[k];
  auto still_fails = [&](const Case& cand) {
    std::optional<CaseOutcome> out = run_one(k, cand);
    if (!out || !same_failure(o_.kernels[k], w.outcomes[k].verdict, out->verdict)) return false;
    last = *out;
    return true;
  };
  // A badly broken kernel fails thousands of cells with as many raw
  // signatures: past kMaxMinimizedPerColumn minimizations per kernel x
  // verdict x class, a cell's repro is its case as generated (already
  // small: the sweep's work budget).
  Stopwatch minimize_time;
  MinimizeResult mr;
  const bool budget_left = o_.minimize_budget_s <= 0 || report_.timing.minimize_s < o_.minimize_budget_s;
  if (!budget_left) ++unminimized_by_budget_;
  if (budget_left && minimized_[{k, cls, g}]++ < kMaxMinimizedPerColumn) {
    mr = minimize_case(w.c, still_fails, o_.minimize_options);
  } else {
    mr.best = w.c;
    mr.from = mr.to = case_size(w.c);
  }
  report_.timing.minimize_s += minimize_time.seconds();
  Case best = mr.best;
  stamp_failure_case(o_.kernels[k], best);
  f.signature = signature_of(kernel.name, cls, best, gradient).text();
  f.detail = last.verdict.detail;
  f.worst = last.verdict.worst;
  f.minimize = {mr.from.elements, mr.to.elements, mr.runs, mr.seconds, mr.exhausted};
  f.status = known_at_start_.count(f.signature) ? "known" : "new";
  best.provenance = {
      "found by attnfuzz " + std::string(kAttnfuzzVersion) + " audit on " + utc_now(),
      "kernel " + f.kernel,
      fmt::format("audit seed {} cell {} x {} case {}", o_.seed, rows_[r].name(), f.generator, n),
  };
  for (const std::string& line : verdict_provenance(f)) best.provenance.push_back(line);
  if (corpus_) {
    std::string path, error;
    const std::optional<Corpus::Saved> saved = corpus_->save(best, f.signature, raw, &path, &error);
    if (!saved) throw std::runtime_error(error);
    const CorpusEntry& e = *corpus_->find(f.signature);
    if (*saved == Corpus::Saved::Smaller && f.status == "known") f.status = "smaller";
    f.case_file = path;
    f.repro = repro_command(k, path, cls);
    f.case_text = write_case(e.c);
  } else {
    f.case_text = write_case(best);
  }
  report_.note_raw_failure(f);
  raw_to_signature_[raw] = f.signature;
  if (auto it = by_signature_.find(f.signature); it != by_signature_.end()) {
    ++report_.failures[it->second].occurrences;
    return f.signature;
  }
  by_signature_[f.signature] = report_.failures.size();
  report_.failures.push_back(f);
  if (o_.on_failure) o_.on_failure(f);
  return f.signature;
}

void Audit::consume(int64_t cell, int n, SweepWork& w) {
  const size_t r = size_t(cell) / classes_.size(), g = size_t(cell) % classes_.size();
  // Outcomes `unsupported` only because the GPU was lost did not run: they
  // count nowhere, and a case with nothing else was not run at all.
  bool any_lost = false, all_lost = w.error.empty();
  for (const CaseOutcome& out : w.outcomes) {
    const bool lost = lost_to_gpu(out);
    any_lost |= lost;
    all_lost &= lost;
  }
  if (any_lost) lost_cells_.insert(cell);
  if (any_lost && all_lost) return;
  ++sweep_cases_;
  ++class_cases_[g];
  report_.timing.generate_s += w.generate_s;
  report_.timing.oracle_s += w.oracle_s;
  const std::string row = rows_[r].name(), column = classes_[g]->name;
  if (!w.error.empty()) {
    report_.errors.push_back(fmt::format("audit cell {} x {} case {}: {}", row, column, n, w.error));
    return;
  }
  bool failing_case = false;
  ReportCase record{cell * o_.cases_per_cell + n, column, {}};
  for (size_t k = 0; k < kernels_.size(); ++k) {
    const CaseOutcome& out = w.outcomes[k];
    const VerdictClass cls = out.verdict.cls;
    record.verdicts.push_back(cls);
    if (lost_to_gpu(out)) continue;
    ReportCell& counts = report_.cells[k * classes_.size() + g];
    ++counts.cases;
    ++counts.by_verdict[size_t(cls)];
    report_.timing.kernel_s += out.timing.kernel;
    report_.timing.judge_s += out.timing.judge;
    report_.run.reruns += out.reran ? 1 : 0;
    kernel_s_[k] += out.timing.kernel;
    if (cls != VerdictClass::Unsupported) report_.add_error_stats(kernels_[k]->name, out.verdict);

    // The matrix cell: created by its first case, then the most severe verdict wins.
    std::vector<ReportAuditCell>& cells = report_.audits[k].cells;
    if (cells.empty() || cells.back().row != row || cells.back().column != column)
      cells.push_back({row, column, "unsupported", VerdictClass::Unsupported, 0, ""});
    ReportAuditCell& m = cells.back();
    ++m.cases;
    if (cls == VerdictClass::Unsupported) {
      report_.audits[k].count_unsupported(out.verdict.detail);
      continue;
    }
    if (!is_failure(cls)) {
      if (m.status == "unsupported") {
        m.status = "pass";
        m.verdict = VerdictClass::Pass;
      }
      continue;
    }
    failing_classes_.insert(column);
    failing_case = true;
    const std::string signature = failure(k, w, cls, cell, n);
    if (m.status != "fail" || verdict_rank(cls) > verdict_rank(m.verdict)) {
      m.status = "fail";
      m.verdict = cls;
      m.signature = signature;
    }
  }
  // Only the failing sweep cases are recorded (all 20,000 would double the
  // report, and the matrix and counts already hold the passes), and only the
  // first kCaseRecordLimit of them: a broken kernel fails most cells.
  if (failing_case) {
    report_.failing_case_count = report_.failing_case_count.value_or(0) + 1;
    report_.record_case(std::move(record));
  }
}

// The campaign driver for the time the sweep left, weighted towards the
// classes that failed in the sweep; its results join the report.
void Audit::fuzz_phase(double seconds) {
  CampaignOptions c;
  c.kernels = o_.kernels;
  c.seed = (o_.seed ^ kFuzzSeedSalt) + uint64_t(o_.shard);  // shards fuzz different cases
  c.time_s = seconds;
  c.jobs = o_.jobs;
  std::string spec;
  for (const GeneratorDef* g : classes_) {
    const int weight = g->default_weight * (failing_classes_.count(g->name) ? kFocusWeightFactor : 1);
    spec += (spec.empty() ? "" : ",") + fmt::format("{}={}", g->name, weight);
  }
  std::string error;
  c.mix = *GeneratorMix::parse(spec, &error);
  c.corpus_dir = o_.corpus_dir;
  c.minimize_options = o_.minimize_options;
  c.keep_case_records = false;
  c.command = o_.command;
  c.on_progress = o_.on_fuzz_progress;
  c.on_failure = o_.on_failure;
  const Report fz = run_campaign(c, runner_);
  fuzz_cases_ = fz.run.cases;
  report_.run.classes = fz.run.classes;

  for (const ReportCell& cell : fz.cells) {
    for (size_t k = 0; k < kernels_.size(); ++k) {
      if (cell.kernel != kernels_[k]->name) continue;
      for (size_t g = 0; g < classes_.size(); ++g) {
        if (cell.generator != classes_[g]->name) continue;
        ReportCell& counts = report_.cells[k * classes_.size() + g];
        counts.cases += cell.cases;
        for (size_t v = 0; v < counts.by_verdict.size(); ++v) counts.by_verdict[v] += cell.by_verdict[v];
        class_cases_[g] += cell.cases;
        // The matrix's fuzz row: one cell per class.
        ReportAuditCell m{kFuzzRow, cell.generator, "unsupported", VerdictClass::Unsupported, cell.cases, ""};
        if (cell.cases > cell.count(VerdictClass::Unsupported)) m.status = "pass", m.verdict = VerdictClass::Pass;
        for (int v = kVerdictClassCount - 1; v >= 0; --v)
          if (is_failure(VerdictClass(v)) && cell.by_verdict[size_t(v)] > 0) {
            m.status = "fail";
            m.verdict = VerdictClass(v);
            for (const ReportFailure& f : fz.failures)
              if (f.kernel == cell.kernel && f.verdict == m.verdict && f.generator == cell.generator) {
                m.signature = f.signature;
                break;
              }
            break;
          }
        report_.audits[k].cells.push_back(m);
      }
    }
  }
  for (ReportAudit& a : report_.audits) a.rows.push_back(kFuzzRow);
  report_.append_raw_failures(fz);
  report_.run.reruns += fz.run.reruns;
  for (const ReportFailure& f : fz.failures) {
    if (auto it = by_signature_.find(f.signature); it != by_signature_.end()) {
      report_.failures[it->second].occurrences += f.occurrences;
      continue;
    }
    by_signature_[f.signature] = report_.failures.size();
    report_.failures.push_back(f);
  }
  for (const ReportErrorStats& e : fz.error_stats) {
    auto it = std::lower_bound(report_.error_stats.begin(), report_.error_stats.end(), e,
                               [](const ReportErrorStats& a, const ReportErrorStats& b) {
                                 return std::tie(a.kernel, a.series) < std::tie(b.kernel, b.series);
                               });
    if (it == report_.error_stats.end() || it->kernel != e.kernel || it->series != e.series)
      it = report_.error_stats.insert(it, ReportErrorStats{e.kernel, e.series, {}});
    it->stats.merge(e.stats);
  }
  for (const std::string& e : fz.errors) report_.errors.push_back("fuzz phase: " + e);
  for (size_t k = 0; k < fz.kernels.size() && k < kernel_s_.size(); ++k) kernel_s_[k] += fz.kernels[k].kernel_s;
  ReportTiming& t = report_.timing;
  t.generate_s += fz.timing.generate_s;
  t.oracle_s += fz.timing.oracle_s;
  t.kernel_s += fz.timing.kernel_s;
  t.judge_s += fz.timing.judge_s;
  t.minimize_s += fz.timing.minimize_s;
}

namespace {

// A stride near cells / golden ratio, coprime with cells: slot -> slot *
// stride mod cells is a permutation whose first slots land all over the
// matrix (consecutive slots about 0.62 of it apart).
int64_t interleave_stride(int64_t cells) {
  constexpr int64_t kGoldenNum = 618034, kGoldenDen = 1000000;
  if (cells <= 2) return 1;
  int64_t s = std::max<int64_t>(1, cells * kGoldenNum / kGoldenDen);
  while (std::gcd(s, cells) != 1) ++s;
  return s;
}

// The cells a sweep runs, in its order: the shard's slots (or --cells'
// range) of the stride permutation, less the cells every kernel already has
// in an earlier report (--skip-covered).  `range`: the slots before that.
struct SweepPlan {
  std::vector<int64_t> cells;
  std::vector<int64_t> slots;  // each cell's slot in shard order (what --cells A-B counts)
  int64_t range = 0;
  int64_t skipped_covered = 0, skipped_rows = 0;
};

// --rows: ECMAScript, so '^(?!.*row_gap3)' names the rows without row gaps.
std::regex rows_regex(const std::string& pattern) {
  try {
    return std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    throw std::runtime_error(fmt::format("audit: --rows '{}' is not a regular expression: {}", pattern, e.what()));
  }
}

SweepPlan plan_sweep(const AuditOptions& o, const std::vector<AuditRow>& rows,
                     const std::vector<const GeneratorDef*>& classes) {
  const int64_t cells = int64_t(rows.size() * classes.size());
  const int64_t stride = o.interleave_cells ? interleave_stride(cells) : 1;
  // __int128: slot * stride overflows int64 past 3e9 cells x stride.
  auto cell_at = [&](int64_t slot) { return int64_t((__int128(slot) * stride) % cells); };
  int64_t begin = cells * o.shard / o.shards, end = cells * (o.shard + 1) / o.shards;
  if (o.end_cell >= 0) {
    if (o.end_cell > cells)
      throw std::runtime_error(
          fmt::format("audit: --cells {}-{} passes the matrix's {} cells", o.first_cell, o.end_cell, cells));
    begin = o.first_cell;
    end = o.end_cell;
  }
  std::vector<std::string> names;
  for (const CampaignKernel& k : o.kernels) names.push_back(k.kernel->name);
  // The rows --rows keeps, decided once per row, not once per cell.
  std::vector<bool> row_kept(rows.size(), true);
  if (!o.rows_regex.empty()) {
    const std::regex keep = rows_regex(o.rows_regex);
    for (size_t r = 0; r < rows.size(); ++r) row_kept[r] = std::regex_search(rows[r].name(), keep);
  }
  SweepPlan plan;
  plan.range = end - begin;
  for (int64_t slot = begin; slot < end; ++slot) {
    const int64_t cell = cell_at(slot);
    const size_t r = size_t(cell) / classes.size(), g = size_t(cell) % classes.size();
    if (!row_kept[r]) {
      ++plan.skipped_rows;
    } else if (!o.covered.by_kernel.empty() && o.covered.covers(names, rows[r].name(), classes[g]->name)) {
      ++plan.skipped_covered;
    } else {
      plan.cells.push_back(cell);
      plan.slots.push_back(slot);
    }
  }
  return plan;
}

}  // namespace

Report Audit::run() {
  const SweepPlan plan = plan_sweep(o_, rows_, classes_);
  const std::vector<int64_t>& order = plan.cells;
  for (ReportAudit& a : report_.audits) {
    if (plan.skipped_rows > 0)
      a.notes.push_back(fmt::format("{} of the range's {} cells skipped: their rows do not match --rows '{}'",
                                    plan.skipped_rows, plan.range, o_.rows_regex));
    if (plan.skipped_covered > 0)
      a.notes.push_back(fmt::format("{} of the range's {} cells skipped: earlier reports cover them (--skip-covered)",
                                    plan.skipped_covered, plan.range));
  }
  const int64_t todo = int64_t(order.size());
  InFlightLog in_flight(o_.in_flight_path,
                        "# attnfuzz audit: the sweep's cases running now (each line's --cells runs it alone, with the\n"
                        "# same kernels and seed); after a kill or a lost GPU, the cases that were running then\n",
                        o_.in_flight_history_path);
  const int64_t per_cell = o_.cases_per_cell;
  // A lost GPU stops the sweep as a stop request does; the cells computed
  // ahead that lost a kernel's outcome to it count as not run.
  auto note_gpu_lost = [&](int64_t done) {
    for (ReportAudit& a : report_.audits)
      a.notes.push_back(gpu_lost_note(done - int64_t(lost_cells_.size()), "cells"));
  };
  bool gpu_lost_noted = false;
  // Stops fall on cell boundaries: a cell's cases are all run or none.
  auto go_on = [&](int64_t i) {
    if (i % per_cell != 0) return true;
    const int64_t done = i / per_cell;
    if (!gpu::gpu_lost_reason().empty()) {
      note_gpu_lost(done);
      gpu_lost_noted = true;
      return false;
    }
    const bool out_of_time = o_.sweep_time_s > 0 && clock_.seconds() > o_.sweep_time_s;
    if (!out_of_time && !stop_requested()) return true;
    const std::string by = out_of_time ? fmt::format("--sweep-time {:.0f} s", o_.sweep_time_s) : "a signal";
    for (ReportAudit& a : report_.audits)
      a.notes.push_back(fmt::format("sweep stopped by {} after {} of {} cells: {} cells not run", by, done,
                                    todo, todo - done));
    return false;
  };
  // Cases are computed on the workers, ahead of this thread, and consumed
  // here in order: failures are minimized on this thread, in cell order.
  run_in_order(
      0, todo * per_cell, o_.jobs, int64_t(std::max(1, o_.jobs)) * kLookaheadPerJob,
      [&](int64_t i) {
        const size_t x = size_t(i / per_cell);
        const int64_t cell = order[x];
        const int n = int(i % per_cell);
        in_flight.started(i, fmt::format("--cells {}-{}  cell {}: {} x {} case {}", plan.slots[x], plan.slots[x] + 1,
                                         cell, rows_[size_t(cell) / classes_.size()].name(),
                                         classes_[size_t(cell) % classes_.size()]->name, n));
        SweepWork w = compute(cell, n);
        // A case the GPU's loss took stays listed: it may be the one that took the GPU.
        if (std::none_of(w.outcomes.begin(), w.outcomes.end(), lost_to_gpu)) in_flight.finished(i);
        return w;
      },
      go_on,
      [&](int64_t i, SweepWork&& w) {
        consume(order[size_t(i / per_cell)], int(i % per_cell), w);
        if (o_.on_sweep_progress && i % per_cell == per_cell - 1)
          o_.on_sweep_progress(i / per_cell + 1, todo);
      });
  if (unminimized_by_budget_ > 0)
    for (ReportAudit& a : report_.audits)
      a.notes.push_back(fmt::format("minimization budget of {:g} s spent: {} new raw signatures kept their "
                                    "cases as generated",
                                    o_.minimize_budget_s, unminimized_by_budget_));
  // Matrix order in the report, whatever order the sweep took.
  for (ReportAudit& a : report_.audits) {
    std::map<std::string, size_t> row_at, column_at;
    for (size_t r = 0; r < a.rows.size(); ++r) row_at.emplace(a.rows[r], r);
    for (size_t c = 0; c < a.columns.size(); ++c) column_at.emplace(a.columns[c], c);
    std::stable_sort(a.cells.begin(), a.cells.end(), [&](const ReportAuditCell& x, const ReportAuditCell& y) {
      return std::pair(row_at[x.row], column_at[x.column]) < std::pair(row_at[y.row], column_at[y.column]);
    });
  }
  if (!gpu::gpu_lost_reason().empty()) {
    if (!gpu_lost_noted) note_gpu_lost(todo);  // lost in the last chunk
    return finish(kGpuLostStopReason);
  }
  if (stop_requested()) return finish("signal");
  const double left = std::max(o_.time_s - clock_.seconds(), o_.time_s * kMinFuzzShare);
  if (left < kMinFuzzSeconds) return finish("cases");
  fuzz_phase(left);
  if (!gpu::gpu_lost_reason().empty()) {
    for (ReportAudit& a : report_.audits)
      a.notes.push_back(fmt::format("fuzz phase {}", gpu_lost_note(fuzz_cases_, "cases")));
    return finish(kGpuLostStopReason);
  }
  return finish(stop_requested() ? "signal" : "time");
}

Report Audit::finish(const std::string& stop_reason) {
  Report& r = report_;
  ReportRun& run = r.run;
  run.kind = "audit";
  run.command = o_.command;
  run.seed = o_.seed;
  run.first_case = 0;
  run.cases = sweep_cases_ + fuzz_cases_;
  run.case_limit = -1;
  run.time_limit_s = o_.time_s;
  run.stop_reason = stop_reason;
  run.jobs = o_.jobs;
  run.oracle = runner_.oracle_name();
  if (run.classes.empty()) run.classes = GeneratorMix::defaults().describe();
  run.corpus = o_.corpus_dir;
  // `attnfuzz audit` checks determinism on every case (cmd_audit.cpp).
  run.rerun_share = runner_.options().check_determinism ? 1 : 0;
  run.wall_s = clock_.seconds();
  run.started_utc = started_utc_;
  for (size_t k = 0; k < kernels_.size(); ++k) {
    const afz_kernel& kernel = *kernels_[k];
    r.kernels.push_back({kernel.name, o_.kernels[k].origin, kernel.description ? kernel.description : "",
                         masked_row_name(kernel.conventions.masked_row_output),
                         empty_lse_name(kernel.conventions.empty_lse), kernel_s_[k],
                         split_between(timing_at_start_[k], library_kernel_timing(kernel))});
    if (o_.kernels[k].backward) r.kernels.back().pass = "bwd";
  }
  for (size_t g = 0; g < classes_.size(); ++g)
    r.generators.push_back({classes_[g]->name, classes_[g]->default_weight, class_cases_[g]});
  std::erase_if(r.cells, [](const ReportCell& c) { return c.cases == 0; });
  r.timing.wall_s = run.wall_s;
  r.timing.cases_per_second = run.wall_s > 0 ? double(run.cases) / run.wall_s : 0;
  return std::move(r);
}

}  // namespace

std::vector<SweepCell> audit_sweep_cells(const AuditOptions& o) {
  std::vector<const afz_kernel*> kernels;
  for (const CampaignKernel& k : o.kernels) kernels.push_back(k.kernel);
  const std::vector<AuditRow> rows = audit_rows(kernels);
  const std::vector<const GeneratorDef*> classes = audit_classes(o.kernels);
  std::vector<SweepCell> out;
  for (const int64_t cell : plan_sweep(o, rows, classes).cells)
    out.push_back({cell, rows[size_t(cell) / classes.size()].name(), classes[size_t(cell) % classes.size()]->name});
  return out;
}

Report run_audit(const AuditOptions& options, const Runner& runner) {
  Audit a(options, runner);
  return a.run();
}

std::vector<std::string> audit_summary(const Report& r) {
  std::vector<std::string> out;
  for (const ReportAudit& a : r.audits) {
    int64_t pass = 0, fail = 0, unsupported = 0;
    std::map<std::string, int64_t> by_verdict;
    std::map<std::string, int64_t> failing_columns;
    for (const ReportAuditCell& c : a.cells) {
      if (c.status == "pass") ++pass;
      else if (c.status == "unsupported") ++unsupported;
      else {
        ++fail;
        ++by_verdict[std::string(verdict_name(c.verdict))];
        ++failing_columns[c.column];
      }
    }
    out.push_back(fmt::format("{}: {} rows x {} classes: {} cells pass, {} fail, {} unsupported", a.kernel,
                              a.rows.size(), a.columns.size(), pass, fail, unsupported));
    if (fail) {
      std::string verdicts, columns;
      for (const auto& [v, n] : by_verdict) verdicts += fmt::format("{}{} {}", verdicts.empty() ? "" : ", ", n, v);
      for (const auto& [c, n] : failing_columns) columns += fmt::format("{}{} {}", columns.empty() ? "" : ", ", c, n);
      out.push_back("  failing cells by verdict: " + verdicts);
      out.push_back("  failing cells by class: " + columns);
    }
    if (unsupported) {
      // The reasons most often given first: which declared capability or
      // library check shaped the matrix.
      std::vector<std::pair<int64_t, std::string>> reasons;
      for (const auto& [why, n] : a.unsupported_reasons) reasons.push_back({-n, why});
      std::sort(reasons.begin(), reasons.end());
      std::string line;
      for (size_t i = 0; i < reasons.size() && i < kSummaryReasons; ++i)
        line += fmt::format("{}{} x {}", line.empty() ? "" : "; ", -reasons[i].first, reasons[i].second);
      if (!line.empty()) out.push_back("  unsupported cases by reason: " + line);
    }
    for (const std::string& note : a.notes) out.push_back("  " + note);
  }
  return out;
}

}  // namespace afz
