#include "tune/arm_server.h"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "tune/gates.h"

namespace loom::tune {

using nlohmann::json;

namespace {

void write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) loom::fail("tune-arm: the parent closed the pipe");
    p += w;
    n -= size_t(w);
  }
}

void reply(int fd, const json& j) {
  const std::string line = j.dump() + "\n";
  write_all(fd, line.data(), line.size());
}

// Reads one line (without its newline) from `fd`; false at the end of input.
bool read_line(int fd, std::string& buf, std::string& line) {
  for (;;) {
    if (const auto nl = buf.find('\n'); nl != std::string::npos) {
      line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      return true;
    }
    char chunk[65536];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(chunk, size_t(n));
  }
}

}  // namespace

int serve_arm(const ArmSpec& spec, int in_fd, int out_fd) {
  std::unique_ptr<Arm> arm;
  try {
    arm = open_engine_arm(spec);
  } catch (const std::exception& e) {
    reply(out_fd, {{"ok", false}, {"error", e.what()}});
    return 1;
  }
  reply(out_fd, {{"ok", true}, {"vocab", arm->vocab()}, {"threads", arm->threads()}});
  std::string buf, line;
  while (read_line(in_fd, buf, line)) {
    try {
      const json req = json::parse(line);
      const std::string op = req.at("op");
      if (op == "logits") {
        std::vector<int32_t> given = req.at("tokens").get<std::vector<int32_t>>();
        const std::vector<int32_t> sent = given;
        // Poisoned as observe() poisons the caller's buffer: what the arm leaves unwritten
        // reaches the parent as the same NaN.
        std::vector<float> out(given.size() * size_t(arm->vocab()), std::bit_cast<float>(kUnwrittenPoison));
        arm->logits(given, out);
        json head = {{"ok", true}, {"bytes", out.size() * sizeof(float)}};
        if (given != sent) head["tokens_after"] = given;
        reply(out_fd, head);
        write_all(out_fd, out.data(), out.size() * sizeof(float));
      } else if (op == "timed_run") {
        const auto prompt = req.at("prompt").get<std::vector<int32_t>>();
        const Timed t = arm->timed_run(prompt, req.at("generate").get<int>(), req.at("warm").get<bool>());
        reply(out_fd, {{"ok", true},
                       {"prefill_seconds", t.prefill_seconds},
                       {"decode_seconds", t.decode_seconds},
                       {"untimed_seconds", t.untimed_seconds},
                       {"prompt_tokens", t.prompt_tokens},
                       {"generated_tokens", t.generated_tokens}});
      } else {
        loom::fail("unknown op '{}'", op);
      }
    } catch (const std::exception& e) {
      reply(out_fd, {{"ok", false}, {"error", e.what()}});
    }
  }
  return 0;
}

}  // namespace loom::tune
