// The one place the fast backend's attention turns (layer, sequence, positions) into memory:
// positions [lo, hi) of a sequence as runs of rows that lie contiguously in the cache's storage
// (one run per storage block touched), so kernels stream a run with a stride and ask the cache
// for a pointer once per block (a block-table lookup), never once per row.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/host_kv.h"

namespace loom::backend::cpu::fast {

struct KvRows {
  const HostKvView& kv;
  int layer = 0;
  int32_t seq = 0;
  bool values = false;  // value rows, else key rows
  size_t stride = 0;    // bytes from one position's row to the next within a run

  // fn(first_pos, rows, count): row i of the run (position first_pos + i) at rows + i * stride.
  template <typename F>
  void runs(int32_t lo, int32_t hi, F&& fn) const {
    const int32_t block = kv.block_size();
    for (int32_t p = lo; p < hi;) {
      const int32_t end = std::min<int32_t>(hi, (p / block + 1) * block);
      const uint8_t* r = values ? kv.v_row(layer, seq, p) : kv.k_row(layer, seq, p);
      fn(p, r, int64_t(end - p));
      p = end;
    }
  }
};

}  // namespace loom::backend::cpu::fast
