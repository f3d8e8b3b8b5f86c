// The verdict's rows on the device (device_rows.cu), behind a plain C++
// interface: gpu_row_judge.cpp (host code with the host's headers) drives
// it, the .cu sees only verdict_steps.h and row_summary.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/judge/row_summary.h"
#include "harness/judge/verdict_steps.h"

namespace afz::gpu_verdict {

// "" where a CUDA device is present, else why not (one line).
std::string no_device_reason();

class DeviceRows {
 public:
  // Copies to the device what `host` points at: O and the LSE through their
  // strides over [batch][heads_q][max_sq][dv], the oracle's arrays of
  // batch * heads_q * max_sq rows.  Throws std::runtime_error on CUDA errors.
  DeviceRows(const verdict_steps::Inputs& host, int batch);
  ~DeviceRows();
  DeviceRows(const DeviceRows&) = delete;
  DeviceRows& operator=(const DeviceRows&) = delete;

  // Per position of model.rows: 1 where decidable() leaves the row open.
  std::vector<uint8_t> open_rows(const RowModel& model);
  // The rows of the model whose `skip` flag (per position) is 0.
  VerdictSummary summarize(const RowModel& model, const std::vector<uint8_t>& skip);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace afz::gpu_verdict
