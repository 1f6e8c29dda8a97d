// Buffer slots of a CUDA plan's values (one arena row per step row): each value gets the byte
// offset of its slot in the row; a slot is free again after the step of its value's last reader
// and is re-used by a later value of the same width. Steps are decode_fusion.h's: the outputs of
// a step take their slots before its inputs give theirs back, so a fused kernel never writes
// the buffer it reads, and two values live at once never share one. Plain C++ (tested without
// a GPU).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cuda/decode_fusion.h"
#include "passes/lowering.h"

namespace loom::backend::cuda {

struct ValueSlots {
  std::vector<int64_t> offset;    // per value id: bytes before its slot in an arena row (-1: none)
  int64_t row_bytes = 0;          // one arena row
  std::vector<int> def_step;      // per value id: the step that writes it (-1: a parameter)
  std::vector<int> last_step;     // per value id: the step of its last reader (-1: never read)
  int drop_step = -1;             // the step of the last attention (-1: none)
  std::vector<int> live_at_drop;  // values gathered to the kept rows after drop_step
};

ValueSlots plan_value_slots(const passes::Lowering& l, const DecodeFusion& f);

}  // namespace loom::backend::cuda
