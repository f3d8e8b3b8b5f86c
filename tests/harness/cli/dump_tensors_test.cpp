// `attnfuzz run|repro --dump-tensors DIR`: a backward case's tensors and the
// kernel's gradients as .npy files that numpy reads back, the kernel's being
// what it wrote (a mutant missing the softmax scale: its dQ is the exact dQ
// over the scale), and a forward-only run refused with one line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tests/harness/cli/cli_process.h"
#include "tests/temp_dir.h"

namespace afz {
namespace {

using testing::run_attnfuzz;

// dQ [2][2][5][8]: sequence 1 has 3 of the 5 query rows.
constexpr char kCase[] =
    "attnfuzz-case 1\nkernel cpu.bwd.mutant.ds_no_scale\npass bwd\nbatch 2\nheads 2\nseqlen_q 5 3\nseqlen_k 7 4\n"
    "head_dim 8\ndtype fp32\n";
constexpr int kBatch = 2, kHeads = 2, kRows = 5, kDim = 8, kRowsOfSeq1 = 3;

// The data of an .npy file whose header names `descr` (little-endian T).
template <class T>
std::vector<T> read_npy(const std::string& path, const std::string& descr) {
  std::ifstream f(path, std::ios::binary);
  char pre[10] = {};
  f.read(pre, 10);
  EXPECT_EQ(std::memcmp(pre, "\x93NUMPY\x01\x00", 8), 0) << path;
  uint16_t len = 0;
  std::memcpy(&len, pre + 8, 2);
  std::string header(len, ' ');
  f.read(header.data(), len);
  EXPECT_NE(header.find("'descr': '" + descr + "'"), std::string::npos) << header;
  EXPECT_NE(header.find("'shape': (2,2,5,8,)"), std::string::npos) << header;
  EXPECT_EQ((10 + len) % 64, 0u) << "the data starts on a 64-byte boundary";
  std::vector<T> out(size_t(kBatch) * kHeads * kRows * kDim);
  f.read(reinterpret_cast<char*>(out.data()), std::streamsize(out.size() * sizeof(T)));
  EXPECT_TRUE(f) << path << ": too short";
  return out;
}

TEST(DumpTensors, TheKernelsGradientsAreWhatItWrote) {
  testing::TempDir dir("afz_dump_tensors");
  std::filesystem::create_directories(dir.path);
  const std::string case_path = dir.str() + "/scale_dropped.case";
  std::ofstream(case_path) << kCase;
  const auto r = run_attnfuzz("run --kernel cpu.bwd.mutant.ds_no_scale --pass bwd --dump-tensors " + dir.str() +
                              "/out " + case_path);
  ASSERT_EQ(r.exit_code, 1) << r.output;  // the mutant fails
  const std::string out = dir.str() + "/out/scale_dropped/";
  const std::vector<float> kernel = read_npy<float>(out + "kernel_dq.npy", "<f4");
  const std::vector<double> exact = read_npy<double>(out + "exact_dq.npy", "<f8");
  const double scale = 1.0 / std::sqrt(double(kDim));
  int checked = 0;
  for (int b = 0; b < kBatch; ++b)
    for (int h = 0; h < kHeads; ++h)
      for (int i = 0; i < kRows; ++i)
        for (int x = 0; x < kDim; ++x) {
          const size_t e = ((size_t(b) * kHeads + h) * kRows + i) * kDim + x;
          if (b == 1 && i >= kRowsOfSeq1) {
            EXPECT_EQ(kernel[e], 0.0f) << "rows past a sequence's length are 0, not the poison";
            continue;
          }
          EXPECT_NEAR(kernel[e] * scale, exact[e], 1e-5 * (1 + std::fabs(exact[e]))) << e;
          ++checked;
        }
  EXPECT_EQ(checked, (kRows + kRowsOfSeq1) * kHeads * kDim);
  for (const char* f : {"q", "k", "v", "dout", "bias", "o", "lse", "exact_dk", "exact_dv", "kernel_dk", "kernel_dv"})
    EXPECT_TRUE(std::filesystem::exists(out + f + ".npy")) << f;
  std::ifstream meta(out + "meta.json");
  const std::string text((std::istreambuf_iterator<char>(meta)), {});
  EXPECT_NE(text.find("\"kernel_ran\": true"), std::string::npos) << text;
}

TEST(DumpTensors, AForwardRunIsRefusedWithOneLine) {
  testing::TempDir dir("afz_dump_tensors_fwd");
  std::filesystem::create_directories(dir.path);
  const std::string case_path = dir.str() + "/c.case";
  std::ofstream(case_path) << kCase;
  const auto r = run_attnfuzz("run --kernel cpu.direct --pass fwd --dump-tensors " + dir.str() + "/out " + case_path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, case_path + ": --dump-tensors: writes the backward's tensors; this file runs --pass fwd\n");
  EXPECT_FALSE(std::filesystem::exists(dir.str() + "/out"));
}

}  // namespace
}  // namespace afz
