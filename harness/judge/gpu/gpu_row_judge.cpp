// make_gpu_row_judge where CUDA is built (CMakeLists.txt): a RowJudge over
// DeviceRows, with the host's objects turned into the views it copies.
#include <algorithm>

#include "harness/judge/gpu/device_rows.h"
#include "harness/judge/gpu_verdict.h"
#include "harness/judge/verdict_inputs.h"

namespace afz {

namespace {

class GpuRowJudge final : public RowJudge {
 public:
  GpuRowJudge(const afz_kernel& k, const Materialized& m, const OracleResult& r)
      : device_(host_inputs(k, m, r, bound_model(k, m.problem())), m.problem().batch) {}

  std::vector<int64_t> undecided(const RowModel& model) override {
    const std::vector<uint8_t> open = device_.open_rows(model);
    std::vector<int64_t> rows;
    for (size_t n = 0; n < open.size(); ++n)
      if (open[n]) rows.push_back(model.rows[n]);
    return rows;
  }

  VerdictSummary summarize(const RowModel& model, const std::vector<int64_t>& skip) override {
    std::vector<uint8_t> skipped(model.rows.size(), 0);
    for (size_t n = 0; n < model.rows.size(); ++n)
      skipped[n] = std::binary_search(skip.begin(), skip.end(), model.rows[n]);
    return device_.summarize(model, skipped);
  }

 private:
  gpu_verdict::DeviceRows device_;
};

}  // namespace

std::unique_ptr<RowJudge> make_gpu_row_judge(const afz_kernel& k, const Materialized& m, const OracleResult& r,
                                             std::string* why) {
  if (std::string no = gpu_verdict::no_device_reason(); !no.empty()) {
    if (why) *why = no;
    return nullptr;
  }
  return std::make_unique<GpuRowJudge>(k, m, r);
}

}  // namespace afz
