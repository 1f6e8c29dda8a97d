// The child side of a ProcessArm (tune/process_arm.h): `loom tune-arm` opens the same EngineArm
// the in-process session uses (open_engine_arm) and answers requests on a pipe, so a binary
// built from a candidate's source is measured through the very code an in-process arm runs.
//
// Protocol (JSON lines; the parent writes requests, the child answers each with one line):
//   hello, sent first      {"ok": true, "vocab": V, "threads": T}     (or {"ok": false, "error"})
//   {"op": "logits", "tokens": [...]}
//       -> {"ok": true, "bytes": N, "tokens_after": [...]?} then N raw float32 bytes
//          (the output buffer is poisoned before the arm writes it, as observe() does; the
//          input as the arm left it is sent back when the arm changed it)
//   {"op": "timed_run", "prompt": [...], "generate": G, "warm": bool}
//       -> {"ok": true, "prefill_seconds", "decode_seconds", "untimed_seconds",
//           "prompt_tokens", "generated_tokens"}
//   anything failing   -> {"ok": false, "error": "..."}; end of input: the child exits 0.
#pragma once
#include "tune/arm.h"

namespace loom::tune {

// Serves `spec`'s engine arm on the file descriptors until `in_fd` reaches its end. Returns the
// process's exit status (0; 1 when the arm could not be opened, after saying why in hello).
int serve_arm(const ArmSpec& spec, int in_fd, int out_fd);

}  // namespace loom::tune
