// The CUDA kernels as afz_kernels: the correct FA2 forward and split-KV
// decoder, their mutants (one defect each, defects.h), and three deliberately
// faulty kernels for the harness's own tests.  The problem's pointers are
// device pointers (AFZ_CAP_GPU): the harness's device mirror (harness/run/gpu)
// provides them and runs every call in a worker process.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/launch.h"
#include "kernels/registry.h"

namespace afz {
namespace {

using cuda::Defect;
using cuda::ForwardParams;

constexpr double kLog2e = 1.44269504088896340736;
constexpr int kVecElems = 8;  // 16-byte cp.async chunks of 2-byte elements

enum class Family { Forward, SplitKv, FaultyWritePastEnd, FaultyIllegalAddress, FaultySpin };

struct Spec {
  Family family;
  Defect defect;
};

void write_message(char* buf, size_t len, const std::string& msg) {
  if (!buf || len == 0) return;
  const size_t n = std::min(len - 1, msg.size());
  std::memcpy(buf, msg.data(), n);
  buf[n] = 0;
}

bool is_b16(afz_dtype t) { return t == AFZ_BF16 || t == AFZ_F16; }

// 16-byte loads need every row start 16-byte aligned: unit inner stride, the
// base aligned, and the other strides whole chunks (stride 0 broadcasts qualify).
bool vector_loads_ok(const afz_tensor& t) {
  if (t.stride[3] != 1 || reinterpret_cast<uintptr_t>(t.data) % 16 != 0) return false;
  for (int a = 0; a < 3; ++a)
    if (t.stride[a] % kVecElems != 0) return false;
  return true;
}

// Checks what the caps cannot express and fills the launch parameters.
std::string resolve(const afz_problem& p, ForwardParams* f) {
  if (!p.q.data || !p.k.data || !p.v.data || !p.o.data || !p.seqlens_q || !p.seqlens_k)
    return "null tensor or seqlens pointer";
  if (!is_b16(p.q.dtype) || p.k.dtype != p.q.dtype || p.v.dtype != p.q.dtype)
    return "q, k and v must share one dtype, fp16 or bf16";
  if (p.head_dim != p.head_dim_v || p.head_dim < 32 || p.head_dim > 128 || p.head_dim % 32 != 0)
    return "head_dim = head_dim_v = 32, 64, 96 or 128 only";
  if (p.o.dtype != AFZ_F32 && p.o.dtype != AFZ_F16 && p.o.dtype != AFZ_BF16) return "output dtype fp32, fp16 or bf16";
  if (p.batch < 1 || p.heads_kv < 1 || p.heads_q % p.heads_kv != 0) return "heads_q must be a multiple of heads_kv";
  if (p.bool_mask.data || p.add_mask.data || p.softcap != 0.0f) return "no explicit masks or softcap";
  *f = ForwardParams{};
  f->batch = p.batch;
  f->heads_q = p.heads_q;
  f->heads_kv = p.heads_kv;
  f->head_dim = p.head_dim;
  f->max_seqlen_q = p.max_seqlen_q;
  f->max_seqlen_k = p.max_seqlen_k;
  f->seqlens_q = p.seqlens_q;
  f->seqlens_k = p.seqlens_k;
  f->scale_log2 = float(double(p.scale) * kLog2e);  // one rounding of the exact product
  f->has_window = p.has_window;
  f->window_left = p.window_left;
  f->window_right = p.window_right;
  f->bottom_right = p.align == AFZ_ALIGN_BOTTOM_RIGHT;
  f->q = p.q.data;
  f->k = p.k.data;
  f->v = p.v.data;
  std::copy(p.q.stride, p.q.stride + 4, f->q_stride);
  std::copy(p.k.stride, p.k.stride + 4, f->k_stride);
  std::copy(p.v.stride, p.v.stride + 4, f->v_stride);
  f->q_vec = vector_loads_ok(p.q);
  f->k_vec = vector_loads_ok(p.k);
  f->v_vec = vector_loads_ok(p.v);
  f->o = p.o.data;
  std::copy(p.o.stride, p.o.stride + 4, f->o_stride);
  f->o_type = cuda::OutType(int(p.o.dtype));
  f->lse = p.lse;
  std::copy(p.lse_stride, p.lse_stride + 3, f->lse_stride);
  return "";
}

// The split-KV workspace, grown on demand and kept for the process (the
// worker runs one call at a time; the mutex covers library users who do not).
struct Workspace {
  std::mutex mu;
  float* data = nullptr;
  size_t floats = 0;
  int sm_count = 0;
};
Workspace& workspace() {
  static Workspace w;
  return w;
}

cudaError_t run_splitkv(ForwardParams f, afz_dtype in, bool rescale, cudaStream_t stream) {
  Workspace& w = workspace();
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.sm_count == 0) {
    int dev = 0;
    if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
    if (cudaError_t e = cudaDeviceGetAttribute(&w.sm_count, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess)
      return e;
  }
  const cuda::SplitPlan plan = cuda::plan_splits(f, w.sm_count);
  if (plan.workspace_floats > w.floats) {
    if (w.data) cudaFree(w.data);  // synchronizes: no launch of ours still reads it
    w.data = nullptr;
    w.floats = 0;
    if (cudaError_t e = cudaMalloc(&w.data, plan.workspace_floats * sizeof(float)); e != cudaSuccess) return e;
    w.floats = plan.workspace_floats;
  }
  f.num_splits = plan.num_splits;
  f.blocks_per_split = plan.blocks_per_split;
  const size_t rows = size_t(f.batch) * f.heads_q * plan.num_splits * size_t(f.max_seqlen_q);
  f.part_m = w.data;
  f.part_l = w.data + rows;
  f.part_acc = w.data + 2 * rows;
  return in == AFZ_BF16 ? cuda::launch_splitkv_bf16(f, rescale, stream) : cuda::launch_splitkv_f16(f, rescale, stream);
}

// The first byte after the output's last element (every stride >= 0 here).
void* past_output_end(const afz_problem& p) {
  const int64_t extent[4] = {p.batch, p.heads_q, p.max_seqlen_q, p.head_dim_v};
  int64_t last = 0;
  for (int a = 0; a < 4; ++a) last += (extent[a] - 1) * p.o.stride[a];
  const int64_t bytes = p.o.dtype == AFZ_F32 ? 4 : 2;
  return static_cast<char*>(p.o.data) + (last + 1) * bytes;
}

int run(const afz_kernel* self, const afz_problem* p, char* error, size_t error_len) {
  const Spec& spec = *static_cast<const Spec*>(self->user);
  ForwardParams f;
  if (std::string why = resolve(*p, &f); !why.empty()) {
    write_message(error, error_len, std::string(self->name) + ": " + why);
    return 1;
  }
  auto stream = static_cast<cudaStream_t>(p->stream);
  cudaError_t e = cudaSuccess;
  switch (spec.family) {
    case Family::SplitKv:
      e = run_splitkv(f, p->q.dtype, spec.defect != Defect::SplitMergeNoRescale, stream);
      break;
    case Family::FaultyIllegalAddress: e = cuda::launch_illegal_address(stream); break;
    case Family::FaultySpin: e = cuda::launch_spin_forever(stream); break;
    case Family::Forward:
    case Family::FaultyWritePastEnd:
      e = p->q.dtype == AFZ_BF16 ? cuda::launch_forward_bf16(f, spec.defect, stream)
                                 : cuda::launch_forward_f16(f, spec.defect, stream);
      if (e == cudaSuccess && spec.family == Family::FaultyWritePastEnd)
        e = cuda::launch_write_past_end(past_output_end(*p), stream);
      break;
  }
  if (e != cudaSuccess) {
    write_message(error, error_len, std::string("launch failed: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
    return 1;
  }
  return 0;
}

// What the caps cannot say: q, k, v of one dtype (the mma takes both operands in it).
int supports(const afz_kernel*, const afz_problem* p, char* reason, size_t len) {
  if (p->k.dtype != p->q.dtype || p->v.dtype != p->q.dtype) {
    write_message(reason, len, "q, k and v must share one dtype");
    return 1;
  }
  return 0;
}

constexpr afz_caps kCaps = {
    AFZ_CAP_CAUSAL_TOP_LEFT | AFZ_CAP_CAUSAL_BOTTOM_RIGHT | AFZ_CAP_WINDOW | AFZ_CAP_VARLEN | AFZ_CAP_GQA |
        AFZ_CAP_LSE | AFZ_CAP_STRIDED | AFZ_CAP_GPU,
    (1u << AFZ_F16) | (1u << AFZ_BF16),
    (1u << AFZ_F32) | (1u << AFZ_F16) | (1u << AFZ_BF16),
    /*min_head_dim=*/32, /*max_head_dim=*/128, /*head_dim_multiple=*/32,
    /*max_seqlen=*/0};

// Scores: q.k on tensor cores in fp32 (bf16/fp16 products exact), times
// fp32(scale * log2 e) in fp32.  exp2 on the SFU (ex2.approx.ftz): within 2
// ulps, subnormal results flushed.  P rounded to the input dtype for P.V
// (the mma's operand type); l sums the fp32 P; m, l, acc fp32; O = acc / l
// correctly rounded (div.rn), then rounded to the output dtype; LSE = m ln2 +
// logf(l) by one fma.  Each rescale alpha = exp2(m - m') is a further SFU
// exp applied to earlier keys' weights in acc and l alike.
constexpr afz_precision kForwardPrecision = {AFZ_F32, AFZ_P_DTYPE_OF_V, AFZ_F32, /*exp_ulps=*/2.0f,
                                             /*flush_subnormals=*/1, /*l_from_unrounded_p=*/1};
// Split-KV: the merge weights each partial by one more SFU exp2(m_s - M).
constexpr afz_precision kSplitPrecision = {AFZ_F32, AFZ_P_DTYPE_OF_V, AFZ_F32, /*exp_ulps=*/4.0f,
                                           /*flush_subnormals=*/1, /*l_from_unrounded_p=*/1};
constexpr afz_conventions kConventions = {AFZ_MASKED_ROW_ZERO, AFZ_EMPTY_LSE_NEG_INF};

struct Entry {
  const char* name;
  const char* description;
  Spec spec;
  const char* origin;
};

const Entry kEntries[] = {
    {"gpu.fa2", "CUDA FA2 forward: mma.sync m16n8k16 tensor cores, 64x64 tiles, online softmax in registers, "
                "one division at the end; head_dim 32/64/96/128, bf16/fp16",
     {Family::Forward, Defect::None}, "builtin"},
    {"gpu.splitkv", "CUDA split-KV (FlashDecoding): key blocks split across thread blocks, partial (m, l, acc) "
                    "merged by rescaling; head_dim 32/64/96/128, bf16/fp16",
     {Family::SplitKv, Defect::None}, "builtin"},
    {"gpu.mutant.no_acc_rescale", "gpu.fa2 with l rescaled by alpha but the accumulator not",
     {Family::Forward, Defect::NoAccRescale}, "mutant"},
    {"gpu.mutant.m_init_zero", "gpu.fa2 with the running max initialised to 0 instead of -inf",
     {Family::Forward, Defect::MInitZero}, "mutant"},
    {"gpu.mutant.no_empty_row_guard", "gpu.fa2 without m_ref = 0 for rows whose running max is -inf (NaN)",
     {Family::Forward, Defect::NoEmptyRowGuard}, "mutant"},
    {"gpu.mutant.partial_block_unmasked", "gpu.fa2 without the seqlen_k mask on the last, partial key block",
     {Family::Forward, Defect::PartialBlockUnmasked}, "mutant"},
    {"gpu.mutant.causal_off_by_one", "gpu.fa2 whose causal/window band admits one key past the diagonal",
     {Family::Forward, Defect::CausalOffByOne}, "mutant"},
    {"gpu.mutant.splitkv_merge_no_rescale", "gpu.splitkv merging partials without the exp(m_s - M) rescale",
     {Family::SplitKv, Defect::SplitMergeNoRescale}, "mutant"},
    {"gpu.faulty.oob_write", "TEST ONLY: gpu.fa2, then one store just past the output's last element",
     {Family::FaultyWritePastEnd, Defect::None}, "faulty"},
    {"gpu.faulty.illegal_address", "TEST ONLY: stores to the null page (sticky CUDA fault)",
     {Family::FaultyIllegalAddress, Defect::None}, "faulty"},
    {"gpu.faulty.endless_loop", "TEST ONLY: a kernel that never returns (hang)",
     {Family::FaultySpin, Defect::None}, "faulty"},
};
constexpr int kEntryCount = int(sizeof kEntries / sizeof kEntries[0]);

const std::vector<afz_kernel>& gpu_kernels() {
  static const std::vector<afz_kernel> kernels = [] {
    std::vector<afz_kernel> ks;
    for (const Entry& e : kEntries) {
      afz_kernel k{};
      k.name = e.name;
      k.description = e.description;
      k.caps = kCaps;
      k.precision = e.spec.family == Family::SplitKv ? kSplitPrecision : kForwardPrecision;
      k.conventions = kConventions;
      k.supports = &supports;
      k.run = &run;
      k.user = const_cast<Spec*>(&e.spec);
      ks.push_back(k);
    }
    return ks;
  }();
  return kernels;
}

}  // namespace

// Origins: "builtin" for the correct kernels, "mutant" for the mutant gate,
// "faulty" for the test-only kernels that campaigns over every kernel skip.
void register_gpu_kernels(KernelRegistry& r) {
  const std::vector<afz_kernel>& ks = gpu_kernels();
  for (int n = 0; n < kEntryCount; ++n) r.add(&ks[n], kEntries[n].origin);
}

}  // namespace afz
