// cudnn.sdpa.  run() in the worker: copy the seq lengths to the host (they
// decide the padded path), merge a boolean mask into the bias (mask_bias),
// point O and the LSE at scratch when sequences are short, describe the graph
// (sdpa_graph), find or build its execution plan (sdpa_plan; building
// compiles a kernel, so plans are cached per process), bind the buffers,
// execute on p->stream, copy the valid rows out of the scratch.
#include "kernels/cudnn/cudnn_sdpa_kernel.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cudnn/backend_descriptor.h"
#include "kernels/cudnn/cudnn_sdpa_bwd_kernel.h"
#include "kernels/cudnn/cudnn_runtime.h"
#include "kernels/cudnn/mask_bias.h"
#include "kernels/cudnn/sdpa_graph.h"
#include "kernels/cudnn/sdpa_lowering.h"
#include "kernels/cudnn/sdpa_plan.h"
#include "kernels/registry.h"

namespace afz::cudnn {
namespace {

// Plans kept per worker process.  Each holds a compiled kernel; a fuzz
// campaign visits many shapes, an audit sweeps a grid: 64 covers a grid's
// working set without holding hundreds of modules.
constexpr size_t kPlanCacheEntries = 64;

// The adapter's guards against cuDNN defects measured on the H200 (cuDNN
// 9.14 and 9.19): `cudnn.sdpa` declines what cuDNN gets wrong, so a campaign
// tests the rest; `cudnn.sdpa.raw` sends cuDNN everything it accepts, so
// audits keep those defects on record with one-line repros.
struct Guards {
  // Row strides not a multiple of 8 elements: cuDNN builds a plan, then
  // computes wrong O and LSE and writes into the row gaps.
  bool unaligned_rows;
  // A sequence with queries and no key: NaN in O and LSE, where a row emptied
  // by a mask gets 0 and -inf.
  bool keyless_sequences;
};
constexpr Guards kGuarded{true, true};
constexpr Guards kRaw{false, false};

const Guards& guards_of(const afz_kernel* self) {
  return self && self->user ? *static_cast<const Guards*>(self->user) : kGuarded;
}

// cudnn.sdpa.raw sends row strides that are not 16-byte multiples, so its
// repros show cuDNN's wrong results on them (sdpa_graph.h).
bool allow_unaligned_rows(const Guards& g) { return !g.unaligned_rows; }

// The worker's cuDNN state: handles, plans, the workspace, device copies of
// the seq lengths and the merged mask bias, scratch outputs.  Created on the
// first run(), never destroyed: at process exit the CUDA context may already
// be gone, and destroying cuDNN objects then crashes instead of exiting.
struct Session {
  std::mutex mu;
  std::unordered_map<int, cudnnHandle_t> handles;  // per device: a plan is bound to its handle's device
  PlanCache plans{kPlanCacheEntries};              // keyed by device and graph
  DeviceBuffer workspace, seqlens, bias, scratch_o, scratch_lse;
  std::vector<int32_t> host_q, host_k;
};

Session& session() {
  static Session* s = new Session;
  return *s;
}

class Runner {
 public:
  Runner(const CudnnLibrary& lib, Session& s, const afz_problem& p, const Guards& g)
      : lib_(lib), s_(s), p_(p), guards_(g), run_(p), stream_(static_cast<cudaStream_t>(p.stream)) {}

  RunError run() {
    AFZ_TRY(prepare_handle());
    AFZ_TRY(copy_seqlens());
    if (guards_.keyless_sequences)
      if (std::string why = seqlen_unsupported_reason(p_, s_.host_q.data(), s_.host_k.data()); !why.empty())
        return unsupported(why);
    if (p_.bool_mask.data) AFZ_TRY(merge_bool_mask());
    AFZ_TRY(redirect_short_outputs());

    SdpaGraphOptions o;
    o.padded = needs_padding(p_, s_.host_q.data(), s_.host_k.data());
    o.cudnn_version = lib_.version;
    for (size_t b = 0; b < kBindingCount; ++b)
      if (const void* ptr = pointer(Binding(b))) o.alignment[b] = pointer_alignment(ptr);
    const SdpaGraph graph = build_sdpa_graph(run_, o);

    SdpaPlan* plan = nullptr;
    AFZ_TRY(cached_plan(lib_, &s_.plans, handle_, device_, graph, Determinism::Required, &plan));
    AFZ_TRY(poisoned_workspace(&s_.workspace, size_t(plan->workspace_bytes), stream_));
    AFZ_TRY(execute(graph, *plan));
    AFZ_TRY(copy_back_valid_rows());
    // The session's buffers (seq lengths, bias, scratch, workspace) serve the
    // next call, perhaps on another stream: none may still be in use when
    // this one returns.  The harness synchronizes after run() anyway.
    AFZ_TRY_CUDA(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (after cudnnBackendExecute)");
    return {};
  }

 private:
  RunError unsupported(std::string m) const { return unsupported_error(lib_, std::move(m)); }

  RunError prepare_handle() { return device_handle(lib_, &s_.handles, stream_, &device_, &handle_); }

  // Host copies decide the padded path and the scratch outputs; the device
  // copy is the graph's seq-len tensors, in our own buffer so that their
  // alignment is known.
  RunError copy_seqlens() {
    return cudnn::copy_seqlens(p_, stream_, &s_.seqlens, &s_.host_q, &s_.host_k, &seq_q_, &seq_kv_);
  }

  RunError merge_bool_mask() { return merge_bool_mask_on_device(p_, stream_, &s_.bias, &run_); }

  // cuDNN writes every row of the O (and Stats) tensor it is given, the rows
  // past seq_len_q included (measured on an H200): legal for cuDNN, whose
  // output is the whole tensor, but the ABI's padding rows must stay
  // untouched (in a real varlen layout they are other data).  With short
  // query sequences cuDNN writes packed scratch tensors and the valid rows
  // are copied out.
  RunError redirect_short_outputs() {
    short_q_ = false;
    for (int32_t n : s_.host_q) short_q_ |= n < p_.max_seqlen_q;
    if (!short_q_) return {};
    const int64_t rows = int64_t(p_.batch) * p_.heads_q * p_.max_seqlen_q;
    AFZ_TRY(ensure(&s_.scratch_o, size_t(rows) * p_.head_dim_v * kIoBytes, "scratch O"));
    run_.o.data = s_.scratch_o.ptr;
    run_.o.stride[3] = 1;
    run_.o.stride[2] = p_.head_dim_v;
    run_.o.stride[1] = int64_t(p_.max_seqlen_q) * p_.head_dim_v;
    run_.o.stride[0] = int64_t(p_.heads_q) * run_.o.stride[1];
    if (p_.lse) {
      AFZ_TRY(ensure(&s_.scratch_lse, size_t(rows) * sizeof(float), "scratch LSE"));
      run_.lse = static_cast<float*>(s_.scratch_lse.ptr);
      run_.lse_stride[2] = 1;
      run_.lse_stride[1] = p_.max_seqlen_q;
      run_.lse_stride[0] = int64_t(p_.heads_q) * p_.max_seqlen_q;
    }
    return {};
  }

  // `rows` rows of `width` bytes between pitched layouts, on the stream.
  RunError copy_rows(void* dst, int64_t dpitch, const void* src, int64_t spitch, size_t width, int32_t rows) {
    if (rows == 1)  // a pitch below the width is legal for one row, not for cudaMemcpy2D
      AFZ_TRY_CUDA(cudaMemcpyAsync(dst, src, width, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync (valid row)");
    else
      AFZ_TRY_CUDA(cudaMemcpy2DAsync(dst, size_t(dpitch), src, size_t(spitch), width, size_t(rows),
                                     cudaMemcpyDeviceToDevice, stream_),
                   "cudaMemcpy2DAsync (valid rows)");
    return {};
  }

  RunError copy_back_valid_rows() {
    if (!short_q_) return {};
    for (int b = 0; b < p_.batch; ++b) {
      const int32_t n = s_.host_q[size_t(b)];
      if (n == 0) continue;
      for (int h = 0; h < p_.heads_q; ++h) {
        const int64_t row = (int64_t(b) * p_.heads_q + h) * p_.max_seqlen_q;
        auto* o_dst = static_cast<char*>(p_.o.data) + (b * p_.o.stride[0] + h * p_.o.stride[1]) * kIoBytes;
        const auto* o_src = static_cast<const char*>(s_.scratch_o.ptr) + row * p_.head_dim_v * kIoBytes;
        AFZ_TRY(copy_rows(o_dst, p_.o.stride[2] * kIoBytes, o_src, p_.head_dim_v * kIoBytes,
                          size_t(p_.head_dim_v) * kIoBytes, n));
        if (!p_.lse) continue;
        float* l_dst = p_.lse + b * p_.lse_stride[0] + h * p_.lse_stride[1];
        const float* l_src = static_cast<const float*>(s_.scratch_lse.ptr) + row;
        AFZ_TRY(copy_rows(l_dst, p_.lse_stride[2] * int64_t(sizeof(float)), l_src, sizeof(float), sizeof(float), n));
      }
    }
    return {};
  }

  void* pointer(Binding b) const {
    switch (b) {
      case Binding::Q: return run_.q.data;
      case Binding::K: return run_.k.data;
      case Binding::V: return run_.v.data;
      case Binding::O: return run_.o.data;
      case Binding::Stats: return run_.lse;
      case Binding::SeqLenQ: return seq_q_;
      case Binding::SeqLenKv: return seq_kv_;
      case Binding::Bias: return run_.add_mask.data;
      default: return nullptr;
    }
  }

  RunError execute(const SdpaGraph& graph, const SdpaPlan& plan) {
    return execute_plan(lib_, handle_, graph, plan, [this](Binding b) { return pointer(b); }, s_.workspace.ptr);
  }

  // q, k, v and o share one 2-byte dtype (sdpa_unsupported_reason).
  static constexpr int64_t kIoBytes = 2;

  const CudnnLibrary& lib_;
  Session& s_;
  const afz_problem& p_;  // as the harness gave it
  const Guards& guards_;
  afz_problem run_;       // as cuDNN sees it: the merged bias, scratch outputs
  cudaStream_t stream_;
  int device_ = 0;
  cudnnHandle_t handle_ = nullptr;
  int32_t* seq_q_ = nullptr;
  int32_t* seq_kv_ = nullptr;
  bool short_q_ = false;
};

std::string unsupported_reason_with(const afz_problem& p, const CudnnLibrary& lib, const Guards& g) {
  if (!lib.loaded) return lib.describe();
  if (std::string why = sdpa_unsupported_reason(p, lib.version, allow_unaligned_rows(g)); !why.empty()) return why;
  if (!g.keyless_sequences || !p.seqlens_q || !p.seqlens_k) return "";
  return seqlen_unsupported_reason(p, p.seqlens_q, p.seqlens_k);
}

// In the harness, on the host problem: seq lengths readable, no CUDA call.
int supports(const afz_kernel* self, const afz_problem* p, char* reason, size_t len) {
  const std::string why = unsupported_reason_with(*p, cudnn_library(), guards_of(self));
  if (why.empty()) return 0;
  write_message(reason, len, why);
  return 1;
}

// In the worker, on the device problem: only shapes are read before the
// seq lengths are copied.
int run(const afz_kernel* self, const afz_problem* p, char* error, size_t len) {
  try {
    const CudnnLibrary& lib = cudnn_library();
    // The harness asked supports() in its own process; the worker may have
    // found another library (or none): say so, do not run.
    const std::string why =
        lib.loaded ? sdpa_unsupported_reason(*p, lib.version, allow_unaligned_rows(guards_of(self))) : lib.describe();
    if (!why.empty()) {
      write_message(error, len, why);
      return AFZ_RUN_UNSUPPORTED;
    }
    Session& s = session();
    std::lock_guard<std::mutex> lock(s.mu);
    const RunError e = Runner(lib, s, *p, guards_of(self)).run();
    if (e.code) write_message(error, len, e.message);
    return e.code;
  } catch (const std::exception& e) {
    write_message(error, len, std::string("cudnn.sdpa: ") + e.what());
    return 1;
  }
}

constexpr afz_caps kCaps = {
    AFZ_CAP_CAUSAL_TOP_LEFT | AFZ_CAP_CAUSAL_BOTTOM_RIGHT | AFZ_CAP_WINDOW | AFZ_CAP_BOOL_MASK | AFZ_CAP_ADD_MASK |
        AFZ_CAP_VARLEN | AFZ_CAP_GQA | AFZ_CAP_LSE | AFZ_CAP_STRIDED | AFZ_CAP_DV_NE_D | AFZ_CAP_GPU,
    (1u << AFZ_F16) | (1u << AFZ_BF16),
    (1u << AFZ_F16) | (1u << AFZ_BF16),
    /*min_head_dim=*/8, /*max_head_dim=*/256, /*head_dim_multiple=*/8,
    /*max_seqlen=*/0};

// What the graph specifies and cuDNN's fused kernel implements: Q.K^T on
// tensor cores with fp32 accumulation (products of fp16/bf16 exact), the
// scale multiply, masks and softmax statistics in fp32, P = E / L rounded to
// the input dtype because bmm2's A operand must be the I/O type (the
// tensor-core GEMM), P.V accumulated in fp32.  exp runs as ex2.approx.ftz
// (the SFU: 2 ulps, subnormal results flushed) on an argument the kernel
// rescales by log2(e) (another rounding): declared as 4 ulps.  Whether L sums
// P before or after its rounding is not documented: the looser bound (0).
constexpr afz_precision kPrecision = {AFZ_F32, AFZ_P_DTYPE_OF_V, AFZ_F32, /*exp_ulps=*/4.0f,
                                      /*flush_subnormals=*/1, /*l_from_unrounded_p=*/0};
// A row with no visible key: with the -inf fill the graph's own arithmetic
// would give exp(-inf - -inf) = NaN, but cuDNN's flash kernel guards the row:
// O = 0 and Stats = -inf, measured on an H200 with cuDNN 9.14 and 9.19 for
// rows emptied by causal/window bounds, the boolean mask and -inf biases.
// (Not documented.  A sequence with no key at all gives NaN instead:
// seqlen_unsupported_reason declines it.)
constexpr afz_conventions kConventions = {AFZ_MASKED_ROW_ZERO, AFZ_EMPTY_LSE_NEG_INF};

const afz_kernel kKernel = {
    "cudnn.sdpa",
    "cuDNN fused flash-attention forward: the SDPA operation graph (Q.K^T, scale, bias, masks, softmax, P.V) through "
    "cuDNN 9's backend API on its runtime-fusion engine; libcudnn dlopen'ed ($ATTNFUZZ_CUDNN_LIB or libcudnn.so.9)",
    kCaps,
    kPrecision,
    kConventions,
    &supports,
    &run,
    const_cast<Guards*>(&kGuarded),
};

const afz_kernel kRawKernel = {
    "cudnn.sdpa.raw",
    "cudnn.sdpa without the adapter's guards against measured cuDNN defects: row strides that are not a multiple "
    "of 8 elements (wrong O, writes into row gaps) and sequences with queries but no key (NaN O and LSE) go to "
    "cuDNN as it accepts them",
    kCaps,
    kPrecision,
    kConventions,
    &supports,
    &run,
    const_cast<Guards*>(&kRaw),
};

}  // namespace

const afz_kernel& cudnn_sdpa_kernel() { return kKernel; }
const afz_kernel& cudnn_sdpa_raw_kernel() { return kRawKernel; }

std::string cudnn_sdpa_unsupported_reason(const afz_problem& p, const CudnnLibrary& lib) {
  return unsupported_reason_with(p, lib, kGuarded);
}

}  // namespace afz::cudnn

namespace afz {

// The version strings record which cuDNN (and which file) this process
// found; the workers load the same request ($ATTNFUZZ_CUDNN_LIB is inherited).
void register_cudnn_kernels(KernelRegistry& r) {
  r.add(&cudnn::cudnn_sdpa_kernel(), "builtin", cudnn_library_version());
  r.add(&cudnn::cudnn_sdpa_raw_kernel(), "builtin", cudnn_library_version());
  // The backward under the forward's name: `--kernel cudnn.sdpa --pass bwd` pairs them.
  r.add_backward(&cudnn::cudnn_sdpa_backward_kernel(), "builtin", cudnn_library_version());
}

}  // namespace afz
