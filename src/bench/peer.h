// A benchmark peer: another engine measuring the same file, one repetition at a time, so
// `loom bench --vs` can interleave A and B (ABAB…) in one process run.
//
// Two adapters: llama.cpp through llama-cpp-python (scripts/peers/llama_cpp_peer.py, a child
// process speaking JSON lines), and a llama-bench binary given by path (one `-r 1` run per
// repetition, its JSON timing read back; batched decode through the llama-batched-bench beside
// it). scripts/build-llama-tools builds both natively from the pinned llama.cpp sources.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace bench {

struct PeerTiming {
  double seconds = 0;                 // the timed part only (no model load)
  std::vector<double> token_seconds;  // tg only, when the peer reports them
};

// llama-batched-bench's two phases: n_seq prompts of pp tokens in one batch, then tg steps of
// one token per sequence.
struct BatchedTiming {
  double pp_seconds = 0, tg_seconds = 0;
};

class Peer {
 public:
  virtual ~Peer() = default;
  virtual std::string name() const = 0;
  virtual std::string describe() const = 0;  // version / build facts for the report
  virtual PeerTiming pp(int n, int depth) = 0;
  virtual PeerTiming tg(int n, int depth) = 0;
  virtual BatchedTiming batched(int n_seq, int pp, int tg) = 0;
};

struct PeerOptions {
  std::string model;
  int threads = 2;
  int n_ctx = 4096;
  int n_batch = 2048;
  int n_ubatch = 512;
};

// "llama.cpp" (llama-cpp-python) or a path to a llama-bench binary. Throws loom::Error when
// the peer cannot start or load the model.
std::unique_ptr<Peer> make_peer(const std::string& spec, const PeerOptions& opts);

}  // namespace bench
