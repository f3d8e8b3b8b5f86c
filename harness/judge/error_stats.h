// Compact error statistics of judged outputs: fixed log2-spaced histograms
// that a campaign adds up case after case and `report merge` adds up shard
// after shard.  Only integer counts and maxima are kept, never floating-point
// sums, so the totals do not depend on the order cases were added in: the
// statistics of merged shards equal those of one run, bit for bit.
//
// Per output series (the O tensor of one dtype, or the fp32 LSE):
//   * every judged element's error in units of its bound and in ulps of the
//     output dtype at the row's scale (its largest exact |o|; for the LSE the
//     larger of |lse| and the row's largest |score|), where ulps mean what a
//     reader expects: an element near zero in a row of size 1 is not
//     "billions of ulps" off when it is within its bound;
//   * every judged row's worst error / bound, binned by where the row's
//     largest score sits among its visible keys (late maxima and partial
//     last blocks show on the right) and by the row's max |score| (the
//     magnitude at which exp overflows or cancellation begins).
// Elements that were never written or are not finite are not errors that
// have a size; the verdict classes count them.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/abi/host_device.h"

namespace afz {

// Bins over [0, inf]: bin 0 holds exact zeros, bin 1 (0, 2^lo_exp), bin
// 2 + k holds [2^(lo_exp + k), 2^(lo_exp + k + 1)), the last bin
// [2^hi_exp, inf] and NaN.  Power-of-two edges make the bin of a value
// exact (ilogb), identical on every machine.
struct LogAxis {
  int lo_exp, hi_exp;
  AFZ_HOST_DEVICE constexpr int bins() const { return hi_exp - lo_exp + 3; }
  // Host and device (the GPU verdict bins on the device): ldexp and ilogb
  // are exact, so both sides pick the same bin.
  AFZ_HOST_DEVICE int index(double x) const {
    if (x == 0) return 0;
    // NaN and +inf land in the top bin: "off the scale" (a zero bound with a
    // nonzero error is infinitely many bounds away).
    if (!(x < ldexp(1.0, hi_exp))) return bins() - 1;
    if (x < ldexp(1.0, lo_exp)) return 1;
    return 2 + (ilogb(x) - lo_exp);
  }
  double lower(int bin) const;  // 0 for the zero bin
  double upper(int bin) const;  // +inf for the last bin
  // Where a plot puts the bin: the geometric middle of its edges (the
  // zero bin has none on a log scale: 0).
  double center(int bin) const;
};

// error / bound and error in ulps: from 2^-40 (a correct kernel's error is
// often a tiny fraction of its bound) to 2^40 (an output near zero compared
// with the wrong value is billions of ulps off).
inline constexpr LogAxis kErrorAxis{-40, 40};
// max |s| of a row: from 2^-8 to 2^24 (the magnitude class goes past 1e4).
inline constexpr LogAxis kScoreAxis{-8, 24};
inline constexpr int kErrorBins = kErrorAxis.bins();
inline constexpr int kScoreBins = kScoreAxis.bins();
// Relative position of the row's maximum among its visible keys: bin
// floor(16 (ordinal + 1/2) / N), so the first key of a long row is bin 0
// and the last is bin 15.
inline constexpr int kKeyPositionBins = 16;
AFZ_HOST_DEVICE inline int key_position_bin(int ordinal, int visible_keys) {
  if (visible_keys <= 0 || ordinal < 0 || ordinal >= visible_keys) return -1;
  // floor(B (ordinal + 1/2) / N) in integers: (2 B ordinal + B) / (2 N).
  const int64_t b = (2 * int64_t(kKeyPositionBins) * ordinal + kKeyPositionBins) / (2 * int64_t(visible_keys));
  return int(b < kKeyPositionBins - 1 ? b : kKeyPositionBins - 1);
}

struct ErrorSeries {
  int64_t elements = 0;  // judged elements
  int64_t rows = 0;      // judged rows
  double max_over_bound = 0, max_ulps = 0;
  std::array<int64_t, kErrorBins> over_bound{};  // elements by error / bound
  std::array<int64_t, kErrorBins> ulps{};        // elements by error in ulps
  // Rows by (key position bin, bin of the row's max error / bound), and the
  // exact max per position bin; rows whose oracle gave no position are left
  // out of these two.  The 2-D tables are allocated by the first row (a
  // verdict that judged nothing carries no 40 KB of zeros): empty means
  // all zero.
  std::vector<int64_t> by_key_position;          // [kKeyPositionBins * kErrorBins]
  std::array<double, kKeyPositionBins> key_position_max{};
  // Rows by (bin of max |s|, bin of the row's max error / bound).
  std::vector<int64_t> by_score;                 // [kScoreBins * kErrorBins]
  std::array<double, kScoreBins> score_max{};

  bool empty() const { return elements == 0 && rows == 0; }
  int64_t key_position_count(int key_bin, int error_bin) const;
  int64_t score_count(int score_bin, int error_bin) const;
  void add_element(double over_bound, double ulps);
  // A row's worst error / bound; key_bin < 0 when the position is unknown.
  void add_row(double row_over_bound, int key_bin, double max_abs_score);
  void merge(const ErrorSeries& other);

 private:
  void allocate_rows();
};

}  // namespace afz
