// Drafting with a second, smaller program of the same vocabulary, run greedily on its own
// engine: a draft model file (any .gguf or .loom whose tokens and special ids are the
// target's, checked), or a draft program derived from the target (port/draft_program.h: its
// first K layers exiting through the final norm and the shared output head, on the target's
// own weights). Each sequence gets a DirectSequence on the draft engine, kept in step with the
// target's committed tokens: at every draft the part of its cache past the common prefix with
// the context (rejected drafts) is rolled back and the new tokens fed.
#pragma once
#include <memory>
#include <optional>

#include "runtime/model_bundle.h"
#include "runtime/spec/drafter.h"

namespace loom::runtime::spec {

class DraftModel final : public DraftSource, public std::enable_shared_from_this<DraftModel> {
 public:
  // `path`: a .gguf or .loom of the same vocabulary as `target` (else loom::Error naming what
  // differs). `opts`: the target's run options (backend, threads, context, sequences).
  static std::shared_ptr<DraftModel> open(const std::string& path, const ModelBundle& target, const RunOptions& opts);
  // The target's first `layers` layers (port::draft_program), on the target's weights.
  static std::shared_ptr<DraftModel> derive(const ModelBundle& target, int64_t layers, const RunOptions& opts) {
    return derive(target.model().module, *target.model().file, layers, opts);
  }
  // The same for a program and its weights (the file must outlive the source).
  static std::shared_ptr<DraftModel> derive(const ir::Module& target, const gguf::File& weights, int64_t layers,
                                            const RunOptions& opts);

  std::unique_ptr<Drafter> make() const override;
  std::string name() const override { return name_; }
  Engine& engine() const { return *engine_; }

 private:
  std::string name_;
  std::optional<ModelBundle> bundle_;  // a draft file's program and weights
  ir::Module module_;                  // a derived program (compiled against the target's file)
  std::unique_ptr<Engine> engine_;
};

// Throws loom::Error when the two vocabularies differ in size, in any token's text, or in
// their special ids (bos, eos, eot, end-of-generation set): drafts would mean other tokens.
void check_same_vocab(const text::Vocab& target, const text::Vocab& draft, const std::string& draft_name);

}  // namespace loom::runtime::spec
