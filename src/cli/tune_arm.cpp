// `loom tune-arm` (hidden): the child side of a tune session's out-of-process arm. A session
// whose workload builds loom from source runs the built binary with this verb; it keeps the
// program's model loaded and answers the session's requests on stdin/stdout (tune/arm_server.h).
#include <unistd.h>

#include <memory>

#include "cli/verb.h"
#include "common/error.h"
#include "tune/arm_server.h"

namespace loom::cli {

namespace {

const RegisterVerb reg_tune_arm("tune-arm", [](CLI::App& root) {
  auto spec = std::make_shared<tune::ArmSpec>();
  auto* cmd = root.add_subcommand("tune-arm", "A tune session's out-of-process arm (JSON lines on stdin/stdout)");
  cmd->group("");  // hidden: only `loom tune` starts it
  cmd->add_option("--program", spec->program, "the .loom program")->required();
  cmd->add_option("--gguf", spec->gguf, "its weights")->required();
  cmd->add_option("--backend", spec->backend, "backend name");
  cmd->add_option("--threads", spec->threads, "threads");
  cmd->add_option("--n-ctx", spec->n_ctx, "context length");
  cmd->callback([spec] {
    // The protocol owns the real stdout; anything else printed goes to stderr (the session's log).
    const int protocol = dup(STDOUT_FILENO);
    if (protocol < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) loom::fail("tune-arm: cannot set up its output");
    const int rc = tune::serve_arm(*spec, STDIN_FILENO, protocol);
    close(protocol);
    if (rc != 0) loom::fail("tune-arm: the arm could not be opened (its error went to the session)");
  });
});

}  // namespace
}  // namespace loom::cli
