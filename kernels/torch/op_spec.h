// The .ops file: any torch operator as an attnfuzz kernel, declared in plain
// text and handed to the plugin with
//     attnfuzz --kernel-lib libattnfuzz_torch.so#ops=my.ops ...
// Format and examples: kernels/torch/README.md.  This file only parses (no
// torch): every structural mistake is one line, "file:line: message"; the
// checks against the operator's schema happen when the kernels are built
// (op_kernels.h), with the same file:line form.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attnfuzz_kernel.h"

namespace afz::torchk {

// How q, k, v (and O) are handed to the operator.
enum class TensorLayout {
  BHSD,    // [B][H][S][D] views (a ragged batch: one call per sequence)
  BSHD,    // [B][S][H][D] views (the same, transposed)
  Packed,  // [total][H][D] tokens of all sequences, with cumulative lengths
};

// Where the LSE comes back.
enum class LseLayout {
  BHS,  // [B][H][S] (fixed layouts; S may be padded; a trailing [1] is fine),
        // or [B][H][max_q] per sequence for the packed layout
  BSH,  // [B][S][H] (fixed layouts)
  HS,   // [H][total] (packed layout)
  SH,   // [total][H] (packed layout)
};

// What an operator argument receives.
enum class Source {
  Q, K, V,                     // tensors in the declared layout
  Scale, Softcap,              // float
  IsCausal,                    // bool: the problem's band is causal (-1, 0)
  WindowLeft, WindowRight,     // int, -1 for an unbounded side (FlashAttention's convention)
  Bias,                        // additive mask [B][H][Sq][Sk] in the input dtype (+ -inf where the boolean mask is 0)
  BiasF32,                     // the same in fp32
  Mask,                        // boolean mask [B][H][Sq][Sk], true = the key takes part
  CuSeqlensQ, CuSeqlensK,      // int32 [B + 1] (packed layout)
  MaxSeqlenQ, MaxSeqlenK,      // int (packed layout)
  EnableGqa,                   // bool: heads_q != heads_kv
  Const,                       // a literal: none, true, false, an integer or a float
};

struct ArgSpec {
  std::string name;   // the schema's argument name
  Source source = Source::Const;
  std::string literal;  // for Source::Const
  int line = 0;
};

struct ReturnSpec {
  int index = -1;     // position in the operator's returns; -1: not declared
  LseLayout lse_layout = LseLayout::BHS;
  int line = 0;
};

struct OpSpec {
  std::string file;
  int line = 0;          // of `kernel`
  std::string name;      // the kernel's name in attnfuzz
  std::string op;        // schema name, "ns::name" or "ns::name.overload"
  int op_line = 0;
  std::string description;
  bool cuda = false;     // device cuda: AFZ_CAP_GPU, device pointers
  uint32_t in_dtypes = 0;
  uint32_t out_dtypes = 0;
  bool out_same = true;  // O comes back in the input dtype
  int32_t min_head_dim = 1, max_head_dim = 0, head_dim_multiple = 1, max_seqlen = 0;
  uint32_t flags = 0;    // AFZ_CAP_* (GPU comes from `device`)
  afz_precision precision{};
  afz_conventions conventions{AFZ_MASKED_ROW_ZERO, AFZ_EMPTY_LSE_NEG_INF};
  TensorLayout layout = TensorLayout::BHSD;
  bool contiguous = false;  // hand over contiguous copies rather than strided views
  std::vector<ArgSpec> args;
  ReturnSpec out, lse;
};

struct OpsFile {
  std::string file;                    // as named in messages
  std::vector<std::string> libraries;  // resolved paths, in file order
  std::vector<int> library_lines;
  std::vector<OpSpec> kernels;
};

// Parses `text` (named `file` in messages; relative library paths resolve
// against `base_dir`).  false with "file:line: message" on the first error.
bool parse_ops(const std::string& text, const std::string& file, const std::string& base_dir, OpsFile* out,
               std::string* error);
// Reads and parses a file.
bool read_ops_file(const std::string& path, OpsFile* out, std::string* error);

}  // namespace afz::torchk
