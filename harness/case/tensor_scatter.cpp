#include "harness/case/tensor_scatter.h"

#include <algorithm>
#include <cstring>

#include "harness/case/parallel_chunks.h"
#include "kernels/abi/dtype.h"

namespace afz {
namespace {

// Element-sized stores through memcpy: the buffers are bytes, and a typed
// pointer into them would break strict aliasing; memcpy of a constant size
// compiles to one store.
template <typename Word>
void put(uint8_t* at, Word w) {
  std::memcpy(at, &w, sizeof(Word));
}

template <typename Word>
void scatter_words(const LogicalSource& src, const ScatterTarget& t, uint32_t poison) {
  const FloatFormat& f = format_of(t.dtype);
  const Word poison_word = Word(poison);
  const int64_t rows = int64_t(t.batch_slots) * t.head_slots * t.extent;
  const int64_t row_elements = int64_t(src.row) + t.gap;
  for_each_chunk(rows, row_elements, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t s = r % t.extent, slot = r / t.extent;
      const int64_t h = slot % t.head_slots, b = slot / t.head_slots;
      uint8_t* out = t.base + t.view.at(b, h, s, 0) * int64_t(sizeof(Word));
      if (s < t.valid_rows[size_t(b)]) {
        const double* in = src.values + ((b * src.heads + h) * src.seq + s) * src.row;
        for (int x = 0; x < src.row; ++x) put(out + x * sizeof(Word), Word(round_bits(f, in[x])));
      } else {
        for (int x = 0; x < src.row; ++x) put(out + x * sizeof(Word), poison_word);
      }
      for (int64_t x = src.row; x < row_elements; ++x) put(out + x * int64_t(sizeof(Word)), poison_word);
    }
  });
}

template <typename Word>
void fill_words(uint8_t* data, size_t begin, size_t end, uint32_t bits) {
  const Word w = Word(bits);
  const int64_t words = int64_t(end > begin ? (end - begin) / sizeof(Word) : 0);
  for_each_chunk(words, 1, [&](int64_t first, int64_t last) {
    for (int64_t n = first; n < last; ++n) put(data + begin + size_t(n) * sizeof(Word), w);
  });
}

}  // namespace

void scatter_rounded(const LogicalSource& source, const ScatterTarget& target, uint32_t poison) {
  switch (size_of(target.dtype)) {
    case 4: scatter_words<uint32_t>(source, target, poison); break;
    case 2: scatter_words<uint16_t>(source, target, poison); break;
    default: scatter_words<uint8_t>(source, target, poison);
  }
}

void fill_elements(uint8_t* data, size_t begin, size_t end, afz_dtype dtype, uint32_t bits) {
  switch (size_of(dtype)) {
    case 4: fill_words<uint32_t>(data, begin, end, bits); break;
    case 2: fill_words<uint16_t>(data, begin, end, bits); break;
    default: fill_words<uint8_t>(data, begin, end, bits);
  }
}

}  // namespace afz
