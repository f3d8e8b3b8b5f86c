// Rounding logical values to the input dtype and writing them where a view
// puts them, in one pass; padding rows and row gaps get poison in the same
// pass, so no byte is written twice.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "harness/case/tensor_views.h"
#include "kernels/abi/attnfuzz_kernel.h"

namespace afz {

// A logical [b][h][s][x] tensor of doubles, not yet rounded to the dtype.
struct LogicalSource {
  const double* values;
  int heads, seq, row;  // its extents (b is the slot's batch index)
};

// Where the source goes: a buffer holding batch_slots x head_slots slots of
// `extent` rows each (one slot where K and V are broadcast: the logical
// copies are equal, so slot (0, h) or (b, 0) stands for all of them), each
// row `source.row` values then `gap` poisoned elements.
struct ScatterTarget {
  uint8_t* base;
  View view;
  afz_dtype dtype;
  int batch_slots, head_slots, extent, gap;
  // Rows of batch slot b that hold values (the rest are padding: poison).
  std::vector<int> valid_rows;
};

// target's rows [0, extent) of every slot: round_bits of each value, or
// `poison` past valid_rows; the row gaps poisoned.  Huge tensors are split
// over threads by rows (each row's bits depend on its values alone).
void scatter_rounded(const LogicalSource& source, const ScatterTarget& target, uint32_t poison);

// Every element of bytes [begin, end) of `data` set to the dtype's `bits`.
void fill_elements(uint8_t* data, size_t begin, size_t end, afz_dtype dtype, uint32_t bits);

}  // namespace afz
