// Throughput of our CUDA kernels on shapes that fill an H200 (a benchmark,
// not a test): median of timed launches after warm-up, CUDA events around
// each launch.  tests/bench/torch_sdpa_bench.py times cuDNN and PyTorch's
// flash backend on the same shapes; run both in one job to compare.
//
//   attnfuzz_gpu_bench [--reps N]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/registry.h"

namespace {

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

struct Shape {
  int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
  bool causal;
  const char* what;
};

// FlashAttention's benchmark shapes (batch x heads filling the GPU), and a
// decode: one query per sequence over a 128K-key cache, GQA 4:1.
const Shape kShapes[] = {
    {16, 16, 16, 1024, 1024, 128, false, "prefill"},
    {2, 16, 16, 8192, 8192, 128, false, "prefill"},
    {2, 16, 16, 8192, 8192, 128, true, "prefill"},
    {16, 16, 16, 1024, 1024, 64, false, "prefill"},
    {2, 16, 16, 8192, 8192, 64, true, "prefill"},
    {8, 32, 8, 1, 131072, 128, true, "decode"},
};

// Multiply-adds of q.k and p.v over visible pairs, 2 flops each.
double flops(const Shape& s) {
  double pairs = double(s.seqlen_q) * s.seqlen_k;
  if (s.causal) {  // bottom-right: query i sees keys j <= i + sk - sq
    pairs = 0;
    for (int i = 0; i < s.seqlen_q; ++i) pairs += std::min<double>(s.seqlen_k, double(i) + s.seqlen_k - s.seqlen_q + 1);
  }
  return 4.0 * s.batch * s.heads_q * pairs * s.head_dim;
}

double bytes(const Shape& s) {
  return 2.0 * (double(s.batch) * s.heads_q * s.seqlen_q * s.head_dim * 2 +
                double(s.batch) * s.heads_kv * s.seqlen_k * s.head_dim * 2);
}

struct Buffers {
  void *q, *k, *v, *o;
  float* lse;
  int32_t *sq, *sk;
};

// Deterministic bf16 values in about [-1, 1): random data, never zeros
// (zeros make tensor cores look faster than real inputs do).
void fill_random(void* dst, size_t n, uint64_t seed) {
  std::vector<uint16_t> host(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const float f = float(int64_t(x >> 40) - (1 << 23)) / float(1 << 23);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    host[i] = uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
  }
  CHECK(cudaMemcpy(dst, host.data(), n * 2, cudaMemcpyHostToDevice));
}

afz_problem make_problem(const Shape& s, Buffers& b, cudaStream_t stream) {
  afz_problem p{};
  p.abi_version = AFZ_ABI_VERSION;
  p.batch = s.batch;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.head_dim = p.head_dim_v = s.head_dim;
  p.max_seqlen_q = s.seqlen_q;
  p.max_seqlen_k = s.seqlen_k;
  p.seqlens_q = b.sq;
  p.seqlens_k = b.sk;
  p.scale = 1.0f / std::sqrt(float(s.head_dim));
  p.has_window = s.causal;
  p.window_left = -1;
  p.window_right = s.causal ? 0 : -1;
  p.align = AFZ_ALIGN_BOTTOM_RIGHT;
  auto bhsd = [&](afz_tensor& t, void* data, int heads, int seq, afz_dtype dt) {
    t.data = data;
    t.dtype = dt;
    t.stride[3] = 1;
    t.stride[2] = s.head_dim;
    t.stride[1] = int64_t(seq) * s.head_dim;
    t.stride[0] = int64_t(heads) * seq * s.head_dim;
  };
  bhsd(p.q, b.q, s.heads_q, s.seqlen_q, AFZ_BF16);
  bhsd(p.k, b.k, s.heads_kv, s.seqlen_k, AFZ_BF16);
  bhsd(p.v, b.v, s.heads_kv, s.seqlen_k, AFZ_BF16);
  bhsd(p.o, b.o, s.heads_q, s.seqlen_q, AFZ_BF16);
  p.lse = b.lse;
  p.lse_stride[0] = int64_t(s.heads_q) * s.seqlen_q;
  p.lse_stride[1] = s.seqlen_q;
  p.lse_stride[2] = 1;
  p.stream = stream;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
  const afz::KernelRegistry registry = afz::KernelRegistry::with_builtins();
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs; bf16 in/out, dense BHSD, median of %d launches after 3 warm-ups\n", prop.name,
              prop.multiProcessorCount, reps);
  std::printf("%-12s %-8s %5s %5s %4s %7s %7s %4s %6s %10s %9s %8s\n", "kernel", "shape", "batch", "hq", "hkv",
              "sq", "sk", "d", "causal", "ms", "TFLOP/s", "GB/s");
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  for (const Shape& s : kShapes) {
    Buffers b{};
    const size_t nq = size_t(s.batch) * s.heads_q * s.seqlen_q * s.head_dim;
    const size_t nk = size_t(s.batch) * s.heads_kv * s.seqlen_k * s.head_dim;
    CHECK(cudaMalloc(&b.q, nq * 2));
    CHECK(cudaMalloc(&b.k, nk * 2));
    CHECK(cudaMalloc(&b.v, nk * 2));
    CHECK(cudaMalloc(&b.o, nq * 2));
    CHECK(cudaMalloc(&b.lse, size_t(s.batch) * s.heads_q * s.seqlen_q * 4));
    CHECK(cudaMalloc(&b.sq, s.batch * 4));
    CHECK(cudaMalloc(&b.sk, s.batch * 4));
    fill_random(b.q, nq, 1);
    fill_random(b.k, nk, 2);
    fill_random(b.v, nk, 3);
    const std::vector<int32_t> sq(s.batch, s.seqlen_q), sk(s.batch, s.seqlen_k);
    CHECK(cudaMemcpy(b.sq, sq.data(), s.batch * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b.sk, sk.data(), s.batch * 4, cudaMemcpyHostToDevice));
    afz_problem p = make_problem(s, b, stream);
    for (const char* name : {"gpu.fa2", "gpu.splitkv"}) {
      if (std::string(name) == "gpu.splitkv" && std::string(s.what) != "decode") continue;
      const afz_kernel* k = registry.find(name);
      if (!k) {
        std::printf("%s: not built\n", name);
        continue;
      }
      char err[256] = {0};
      std::vector<float> ms;
      for (int r = 0; r < reps + 3; ++r) {
        CHECK(cudaEventRecord(t0, stream));
        if (k->run(k, &p, err, sizeof err) != 0) {
          std::printf("%s: %s\n", name, err);
          return 1;
        }
        CHECK(cudaEventRecord(t1, stream));
        CHECK(cudaEventSynchronize(t1));
        float t = 0;
        CHECK(cudaEventElapsedTime(&t, t0, t1));
        if (r >= 3) ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      std::printf("%-12s %-8s %5d %5d %4d %7d %7d %4d %6s %10.3f %9.1f %8.0f\n", name, s.what, s.batch, s.heads_q,
                  s.heads_kv, s.seqlen_q, s.seqlen_k, s.head_dim, s.causal ? "yes" : "no", med,
                  flops(s) / (med * 1e-3) / 1e12, bytes(s) / (med * 1e-3) / 1e9);
    }
    for (void* ptr : {b.q, b.k, b.v, b.o, static_cast<void*>(b.lse), static_cast<void*>(b.sq), static_cast<void*>(b.sk)})
      CHECK(cudaFree(ptr));
  }
  return 0;
}
