// Code that runs on the host and, compiled by nvcc, on the GPU: the fast
// oracle tier's steps (oracles/fast_steps.h) and the verdict's per-element
// steps (harness/judge/verdict_steps.h).  nvcc must build it with
// --fmad=false and g++ with -ffp-contract=off, so that every a*b+c is
// rounded twice on both sides, as written.
#pragma once

#if defined(__CUDACC__)
#define AFZ_HOST_DEVICE __host__ __device__
#else
#define AFZ_HOST_DEVICE
#endif
