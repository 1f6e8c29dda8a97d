// The agent producer: an external command edits the worktree; its diff is the candidate.
// Nothing it prints is trusted (its output goes to the session log only).
#include "common/error.h"
#include "tune/candidate.h"
#include "tune/digest.h"
#include "tune/git.h"

namespace loom::tune {

namespace {

class AgentProducer final : public CandidateProducer {
 public:
  AgentProducer(std::string command, std::string log) : command_(std::move(command)), log_(std::move(log)) {}
  std::string name() const override { return "agent"; }

  std::vector<Candidate> propose(const Contract& c, const std::string&) override {
    if (done_) return {};
    done_ = true;
    Candidate cand;
    cand.producer = "agent";
    cand.description = "agent: " + command_;
    cand.point = {{"command", command_}};
    cand.apply = [cmd = command_, log = log_, program = c.program](const std::string& wt) {
      const std::string brief = log + ".brief.txt";  // outside the worktree: not part of the diff
      write_text(brief, "Make " + program +
                            " faster without changing what it computes. Only the diff you leave in this directory"
                            " counts; it is rebuilt, checked against the baseline's outputs and quality, and timed"
                            " paired against the current program.\n");
      const int rc = run_shell("LOOM_TUNE_BRIEF='" + brief + "' " + cmd, wt, log);
      std::remove(brief.c_str());
      if (rc != 0) loom::fail("agent command exited with status {} (its output: {})", rc, log);
    };
    return {std::move(cand)};
  }

 private:
  std::string command_, log_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<CandidateProducer> make_agent(std::string command, std::string log_path) {
  return std::make_unique<AgentProducer>(std::move(command), std::move(log_path));
}

}  // namespace loom::tune
