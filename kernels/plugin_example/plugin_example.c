/* A minimal attnfuzz kernel plugin in plain C: a naive two-pass softmax in
 * fp32 for dense BHSD fp32 tensors, with LSE and nothing else (no masks, no
 * varlen, no GQA).  Build it as a shared library and load it with
 * `attnfuzz --kernel-lib libattnfuzz_plugin_example.so`.
 *
 * A plugin exports attnfuzz_abi_version() and attnfuzz_kernels(), its
 * backward kernels with attnfuzz_backward_kernels() (this one: the same
 * naive method's gradients, under the same name, so `--pass both` pairs
 * them), and may export attnfuzz_library_version() and attnfuzz_configure();
 * see kernels/abi/attnfuzz_kernel.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attnfuzz_kernel.h"

/* The test suite also builds this file with these overridden, to get
 * deliberately broken plugins (wrong ABI version, no kernel table). */
#ifndef PLUGIN_EXAMPLE_ABI_VERSION
#define PLUGIN_EXAMPLE_ABI_VERSION AFZ_ABI_VERSION
#endif

static const float* row_f32(const afz_tensor* t, int b, int h, int s) {
  return (const float*)t->data + b * t->stride[0] + h * t->stride[1] + s * t->stride[2];
}

#ifdef PLUGIN_EXAMPLE_STALE_AFTER
/* A test build (attnfuzz_plugin_stale): from its PLUGIN_EXAMPLE_STALE_AFTER-th
 * call in a process on, the kernel leaves the first query row unwritten, as a
 * library whose cached state goes stale after other work would.  It fails in
 * a long-lived process and passes in a fresh one (--confirm-alone's tests). */
static int stale_calls;
#endif

static int naive_run(const afz_kernel* self, const afz_problem* p, char* error, size_t error_len) {
  (void)self;
#ifdef PLUGIN_EXAMPLE_STALE_AFTER
  const int stale = ++stale_calls >= PLUGIN_EXAMPLE_STALE_AFTER;
#else
  const int stale = 0;
#endif
  if (p->abi_version != AFZ_ABI_VERSION) {
    snprintf(error, error_len, "problem ABI version %u, plugin expects %d", p->abi_version, AFZ_ABI_VERSION);
    return 1;
  }
  float* s = (float*)malloc(sizeof(float) * (size_t)(p->max_seqlen_k > 0 ? p->max_seqlen_k : 1));
  if (!s) {
    snprintf(error, error_len, "out of memory");
    return 1;
  }
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads_q; ++h)
      for (int i = 0; i < p->seqlens_q[b]; ++i) {
        if (stale && b == 0 && h == 0 && i == 0) continue;
        const int n = p->seqlens_k[b];
        const int hk = h / (p->heads_q / p->heads_kv);
        const float* q = row_f32(&p->q, b, h, i);
        float m = -INFINITY, l = 0.0f;
        /* Pass 1: scores and their max. */
        for (int j = 0; j < n; ++j) {
          const float* k = row_f32(&p->k, b, hk, j);
          float dot = 0.0f;
          for (int x = 0; x < p->head_dim; ++x) dot += q[x] * k[x];
          s[j] = dot * p->scale;
          if (s[j] > m) m = s[j];
        }
        /* Pass 2: exp-sum and P.V, with the max subtracted. */
        float* o = (float*)p->o.data + b * p->o.stride[0] + h * p->o.stride[1] + i * p->o.stride[2];
        for (int x = 0; x < p->head_dim_v; ++x) o[x] = 0.0f;
        for (int j = 0; j < n; ++j) {
          const float pj = expf(s[j] - m);
          const float* v = row_f32(&p->v, b, hk, j);
          l += pj;
          for (int x = 0; x < p->head_dim_v; ++x) o[x] += pj * v[x];
        }
        /* No key at all: O = 0 (not 0/0), LSE = log 0. */
        for (int x = 0; x < p->head_dim_v; ++x) o[x] = n > 0 ? o[x] / l : 0.0f;
        if (p->lse)
          p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] =
              n > 0 ? m + logf(l) : -INFINITY;
      }
  free(s);
  return 0;
}

/* One element of a bf16 / fp16 / fp32 tensor, exactly as a float: the
 * backward is given O in the forward's output dtype. */
static float half_bits_to_float(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float mag = e == 0x1f ? (m ? NAN : INFINITY)
                    : e == 0  ? ldexpf((float)m, -24)          /* subnormal: m 2^-24 */
                              : ldexpf((float)(m | 0x400), e - 25); /* (1024 + m) 2^(e - 25) */
  return (h & 0x8000) ? -mag : mag;
}

static float load_element(const afz_tensor* t, int b, int h, int s, int x) {
  const int64_t at = b * t->stride[0] + h * t->stride[1] + s * t->stride[2] + x * t->stride[3];
  switch (t->dtype) {
    case AFZ_BF16: {
      /* bf16 is the top half of an fp32. */
      union { uint32_t u; float f; } w = {(uint32_t)((const uint16_t*)t->data)[at] << 16};
      return w.f;
    }
    case AFZ_F16: return half_bits_to_float(((const uint16_t*)t->data)[at]);
    default: return ((const float*)t->data)[at];
  }
}

static float* grad_row(const afz_tensor* t, int b, int h, int s) {
  return (float*)t->data + b * t->stride[0] + h * t->stride[1] + s * t->stride[2];
}

/* The gradients of the same naive attention, row by row, from the LSE the
 * harness hands over: P = exp(S - LSE), D = rowsum(dO * O),
 * dS = P * (dO.V - D), dQ = scale dS.K, dK += scale dS^T.Q, dV += P^T.dO. */
static int naive_backward_run(const afz_backward_kernel* self, const afz_backward_problem* bp, char* error,
                              size_t error_len) {
  (void)self;
  const afz_problem* p = bp->fwd;
  if (p->abi_version != AFZ_ABI_VERSION) {
    snprintf(error, error_len, "problem ABI version %u, plugin expects %d", p->abi_version, AFZ_ABI_VERSION);
    return 1;
  }
  const int group = p->heads_q / p->heads_kv;
  for (int b = 0; b < p->batch; ++b) {
    /* dK and dV accumulate over the query rows: start from 0. */
    for (int h = 0; h < p->heads_kv; ++h)
      for (int j = 0; j < p->seqlens_k[b]; ++j) {
        for (int x = 0; x < p->head_dim; ++x) grad_row(&bp->dk, b, h, j)[x] = 0.0f;
        for (int x = 0; x < p->head_dim_v; ++x) grad_row(&bp->dv, b, h, j)[x] = 0.0f;
      }
    for (int h = 0; h < p->heads_q; ++h)
      for (int i = 0; i < p->seqlens_q[b]; ++i) {
        const int hk = h / group, n = p->seqlens_k[b];
        const float* q = row_f32(&p->q, b, h, i);
        const float* d_o = row_f32(&bp->dout, b, h, i);

        float* dq = grad_row(&bp->dq, b, h, i);
        const float lse = bp->lse[b * bp->lse_stride[0] + h * bp->lse_stride[1] + i * bp->lse_stride[2]];
        float d = 0.0f;
        /* O as the forward stored it: bf16, fp16 or fp32. */
        for (int x = 0; x < p->head_dim_v; ++x) d += d_o[x] * load_element(&bp->out, b, h, i, x);
        for (int x = 0; x < p->head_dim; ++x) dq[x] = 0.0f;
        /* A row with no key has LSE -inf: exp(S - LSE) would be exp(+inf);
         * its gradients are 0. */
        if (n == 0) continue;
        for (int j = 0; j < n; ++j) {
          const float* k = row_f32(&p->k, b, hk, j);
          const float* v = row_f32(&p->v, b, hk, j);
          float dot = 0.0f, dp = 0.0f;
          for (int x = 0; x < p->head_dim; ++x) dot += q[x] * k[x];
          for (int x = 0; x < p->head_dim_v; ++x) dp += d_o[x] * v[x];
          const float pij = expf(dot * p->scale - lse);
          const float ds = pij * (dp - d);
          float* dk = grad_row(&bp->dk, b, hk, j);
          float* dv = grad_row(&bp->dv, b, hk, j);
          for (int x = 0; x < p->head_dim; ++x) {
            dq[x] += p->scale * ds * k[x];
            dk[x] += p->scale * ds * q[x];
          }
          for (int x = 0; x < p->head_dim_v; ++x) dv[x] += pij * d_o[x];
        }
      }
  }
  return 0;
}

uint32_t attnfuzz_abi_version(void) { return PLUGIN_EXAMPLE_ABI_VERSION; }

/* Optional: what `attnfuzz kernels` shows as the library under test. */
const char* attnfuzz_library_version(void) { return "plugin example 1.0 (libm expf)"; }

/* Optional: `--kernel-lib libattnfuzz_plugin_example.so#CONFIG` hands CONFIG
 * here before attnfuzz_kernels.  This plugin takes none, and says so. */
int attnfuzz_configure(const char* config, char* error, size_t error_len) {
  if (config[0] == '\0') return 0;
  snprintf(error, error_len, "the plugin example takes no configuration (got '%s')", config);
  return 1;
}

#ifndef PLUGIN_EXAMPLE_WITHOUT_KERNELS
static const afz_kernel kPluginKernels[] = {{
    "example.naive_fp32",
    "plugin example: naive two-pass softmax in fp32, dense BHSD fp32 only",
    {AFZ_CAP_LSE, 1u << AFZ_F32, 1u << AFZ_F32, 1, 1024, 1, 0},
    /* scores, P and accumulator in fp32; expf within 1 ulp; no flushing; l sums the same P */
    {.score_dtype = AFZ_F32, .p_dtype = AFZ_F32, .acc_dtype = AFZ_F32, .exp_ulps = 1.0f,
     .flush_subnormals = 0, .l_from_unrounded_p = 1},
    {AFZ_MASKED_ROW_ZERO, AFZ_EMPTY_LSE_NEG_INF},
    NULL,
    naive_run,
    NULL,
}};

int attnfuzz_kernels(const afz_kernel** kernels, int* count) {
  *kernels = kPluginKernels;
  *count = (int)(sizeof kPluginKernels / sizeof kPluginKernels[0]);
  return 0;
}

static const afz_backward_kernel kPluginBackwardKernels[] = {{
    "example.naive_fp32",
    "plugin example: the naive method's gradients in fp32 from the given LSE; fp32 inputs, O in fp32, bf16 or fp16",
    {AFZ_CAP_GQA, 1u << AFZ_F32, (1u << AFZ_F32) | (1u << AFZ_BF16) | (1u << AFZ_F16), 1, 1024, 1, 0},
    {.score_dtype = AFZ_F32, .p_dtype = AFZ_F32, .acc_dtype = AFZ_F32, .exp_ulps = 1.0f,
     .flush_subnormals = 0, .l_from_unrounded_p = 1},
    {AFZ_MASKED_ROW_ZERO, AFZ_EMPTY_LSE_NEG_INF},
    NULL,
    naive_backward_run,
    NULL,
}};

int attnfuzz_backward_kernels(const afz_backward_kernel** kernels, int* count) {
  *kernels = kPluginBackwardKernels;
  *count = (int)(sizeof kPluginBackwardKernels / sizeof kPluginBackwardKernels[0]);
  return 0;
}
#endif
