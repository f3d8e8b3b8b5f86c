// The verdict's rows on the GPU: verdict_steps.h, one thread per checked
// row, over device copies of the kernel's outputs and the oracle's arrays.
// What comes back is row_summary.h's VerdictSummary (counts, histogram
// bins, maxima, each class's first row, the worst row) and, before it, a
// flag per row that decidable() leaves open.
//
// Order-free by construction: counts are integer atomics, maxima are
// atomicMax on the bits of non-negative doubles (their integer order is
// their value order), "first row" is atomicMin on the row index, and the
// worst row is found by a second pass for the lowest row whose largest error
// / bound equals the maximum.  Every double is computed by the same steps
// as on the host with --fmad=false (no contraction into an fma that the
// host, built with -ffp-contract=off, does not do), and the only libm the
// rows need (expm1, log in ErrorBound::begin_row) runs on the host, whose
// factors the device reads: so the summary is the host's, bit for bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "harness/judge/gpu/device_rows.h"
#include "harness/judge/verdict_steps.h"
#include "oracles/gpu/device_problem.h"

namespace afz::gpu_verdict {

namespace {

using gpu_oracle::check;
using ull = unsigned long long;

constexpr int kThreads = 128;  // rows per block
constexpr ull kNone = ~0ull;

// ErrorSeries in device memory: counts and the bits of maxima.
struct DeviceSeries {
  ull elements, rows, max_over_bound, max_ulps;
  ull over_bound[kErrorBins], ulps[kErrorBins];
  ull by_key_position[kKeyPositionBins * kErrorBins], key_position_max[kKeyPositionBins];
  ull by_score[kScoreBins * kErrorBins], score_max[kScoreBins];
};

struct DeviceSummary {
  ull elements, failing, max_over_bound, max_abs_error, worst_row;
  ull first_row[kVerdictClasses];
  DeviceSeries o, lse;
};

// A block's element bins, flushed to DeviceSeries once (all threads of a
// block add to a handful of bins: shared atomics keep that off the L2).
struct BlockBins {
  ull elements[2], over_bound[2][kErrorBins], ulps[2][kErrorBins];
};

struct Launch {
  verdict_steps::Inputs in;
  const int64_t* rows;
  const bound_steps::RowFactors* factors;
  const uint8_t* modelled;
  const uint8_t* skip;   // escalated rows (judged on the host)
  uint8_t* open;         // decidable() leaves the row open
  double* row_max;       // the row's largest error / bound; -1: nothing tracked
  int64_t count;
  DeviceSummary* sum;
  LogAxis error_axis, score_axis;
};

__device__ ull bits_of_double(double x) { return ull(__double_as_longlong(x)); }
// For non-negative x (and +NaN, which then wins, as ErrorSeries' max_of keeps NaN).
__device__ void max_bits(ull* at, double x) { atomicMax(at, bits_of_double(x)); }

// Per row: the maxima in registers, one atomic each at the row's end (an
// atomic per element on one address would serialize the whole grid).  No
// over or ulps is NaN (the bound is positive or the ratio is 0 or inf, the
// ulp positive, the error finite), so max_kept equals ErrorSeries' max_of.
static_assert(kVerdictClasses <= 32, "DeviceSink::raised holds one bit per class");

// Likewise the classes a row raised: one atomicMin per class and row, not
// per element (a kernel wrong everywhere raises on every element).
struct DeviceSink {
  const Launch& l;
  BlockBins& bins;
  int64_t result_row;
  double row_max = 0, max_abs_error = 0;
  double series_over[2] = {}, series_ulps[2] = {};
  ull series_elements[2] = {};
  unsigned raised = 0;  // bit c: class c
  bool tracked = false;

  __device__ void raise(const verdict_steps::Event& e) { raised |= 1u << int(e.cls); }
  __device__ void track(const verdict_steps::Tracked& t) {
    max_abs_error = verdict_steps::max_kept(max_abs_error, t.err);
    row_max = verdict_steps::max_kept(row_max, t.over);  // NaN dropped, as std::max does on the host
    tracked = true;
  }
  __device__ void element(int series, double over, double ulps) {
    ++series_elements[series];
    atomicAdd(&bins.over_bound[series][l.error_axis.index(over)], 1ull);
    atomicAdd(&bins.ulps[series][l.error_axis.index(ulps)], 1ull);
    series_over[series] = verdict_steps::max_kept(series_over[series], over);
    series_ulps[series] = verdict_steps::max_kept(series_ulps[series], ulps);
  }
  __device__ void end_row() {
    for (int c = 0; c < kVerdictClasses; ++c)
      if (raised & (1u << c)) atomicMin(&l.sum->first_row[c], ull(result_row));
    for (int s = 0; s < 2; ++s) {
      if (series_elements[s]) atomicAdd(&bins.elements[s], series_elements[s]);
      DeviceSeries& to = s == 0 ? l.sum->o : l.sum->lse;
      if (series_over[s] > 0) max_bits(&to.max_over_bound, series_over[s]);
      if (series_ulps[s] > 0) max_bits(&to.max_ulps, series_ulps[s]);
    }
    if (tracked) {
      max_bits(&l.sum->max_over_bound, row_max);
      max_bits(&l.sum->max_abs_error, max_abs_error);
    }
  }
  __device__ void add_row(DeviceSeries& s, double over, int key_bin, double max_abs_score) {
    atomicAdd(&s.rows, 1ull);
    const int e = l.error_axis.index(over);
    if (key_bin >= 0 && key_bin < kKeyPositionBins) {
      atomicAdd(&s.by_key_position[key_bin * kErrorBins + e], 1ull);
      max_bits(&s.key_position_max[key_bin], over);
    }
    const int sb = l.score_axis.index(max_abs_score);
    atomicAdd(&s.by_score[sb * kErrorBins + e], 1ull);
    max_bits(&s.score_max[sb], over);
  }
  __device__ void o_element(double over, double ulps) { element(0, over, ulps); }
  __device__ void lse_element(double over, double ulps) { element(1, over, ulps); }
  __device__ void o_row(double over, int key_bin, double m) { add_row(l.sum->o, over, key_bin, m); }
  __device__ void lse_row(double over, int key_bin, double m) { add_row(l.sum->lse, over, key_bin, m); }
};

__device__ const bound_steps::RowFactors* factors_at(const Launch& l, int64_t n) {
  return l.modelled[n] ? &l.factors[n] : nullptr;
}

__global__ void __launch_bounds__(kThreads) undecided_rows(Launch l) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= l.count) return;
  const int64_t r = l.rows[n];
  l.open[n] = !l.in.ref.empty[r] && !verdict_steps::decidable(l.in, r, factors_at(l, n));
}

__global__ void __launch_bounds__(kThreads) judge_rows(Launch l) {
  __shared__ BlockBins bins;
  __shared__ ull block_elements, block_failing;
  for (int t = threadIdx.x; t < int(sizeof(BlockBins) / sizeof(ull)); t += blockDim.x) reinterpret_cast<ull*>(&bins)[t] = 0;
  if (threadIdx.x == 0) block_elements = block_failing = 0;
  __syncthreads();
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n < l.count && !l.skip[n]) {
    const int64_t r = l.rows[n];
    DeviceSink sink{l, bins, r};
    const verdict_steps::RowCounts c = l.in.ref.empty[r] ? verdict_steps::masked_row(l.in, r, sink)
                                                         : verdict_steps::row(l.in, r, factors_at(l, n), sink);
    atomicAdd(&block_elements, ull(c.elements));
    atomicAdd(&block_failing, ull(c.failing));
    l.row_max[n] = sink.tracked ? sink.row_max : -1.0;
    sink.end_row();
  } else if (n < l.count) {
    l.row_max[n] = -1.0;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicAdd(&l.sum->elements, block_elements);
    atomicAdd(&l.sum->failing, block_failing);
  }
  for (int s = 0; s < 2; ++s) {
    DeviceSeries& to = s == 0 ? l.sum->o : l.sum->lse;
    if (threadIdx.x == 0 && bins.elements[s]) atomicAdd(&to.elements, bins.elements[s]);
    for (int b = threadIdx.x; b < kErrorBins; b += blockDim.x) {
      if (bins.over_bound[s][b]) atomicAdd(&to.over_bound[b], bins.over_bound[s][b]);
      if (bins.ulps[s][b]) atomicAdd(&to.ulps[b], bins.ulps[s][b]);
    }
  }
}

// The second pass: the lowest row whose largest error / bound is the maximum.
__global__ void __launch_bounds__(kThreads) worst_row(Launch l) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= l.count || l.row_max[n] < 0) return;
  if (bits_of_double(l.row_max[n]) == l.sum->max_over_bound) atomicMin(&l.sum->worst_row, ull(l.rows[n]));
}

double double_of_bits(ull b) {
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

void to_series(const DeviceSeries& d, ErrorSeries& s) {
  s.elements = int64_t(d.elements);
  s.rows = int64_t(d.rows);
  s.max_over_bound = double_of_bits(d.max_over_bound);
  s.max_ulps = double_of_bits(d.max_ulps);
  std::copy(d.over_bound, d.over_bound + kErrorBins, s.over_bound.begin());
  std::copy(d.ulps, d.ulps + kErrorBins, s.ulps.begin());
  // ErrorSeries allocates its row tables with its first row.
  if (s.rows > 0) {
    s.by_key_position.assign(d.by_key_position, d.by_key_position + kKeyPositionBins * kErrorBins);
    s.by_score.assign(d.by_score, d.by_score + kScoreBins * kErrorBins);
  }
  for (int i = 0; i < kKeyPositionBins; ++i) s.key_position_max[size_t(i)] = double_of_bits(d.key_position_max[i]);
  for (int i = 0; i < kScoreBins; ++i) s.score_max[size_t(i)] = double_of_bits(d.score_max[i]);
}

template <class T>
const T* upload_or_null(gpu_oracle::DeviceArena& arena, const T* host, size_t count) {
  return host ? arena.upload(host, count) : nullptr;
}

unsigned blocks(int64_t count) { return unsigned((count + kThreads - 1) / kThreads); }

}  // namespace

std::string no_device_reason() {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(e);
  return count == 0 ? "no CUDA device" : "";
}

struct DeviceRows::Impl {
  gpu_oracle::DeviceArena arena;
  verdict_steps::Inputs in{};

  // The model's rows and factors on the device, and a zeroed summary.
  Launch launch(const RowModel& model) {
    Launch l{};
    l.in = in;
    l.count = int64_t(model.rows.size());
    l.error_axis = kErrorAxis;
    l.score_axis = kScoreAxis;
    if (l.count == 0) return l;
    l.rows = arena.upload(model.rows.data(), model.rows.size());
    l.factors = arena.upload(model.factors.data(), model.factors.size());
    l.modelled = arena.upload(model.modelled.data(), model.modelled.size());
    l.open = static_cast<uint8_t*>(arena.alloc(size_t(l.count)));
    l.row_max = static_cast<double*>(arena.alloc(size_t(l.count) * sizeof(double)));
    l.sum = static_cast<DeviceSummary*>(arena.alloc(sizeof(DeviceSummary)));
    check(cudaMemset(l.sum, 0, sizeof(DeviceSummary)), "cudaMemset");
    // "None yet" for the lowest-row minima.
    check(cudaMemset(&l.sum->worst_row, 0xff, sizeof(ull)), "cudaMemset");
    check(cudaMemset(l.sum->first_row, 0xff, sizeof(l.sum->first_row)), "cudaMemset");
    return l;
  }
};

DeviceRows::DeviceRows(const verdict_steps::Inputs& host, int batch) : impl_(std::make_unique<Impl>()) {
  gpu_oracle::DeviceArena& arena = impl_->arena;
  verdict_steps::Inputs& in = impl_->in;
  in = host;
  const int64_t B = batch, H = host.heads_q, S = host.max_sq, rows = B * H * S, elems = rows * host.dv;
  afz_tensor o{};
  o.data = const_cast<unsigned char*>(host.out.o);
  o.dtype = host.out.o_dtype;
  std::copy_n(host.out.o_stride, 4, o.stride);
  in.out.o = reinterpret_cast<const unsigned char*>(gpu_oracle::upload_tensor(arena, o, {B, H, S, host.dv}).data);
  if (host.out.lse) {
    afz_tensor lse{};
    lse.data = const_cast<float*>(host.out.lse);
    lse.dtype = AFZ_F32;
    std::copy_n(host.out.lse_stride, 3, lse.stride);
    in.out.lse = reinterpret_cast<const float*>(gpu_oracle::upload_tensor(arena, lse, {B, H, S, 1}).data);
  }
  const verdict_steps::Reference& h = host.ref;
  verdict_steps::Reference& d = in.ref;
  d.o = arena.upload(h.o, size_t(elems));
  d.cond = arena.upload(h.cond, size_t(elems));
  d.cond_score = arena.upload(h.cond_score, size_t(elems));
  d.cond_tiny = arena.upload(h.cond_tiny, size_t(elems));
  d.o_err = upload_or_null(arena, h.o_err, size_t(elems));
  d.lse = arena.upload(h.lse, size_t(rows));
  d.empty = arena.upload(h.empty, size_t(rows));
  d.max_abs_score = arena.upload(h.max_abs_score, size_t(rows));
  d.lse_err = upload_or_null(arena, h.lse_err, size_t(rows));
  d.visible_keys = upload_or_null(arena, h.visible_keys, size_t(rows));
  d.max_key = upload_or_null(arena, h.max_key, size_t(rows));
}

DeviceRows::~DeviceRows() = default;

std::vector<uint8_t> DeviceRows::open_rows(const RowModel& model) {
  Launch l = impl_->launch(model);
  std::vector<uint8_t> open(size_t(l.count));
  if (l.count == 0) return open;
  undecided_rows<<<blocks(l.count), kThreads>>>(l);
  check(cudaGetLastError(), "undecided_rows launch");
  check(cudaMemcpy(open.data(), l.open, open.size(), cudaMemcpyDeviceToHost), "cudaMemcpy (undecided rows)");
  return open;
}

VerdictSummary DeviceRows::summarize(const RowModel& model, const std::vector<uint8_t>& skip) {
  Launch l = impl_->launch(model);
  VerdictSummary out;
  if (l.count == 0) return out;
  l.skip = impl_->arena.upload(skip.data(), skip.size());
  judge_rows<<<blocks(l.count), kThreads>>>(l);
  check(cudaGetLastError(), "judge_rows launch");
  worst_row<<<blocks(l.count), kThreads>>>(l);
  check(cudaGetLastError(), "worst_row launch");
  DeviceSummary s;
  check(cudaMemcpy(&s, l.sum, sizeof s, cudaMemcpyDeviceToHost), "cudaMemcpy (summary)");
  out.elements = int64_t(s.elements);
  out.failing = int64_t(s.failing);
  out.max_over_bound = double_of_bits(s.max_over_bound);
  out.max_abs_error = double_of_bits(s.max_abs_error);
  out.worst_row = s.worst_row == kNone ? kNoRow : int64_t(s.worst_row);
  for (int c = 0; c < kVerdictClasses; ++c)
    out.first_row[size_t(c)] = s.first_row[c] == kNone ? kNoRow : int64_t(s.first_row[c]);
  to_series(s.o, out.o_stats);
  to_series(s.lse, out.lse_stats);
  return out;
}

}  // namespace afz::gpu_verdict
