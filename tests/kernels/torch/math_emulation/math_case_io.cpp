// The tensors of a backward case, out and back, for an emulation of PyTorch's
// math path outside the harness (math_sdpa_emulate.py beside this file):
//
//   math_case_io dump CASE DIR   writes the case's tensors and exact gradients
//                                as .npy files (harness/case/tensor_dump.h)
//   math_case_io judge CASE DIR  reads DIR/emu_{dq,dk,dv}.npy (float32) and
//                                judges them as torch.math [bwd]'s gradients
//                                (its declared precision), with and without
//                                AFZ_CAP_BWD_OWN_FORWARD, printing each verdict
//                                and the worst error / bound per gradient
//
// Nothing here links torch: the precision model is the plugin's header.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "harness/case/backward_problem.h"
#include "harness/case/case_file.h"
#include "harness/case/materialize.h"
#include "harness/case/tensor_dump.h"
#include "harness/judge/backward_verdict.h"
#include "kernels/abi/dtype.h"
#include "kernels/torch/backend_models.h"
#include "oracles/backward_oracle.h"

namespace {

using afz::BackwardMaterialized;

// Reads a float32 .npy of n elements (C order, little endian).
std::vector<float> read_npy_f32(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary);
  char pre[10];
  if (!f.read(pre, 10) || std::memcmp(pre, "\x93NUMPY", 6) != 0) throw std::runtime_error("not an .npy: " + path);
  uint16_t len = 0;
  std::memcpy(&len, pre + 8, 2);
  std::string header(len, ' ');
  f.read(header.data(), len);
  if (header.find("'<f4'") == std::string::npos) throw std::runtime_error(path + ": expected float32");
  std::vector<float> out(n);
  if (!f.read(reinterpret_cast<char*>(out.data()), std::streamsize(n * sizeof(float))))
    throw std::runtime_error(path + ": too short");
  return out;
}

struct Loaded {
  std::unique_ptr<afz::Materialized> m;
  std::unique_ptr<BackwardMaterialized> bm;
  afz::GradResult exact;
};

Loaded load(const std::string& case_path) {
  std::string err;
  auto c = afz::load_case_file(case_path, &err);
  if (!c) throw std::runtime_error(err);
  Loaded l;
  l.m = std::make_unique<afz::Materialized>(*c);
  l.bm = std::make_unique<BackwardMaterialized>(*l.m);
  const auto oracle = afz::make_escalation_backward_oracle();
  l.exact = oracle->compute(*l.bm->problem().fwd, l.bm->dout());
  l.bm->set_forward_outputs(l.exact);
  return l;
}

void dump(const std::string& case_path, const std::string& dir) {
  Loaded l = load(case_path);
  afz::dump_backward_tensors(dir, *l.bm, l.exact, /*kernel_ran=*/false);
}

// A host backward kernel with torch.math's declaration whose run() hands
// back the emulated gradients.
struct Replay {
  std::vector<float> dq, dk, dv;
};

int replay_run(const afz_backward_kernel* self, const afz_backward_problem* p, char*, size_t) {
  const auto& r = *static_cast<const Replay*>(self->user);
  const afz_problem& f = *p->fwd;
  auto put = [&](const afz_tensor& t, const std::vector<float>& src, int heads, int seq, int dim, const int32_t* lens) {
    for (int b = 0; b < f.batch; ++b)
      for (int h = 0; h < heads; ++h)
        for (int s = 0; s < lens[b]; ++s)
          for (int x = 0; x < dim; ++x)
            static_cast<float*>(t.data)[b * t.stride[0] + h * t.stride[1] + s * t.stride[2] + x * t.stride[3]] =
                src[((size_t(b) * heads + h) * seq + s) * dim + x];
  };
  put(p->dq, r.dq, f.heads_q, f.max_seqlen_q, f.head_dim, f.seqlens_q);
  put(p->dk, r.dk, f.heads_kv, f.max_seqlen_k, f.head_dim, f.seqlens_k);
  put(p->dv, r.dv, f.heads_kv, f.max_seqlen_k, f.head_dim_v, f.seqlens_k);
  return 0;
}

// Judges r as torch.math [bwd]'s gradients with the given caps.
void judge_as(const char* label, uint32_t caps, Loaded& l, Replay& r) {
  afz_backward_kernel k{};
  k.name = "emulated torch.math";
  k.caps.flags = caps;
  k.precision = afz::torchk::kMathPrecision;
  k.run = replay_run;
  k.user = &r;
  l.bm->poison_outputs();
  replay_run(&k, &l.bm->problem(), nullptr, 0);
  const afz::Verdict v = afz::judge_backward(k, *l.bm, l.exact, nullptr);
  fmt::print("{}: verdict {}{}{}\n", label, afz::verdict_name(v.cls), v.detail.empty() ? "" : ": ", v.detail);
  fmt::print("{}: worst {}[b={} h={} s={} x={}] kernel {:.9g} oracle {:.9g} error {:.3g} = {:.3g} x bound\n", label,
             v.worst.tensor, v.worst.b, v.worst.h, v.worst.i, v.worst.x, v.worst.kernel, v.worst.oracle, v.worst.error,
             v.worst.over_bound);
  const char* names[] = {"dq", "dk", "dv"};
  for (int g = 0; g < 3; ++g)
    fmt::print("{}:   {} max error / bound {:.3g}\n", label, names[g], v.grad_stats[size_t(g)].max_over_bound);
}

void judge(const std::string& case_path, const std::string& dir) {
  Loaded l = load(case_path);
  const afz_problem& p = l.m->problem();
  const size_t sq = p.max_seqlen_q, sk = p.max_seqlen_k;
  Replay r{read_npy_f32(dir + "/emu_dq.npy", p.batch * p.heads_q * sq * p.head_dim),
           read_npy_f32(dir + "/emu_dk.npy", p.batch * p.heads_kv * sk * p.head_dim),
           read_npy_f32(dir + "/emu_dv.npy", p.batch * p.heads_kv * sk * p.head_dim_v)};
  judge_as("fused model", AFZ_CAP_GRADS_IN_INPUT_DTYPE, l, r);
  judge_as("own forward", AFZ_CAP_GRADS_IN_INPUT_DTYPE | AFZ_CAP_BWD_OWN_FORWARD, l, r);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || (std::strcmp(argv[1], "dump") != 0 && std::strcmp(argv[1], "judge") != 0)) {
    std::fprintf(stderr, "usage: %s dump|judge CASE DIR\n", argv[0]);
    return 2;
  }
  try {
    if (std::strcmp(argv[1], "dump") == 0)
      dump(argv[2], argv[3]);
    else
      judge(argv[2], argv[3]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
