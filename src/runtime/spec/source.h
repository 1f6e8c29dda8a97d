// A drafter chosen by name, as flags and request fields spell it:
//   lookup      prompt lookup (prompt_lookup.h)
//   draft:PATH  a draft model file of the target's vocabulary (draft_model.h)
//   layers:K    the target's first K layers, derived in memory (port/draft_program.h)
//   none / ""   no speculation (null)
#pragma once
#include <memory>
#include <string>

#include "runtime/model_bundle.h"
#include "runtime/spec/drafter.h"

namespace loom::runtime::spec {

// Throws loom::Error for an unknown name, a bad K, or a draft model that cannot be used.
std::shared_ptr<const DraftSource> open_draft_source(const std::string& name, const ModelBundle& target,
                                                     const RunOptions& opts);

}  // namespace loom::runtime::spec
