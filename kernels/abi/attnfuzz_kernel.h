/* attnfuzz kernel ABI, version 1.
 *
 * The one interface every kernel under test implements: the built-in CPU
 * kernels, our CUDA kernels, production adapters, and third-party plugins
 * loaded with `--kernel-lib path.so`.  Plain C so that any toolchain can
 * implement it.  A plugin exports
 *
 *     int attnfuzz_kernels(const afz_kernel** kernels, int* count);
 *
 * returning 0 and an array that stays valid until the library is unloaded.
 *
 * Tensors are logical [batch][head][seq][dim] arrays addressed through
 * element strides, so BHSD, BSHD, packed-QKV views, padded rows and stride-0
 * broadcasts are all the same struct.  Sequence b holds seqlens_q[b] queries
 * and seqlens_k[b] keys; positions past those lengths are padding that a
 * kernel must neither read (the harness poisons it with NaN) nor write.
 */
#ifndef ATTNFUZZ_KERNEL_H
#define ATTNFUZZ_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AFZ_ABI_VERSION 1

typedef enum afz_dtype {
  AFZ_F32 = 0,
  AFZ_F16 = 1,
  AFZ_BF16 = 2,
  AFZ_F8E4M3 = 3, /* reserved in the case format; no kernel claims it yet */
  AFZ_U8 = 4,     /* boolean masks only: 1 = the key takes part */
  AFZ_DTYPE_COUNT = 5
} afz_dtype;

/* Causal and sliding-window alignment (FlashAttention's convention).
 * With offset = 0 (top-left) or seqlen_k - seqlen_q (bottom-right), key j is
 * visible to query i iff  i + offset - window_left <= j <= i + offset + window_right,
 * a negative window side meaning unbounded.  Causal is window (-1, 0). */
typedef enum afz_align { AFZ_ALIGN_TOP_LEFT = 0, AFZ_ALIGN_BOTTOM_RIGHT = 1 } afz_align;

typedef struct afz_tensor {
  void* data;        /* element [b][h][s][d] lives at data + sum(index * stride) */
  afz_dtype dtype;
  int64_t stride[4]; /* in elements; 0 broadcasts */
} afz_tensor;

typedef struct afz_problem {
  uint32_t abi_version;
  int32_t batch, heads_q, heads_kv; /* heads_q % heads_kv == 0: GQA / MQA */
  int32_t head_dim, head_dim_v;
  int32_t max_seqlen_q, max_seqlen_k;  /* allocation extents */
  const int32_t* seqlens_q;            /* [batch], each in [0, max_seqlen_q] */
  const int32_t* seqlens_k;            /* [batch], each in [0, max_seqlen_k] */
  float scale;                         /* multiplies q.k */
  float softcap;                       /* 0: none; else s -> softcap * tanh(s / softcap) */
  int32_t window_left, window_right;   /* -1: unbounded; causal is (-1, 0) */
  int32_t has_window;                  /* 0: no causal/window mask at all */
  afz_align align;
  afz_tensor bool_mask;                /* AFZ_U8 [b][h][i][j] or data == NULL */
  afz_tensor add_mask;                 /* AFZ_F32 [b][h][i][j] added after softcap, or NULL */
  afz_tensor q, k, v;                  /* k, v: [b][heads_kv][j][d] */
  afz_tensor o;                        /* [b][heads_q][i][dv], written by the kernel */
  float* lse;                          /* [b][heads_q][i], natural log, or NULL */
  int64_t lse_stride[3];
  void* stream;                        /* cudaStream_t for GPU kernels, else NULL */
} afz_problem;

/* Capability flags: a kernel that lacks one declines such cases (unsupported). */
enum {
  AFZ_CAP_CAUSAL_TOP_LEFT = 1u << 0,
  AFZ_CAP_CAUSAL_BOTTOM_RIGHT = 1u << 1,
  AFZ_CAP_WINDOW = 1u << 2,
  AFZ_CAP_BOOL_MASK = 1u << 3,
  AFZ_CAP_ADD_MASK = 1u << 4,
  AFZ_CAP_VARLEN = 1u << 5,     /* per-sequence lengths, zero allowed */
  AFZ_CAP_GQA = 1u << 6,
  AFZ_CAP_SOFTCAP = 1u << 7,
  AFZ_CAP_LSE = 1u << 8,
  AFZ_CAP_STRIDED = 1u << 9,    /* arbitrary strides, stride-0 broadcast */
  AFZ_CAP_DV_NE_D = 1u << 10,   /* head_dim_v != head_dim */
  AFZ_CAP_GPU = 1u << 11,       /* pointers are device pointers */
  /* Reruns on the same inputs may differ in their bits (atomics, split
   * reductions scheduled at run time): determinism reruns are skipped.
   * Without it the kernel promises bit-identical reruns, and the harness's
   * determinism reruns hold it to that. */
  AFZ_CAP_NONDETERMINISTIC = 1u << 12,
  /* Backward kernels only (additive to ABI v1): dQ, dK and dV are rounded
   * to the input dtype before they are written, as PyTorch's and
   * FlashAttention's backward operators return them.  The buffers stay
   * fp32 (the rounded values fit exactly); the verdict charges one rounding
   * to the input dtype instead of one to fp32. */
  AFZ_CAP_GRADS_IN_INPUT_DTYPE = 1u << 13,
  /* Backward kernels only (additive to ABI v1): the kernel ignores the O and
   * LSE it is given and differentiates its OWN forward, as autograd does
   * through a composite attention (PyTorch's math path): P = exp(S - m) / l
   * normalized by its own row sum of its own scores, D = rowsum(dP * P), and
   * the scale possibly applied to q and k before the S GEMM (PyTorch: each
   * times a rounded sqrt(scale)).  Every score error of a row then reaches
   * every P of the row and D; the verdict charges those terms (and the
   * scale's extra roundings) instead of assuming P = exp(S - LSE) and
   * D = dO . O from the exact LSE and O. */
  AFZ_CAP_BWD_OWN_FORWARD = 1u << 14
};

typedef struct afz_caps {
  uint32_t flags;
  uint32_t in_dtypes;  /* bit (1 << afz_dtype) */
  uint32_t out_dtypes;
  int32_t min_head_dim, max_head_dim, head_dim_multiple;
  int32_t max_seqlen; /* 0: no limit */
} afz_caps;

/* p_dtype of a kernel that rounds P to the dtype of V, whatever the problem's
 * (a tensor-core P.V GEMM takes both operands in the input dtype): the
 * verdict reads the problem's v.dtype. */
#define AFZ_P_DTYPE_OF_V ((afz_dtype)AFZ_DTYPE_COUNT)

/* How the kernel computes, so the verdict can bound its rounding error. */
typedef struct afz_precision {
  afz_dtype score_dtype; /* q.k accumulation and softmax statistics */
  afz_dtype p_dtype;     /* P is rounded to this before the P.V product, or AFZ_P_DTYPE_OF_V */
  afz_dtype acc_dtype;   /* accumulator of P.V and of l */
  float exp_ulps;        /* error of the exponential, in ulps of score_dtype */
  int32_t flush_subnormals; /* 1: subnormal P / exp results may flush to 0 */
  int32_t l_from_unrounded_p; /* 1: l sums P before its rounding to p_dtype (FA2);
                                 0: l may sum the rounded P (looser LSE bound) */
} afz_precision;

typedef enum afz_masked_row_output {
  AFZ_MASKED_ROW_ZERO = 0, /* O = 0, the exact limit of the empty sum */
  AFZ_MASKED_ROW_NAN = 1   /* O = NaN (0/0), e.g. PyTorch's math backend */
} afz_masked_row_output;

typedef enum afz_empty_lse {
  AFZ_EMPTY_LSE_NEG_INF = 0, /* log(0) */
  AFZ_EMPTY_LSE_POS_INF = 1, /* FlashAttention's convention */
  AFZ_EMPTY_LSE_NAN = 2,
  AFZ_EMPTY_LSE_ZERO = 3     /* exactly 0: PyTorch's memory-efficient kernel (additive to ABI v1) */
} afz_empty_lse;

typedef struct afz_conventions {
  afz_masked_row_output masked_row_output;
  afz_empty_lse empty_lse;
} afz_conventions;

typedef struct afz_kernel {
  const char* name;
  const char* description;
  afz_caps caps;
  afz_precision precision;
  afz_conventions conventions;
  /* 0 if the kernel takes the problem; else writes a one-line reason.  NULL: caps decide.
   * For AFZ_CAP_GPU kernels supports() runs in the harness on the HOST problem
   * (host pointers: read shapes and strides, never dereference), and run()
   * later gets the device copy of the same problem in a worker process. */
  int (*supports)(const struct afz_kernel* self, const afz_problem* p, char* reason, size_t reason_len);
  /* 0 on success; AFZ_RUN_UNSUPPORTED when the library under test refuses the
   * configuration at run time (its own reason in `error`: an `unsupported`
   * verdict, never a failure); AFZ_RUN_HANG when a plugin's own watchdog gave
   * up on the work (a hang verdict); else writes a one-line error (a crash verdict). */
  int (*run)(const struct afz_kernel* self, const afz_problem* p, char* error, size_t error_len);
  void* user;
} afz_kernel;

/* run()'s return value for "the library refuses this problem" (see run). */
#define AFZ_RUN_UNSUPPORTED 0x75 /* 'u' */
/* run()'s return value for "the work did not finish in time" (additive to ABI
 * v1): a plugin that runs the kernel elsewhere under its own watchdog (the
 * Python bridge's worker process) gave up on it and says why in `error`.  A
 * `hang` verdict, as when the harness's own timeout kills a kernel. */
#define AFZ_RUN_HANG 0x68 /* 'h' */

typedef int (*afz_get_kernels_fn)(const afz_kernel** kernels, int* count);
#define AFZ_PLUGIN_SYMBOL "attnfuzz_kernels"

/* A plugin also exports  uint32_t attnfuzz_abi_version(void)  returning the
 * AFZ_ABI_VERSION it was compiled against, so that a library built for another
 * layout of these structs is refused with a clear message, not misread. */
typedef uint32_t (*afz_abi_version_fn)(void);
#define AFZ_PLUGIN_ABI_SYMBOL "attnfuzz_abi_version"

/* Optional plugin symbols (additive to ABI v1):
 *
 *   const char* attnfuzz_library_version(void)
 *     the version of the library under test, as it found it at load time
 *     ("PyTorch 2.11.0+cu130, CUDA 13.0, cuDNN 91900"); shown by
 *     `attnfuzz kernels` and recorded in reports.
 *
 *   int attnfuzz_configure(const char* config, char* error, size_t error_len)
 *     called once, before attnfuzz_kernels, with the text after '#' in
 *     `--kernel-lib path.so#config` ("" when there is none); nonzero refuses
 *     the library with the one-line error.  The whole `path#config` is the
 *     kernels' origin, so workers and repro commands load it the same way. */
typedef const char* (*afz_library_version_fn)(void);
#define AFZ_PLUGIN_VERSION_SYMBOL "attnfuzz_library_version"
typedef int (*afz_configure_fn)(const char* config, char* error, size_t error_len);
#define AFZ_PLUGIN_CONFIGURE_SYMBOL "attnfuzz_configure"

/* One more optional symbol (additive to ABI v1):
 *
 *   int attnfuzz_kernel_timing(const afz_kernel* kernel, afz_kernel_timing* out)
 *     how the library split the kernel's time in this process since it was
 *     loaded: calls that compiled (the first of their shape, for a kernel
 *     compiled per shape: torch.compile, Triton) apart from the others, and
 *     host <-> device copies that run() pays besides the kernel; 0 on
 *     success, nonzero when it keeps no such split.  Reports carry the
 *     difference over a run, per kernel (the Python bridge exports it). */
typedef struct afz_kernel_timing {
  int64_t calls;         /* calls that completed */
  int64_t compile_calls; /* of which the first of their shape */
  double compile_s;      /* those calls' time, compilation included */
  double run_s;          /* the other calls' time */
  double copy_s;         /* copies in and out, not in either of the above */
} afz_kernel_timing;
typedef int (*afz_kernel_timing_fn)(const afz_kernel* kernel, afz_kernel_timing* out);
#define AFZ_PLUGIN_TIMING_SYMBOL "attnfuzz_kernel_timing"

/* ---- The backward pass (additive to ABI v1: no struct above changed) -----
 *
 * A backward kernel gets the forward problem (q, k, v, masks, seqlens, scale,
 * softcap, window; fwd->o and fwd->lse are not used and may be NULL), the
 * upstream gradient dO and the forward's outputs O and LSE as INPUTS, and
 * writes dQ, dK and dV:
 *
 *   P = exp(S - LSE)  (recomputed block by block: no running max),
 *   dV_j = sum_i P_ij dO_i,   dP_ij = dO_i . v_j,   D_i = dO_i . O_i,
 *   dS_ij = P_ij (dP_ij - D_i),
 *   dQ_i = sum_j dS_ij (ds_ij/dt_ij) k_j,   dK_j = sum_i dS_ij (ds_ij/dt_ij) q_i,
 *   with t = q.k and ds/dt = scale (times sech^2(scale t / softcap) with a softcap).
 *
 * dK and dV are per logical KV head [b][heads_kv][j][d]: under GQA they sum
 * the gradients of the heads_q / heads_kv query heads that share the KV head.
 * A KV tensor broadcast with stride 0 still gets one gradient per logical
 * (b, kv head): the output tensors are never broadcast.  Rows with no visible
 * key contribute nothing (zero gradients); padding (i >= seqlens_q[b],
 * j >= seqlens_k[b]) is neither read nor written.
 *
 * O is given in the forward's OUTPUT dtype (out.dtype == fwd->o.dtype: bf16,
 * fp16 or fp32), as a real forward stores it: the exact forward output
 * rounded once to that dtype.  Read it through out.dtype and its strides,
 * never as fp32.  D = dO . O from this O carries its rounding; the
 * verdict's bound pays for that (u_o |O| per element), not for anything
 * coarser.  dO is given in the input dtype.
 *
 * The LSE given follows the forward ABI: fp32, natural log, -inf for a row with no
 * visible key (whatever the kernel's own forward writes): exp(S - LSE) there
 * is exp(-inf - (-inf)) = NaN unless the kernel guards it.
 *
 * A backward kernel with AFZ_CAP_GPU runs in the attnfuzz worker process, as
 * forward GPU kernels do: every pointer of the problem (fwd's q, k, v, masks
 * and seqlens, dout, out, lse, dq, dk, dv) is a device pointer into a guarded
 * mirror, fwd->stream is the stream the worker synchronizes, and supports()
 * runs in the harness on the host problem.
 *
 * A plugin exports, besides (or instead of) attnfuzz_kernels,
 *
 *     int attnfuzz_backward_kernels(const afz_backward_kernel** kernels, int* count);
 *
 * with the same lifetime rules.  precision.p_dtype also says what dS is
 * rounded to before the dQ / dK products (a tensor-core GEMM takes it in the
 * input dtype, like P before P^T dO).  Determinism checks (fuzz's rerun
 * share, audit, --determinism) run a backward kernel twice and compare the
 * dQ, dK, dV bits, unless caps.flags has AFZ_CAP_NONDETERMINISTIC (atomics). */
typedef struct afz_backward_problem {
  const afz_problem* fwd;              /* inputs and shape; fwd->o, fwd->lse unused */
  afz_tensor dout;                     /* dO [b][heads_q][i][dv], input */
  afz_tensor out;                      /* O  [b][heads_q][i][dv], input (the forward's output, in its dtype) */
  const float* lse;                    /* [b][heads_q][i], input, natural log */
  int64_t lse_stride[3];
  afz_tensor dq;                       /* [b][heads_q][i][d], written */
  afz_tensor dk;                       /* [b][heads_kv][j][d], written */
  afz_tensor dv;                       /* [b][heads_kv][j][dv], written */
} afz_backward_problem;

typedef struct afz_backward_kernel {
  const char* name;
  const char* description;
  afz_caps caps;                       /* AFZ_CAP_LSE is meaningless here */
  afz_precision precision;
  afz_conventions conventions;
  int (*supports)(const struct afz_backward_kernel* self, const afz_backward_problem* p, char* reason,
                  size_t reason_len);
  int (*run)(const struct afz_backward_kernel* self, const afz_backward_problem* p, char* error, size_t error_len);
  void* user;
} afz_backward_kernel;

typedef int (*afz_get_backward_kernels_fn)(const afz_backward_kernel** kernels, int* count);
#define AFZ_BACKWARD_PLUGIN_SYMBOL "attnfuzz_backward_kernels"

#ifdef __cplusplus
}
#endif
#endif
