#include "harness/campaign/minimize.h"

#include <algorithm>
#include <chrono>

#include "harness/case/case_io.h"
#include "harness/case/transforms.h"
#include "harness/judge/signature.h"

namespace afz {
namespace {

using Candidates = std::vector<Case>;

// Lengths to try in place of n, smallest first: the floor itself, then the
// steps of a binary search toward n (halfway, three quarters, ... n - 1),
// so a threshold at t is found in about 2 log2(n - t) runs, not n - t.
std::vector<int> shorter(int n, int floor) {
  std::vector<int> out;
  if (n <= floor) return out;
  out.push_back(floor);
  for (int step = (n - floor) / 2; step >= 1; step /= 2)
    if (n - step != out.back()) out.push_back(n - step);
  if (out.back() != n - 1) out.push_back(n - 1);
  return out;
}

// ------------------------------------------------------------ reducers --

// One sequence of the batch alone.
Candidates single_sequence(const Case& c) {
  Candidates out;
  if (c.batch == 1) return out;
  for (int b = 0; b < c.batch; ++b) {
    Case n = c;
    n.batch = 1;
    n.seqlens_q = {c.seqlens_q[b]};
    n.seqlens_k = {c.seqlens_k[b]};
    out.push_back(n);
  }
  return out;
}

// The first or the second half of the batch.
Candidates half_batch(const Case& c) {
  Candidates out;
  if (c.batch < 3) return out;
  const int half = c.batch / 2;
  Case first = c, second = c;
  first.batch = half;
  first.seqlens_q.resize(size_t(half));
  first.seqlens_k.resize(size_t(half));
  second.batch = c.batch - half;
  second.seqlens_q.erase(second.seqlens_q.begin(), second.seqlens_q.begin() + half);
  second.seqlens_k.erase(second.seqlens_k.begin(), second.seqlens_k.begin() + half);
  out.push_back(first);
  out.push_back(second);
  return out;
}

Candidates fewer_heads(const Case& c) {
  Candidates out;
  auto with = [&](int hq, int hkv) {
    if (hq < 1 || hkv < 1 || hq % hkv || (hq == c.heads_q && hkv == c.heads_kv)) return;
    Case n = c;
    n.heads_q = hq;
    n.heads_kv = hkv;
    out.push_back(n);
  };
  const int ratio = c.heads_q / c.heads_kv;
  with(1, 1);
  with(ratio, 1);                         // MQA with the same ratio
  with(c.heads_kv, c.heads_kv);           // no GQA
  with(c.heads_kv * std::max(1, ratio / 2), c.heads_kv);
  with(std::max(1, c.heads_kv / 2) * ratio, std::max(1, c.heads_kv / 2));
  return out;
}

// Each feature dropped on its own, back to the plain case's default.
Candidates drop_features(const Case& c) {
  Candidates out;
  auto edit = [&](bool applies, auto change) {
    if (!applies) return;
    Case n = c;
    change(n);
    out.push_back(n);
  };
  const Case plain;
  edit(c.bool_mask.has_value(), [](Case& n) { n.bool_mask.reset(); });
  edit(c.add_mask.has_value(), [](Case& n) { n.add_mask.reset(); });
  edit(c.has_window, [&](Case& n) {
    n.has_window = false;
    n.window_left = n.window_right = -1;
    n.align = plain.align;
  });
  edit(c.softcap != 0, [](Case& n) { n.softcap = 0; });
  edit(c.layout != plain.layout, [&](Case& n) { n.layout = plain.layout; });
  edit(c.row_gap != 0, [](Case& n) { n.row_gap = 0; });
  edit(c.kv_broadcast != KvBroadcast::None, [](Case& n) { n.kv_broadcast = KvBroadcast::None; });
  edit(c.poison != plain.poison, [&](Case& n) { n.poison = plain.poison; });
  edit(c.out_dtype != c.in_dtype, [](Case& n) { n.out_dtype = n.in_dtype; });
  // fp32 throughout is the canonical dtype: a failure that survives it is
  // not about fp16/bf16 rounding, and one spelling per bug keeps the
  // signatures of one bug together.  Not with the dtype's largest finite
  // values planted: fp32's (3.4e38) overflow any fp32 statistics, which
  // would trade the bug for another.
  const bool max_finite_planted = std::any_of(c.transforms.begin(), c.transforms.end(), [](const Transform& t) {
    return t.name == "special_values" && t.get("kind", 0) == 2;
  });
  edit((c.in_dtype != AFZ_F32 || c.out_dtype != AFZ_F32) && !max_finite_planted, [](Case& n) {
    n.in_dtype = n.out_dtype = AFZ_F32;
  });
  edit(c.scale.has_value(), [](Case& n) { n.scale.reset(); });
  for (size_t t = 0; t < c.transforms.size(); ++t)
    edit(true, [&](Case& n) { n.transforms.erase(n.transforms.begin() + long(t)); });
  return out;
}

// Shorter sequences: each length alone, and query and key lengths of a
// sequence together by the same amount, which keeps the bottom-right
// alignment offset seqlen_k - seqlen_q (causal and window bugs live there).
Candidates shorter_sequences(const Case& c) {
  Candidates out;
  for (int b = 0; b < c.batch; ++b) {
    const int sq = c.seqlens_q[b], sk = c.seqlens_k[b];
    for (int m : shorter(std::min(sq, sk), 0)) {
      const int cut = std::min(sq, sk) - m;
      Case n = c;
      n.seqlens_q[b] = sq - cut;
      n.seqlens_k[b] = sk - cut;
      out.push_back(n);
    }
    for (int m : shorter(sq, 0)) {
      Case n = c;
      n.seqlens_q[b] = m;
      out.push_back(n);
    }
    for (int m : shorter(sk, 0)) {
      Case n = c;
      n.seqlens_k[b] = m;
      out.push_back(n);
    }
  }
  return out;
}

Candidates smaller_head_dims(const Case& c) {
  Candidates out;
  auto with = [&](int d, int dv) {
    if (d < 1 || dv < 1 || (d == c.head_dim && dv == c.head_dim_v)) return;
    Case n = c;
    n.head_dim = d;
    n.head_dim_v = dv;
    out.push_back(n);
  };
  if (c.head_dim != c.head_dim_v) {
    const int d = std::min(c.head_dim, c.head_dim_v);
    with(d, d);
  }
  // Powers of two first: kernels often take only multiples of 8 or 16.
  for (int d : {1, 2, 4, 8, 16, 32, 64, 128}) {
    if (d >= c.head_dim) break;
    with(d, c.head_dim == c.head_dim_v ? d : c.head_dim_v);
  }
  for (int d : shorter(c.head_dim, 1)) with(d, c.head_dim == c.head_dim_v ? d : c.head_dim_v);
  if (c.head_dim != c.head_dim_v)
    for (int dv : shorter(c.head_dim_v, 1)) with(c.head_dim, dv);
  return out;
}

// Value recipes back to the default distribution; transform parameters
// back to their table defaults.
Candidates simpler_values(const Case& c) {
  Candidates out;
  const Distribution plain;
  for (auto member : {&Case::values_q, &Case::values_k, &Case::values_v}) {
    if (c.*member == plain) continue;
    Case n = c;
    n.*member = plain;
    out.push_back(n);
  }
  for (size_t t = 0; t < c.transforms.size(); ++t)
    for (size_t p = 0; p < c.transforms[t].params.size(); ++p) {
      Case n = c;
      auto& params = n.transforms[t].params;
      params.erase(params.begin() + long(p));
      out.push_back(n);
    }
  return out;
}

struct Reducer {
  const char* name;
  Candidates (*candidates)(const Case&);
};

// Order matters for speed only: the cuts that remove the most work first.
constexpr Reducer kReducers[] = {
    {"single sequence", single_sequence}, {"half batch", half_batch},
    {"fewer heads", fewer_heads},         {"drop features", drop_features},
    {"shorter sequences", shorter_sequences}, {"smaller head dims", smaller_head_dims},
    {"simpler values", simpler_values},
};

}  // namespace

MinimizeResult minimize_case(const Case& start, const StillFails& still_fails, const MinimizeOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  MinimizeResult r;
  r.best = start;
  r.from = case_size(start);
  CaseSize best_size = r.from;
  bool progress = true;
  while (progress && !r.exhausted) {
    progress = false;
    for (const Reducer& reducer : kReducers) {
      // Repeat one reducer while it keeps finding smaller failing cases.
      bool found = true;
      while (found && !r.exhausted) {
        found = false;
        for (const Case& cand : reducer.candidates(r.best)) {
          if (r.runs >= options.max_runs || elapsed() >= options.max_seconds) {
            r.exhausted = true;
            break;
          }
          const CaseSize size = case_size(cand);
          if (!(size < best_size) || !case_is_buildable(cand)) continue;
          ++r.runs;
          if (!still_fails(cand)) continue;
          r.best = cand;
          best_size = size;
          ++r.accepted;
          found = progress = true;
          break;
        }
      }
    }
  }
  r.to = best_size;
  r.seconds = elapsed();
  return r;
}

}  // namespace afz
