// Prompt lookup's drafts and their sizing (src/runtime/spec/prompt_lookup.h, draft_gain.h,
// match_stats.h): the longest match wins over the most recent one, a draft is cut to the length
// whose expected tokens per unit of step cost is best, and a sequence's drafter stops proposing
// on text it cannot predict (no probes: it scores itself on every step) and starts again, with
// long drafts, when the text turns to quoting. "Cost" here is the step cost model itself
// (verify_step_cost), so the contract — not slower than plain decoding where drafts fail, faster
// where they are quotations — is checked without timing anything.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/spec/draft_gain.h"
#include "runtime/spec/prompt_lookup.h"

namespace spec = loom::runtime::spec;

TEST(PromptLookup, TheLongestMatchWinsOverTheMostRecent) {
  // "5 1 2 3" was followed by 8; "1 2 3" more recently by 9. The context ends "5 1 2 3".
  const std::vector<int32_t> ctx = {5, 1, 2, 3, 8, 4, 1, 2, 3, 9, 6, 5, 1, 2, 3};
  const auto m = spec::longest_match(ctx, 3);
  EXPECT_EQ(m.length, 4);
  EXPECT_EQ(m.continuation, (std::vector<int32_t>{8, 4, 1}));
  // Equally long matches: the most recent. A match of one token is no match (kMinNgram 2).
  EXPECT_EQ(spec::lookup_draft(std::vector<int32_t>{1, 2, 7, 1, 2, 9, 1, 2}, 1), (std::vector<int32_t>{9}));
  EXPECT_TRUE(spec::lookup_draft(std::vector<int32_t>{3, 7, 4, 7}, 4).empty());
  // A context of one repeated token: the match is capped, and the continuation goes on past
  // the context's end as the repetition would (an overlapping copy), as does a short cycle's.
  const std::vector<int32_t> same(500, 42);
  const auto capped = spec::longest_match(same, 8);
  EXPECT_EQ(capped.length, spec::PromptLookup::kMaxMatch);
  EXPECT_EQ(capped.continuation, std::vector<int32_t>(8, 42));
  EXPECT_EQ(spec::lookup_draft(std::vector<int32_t>{9, 1, 2, 3, 1, 2, 3, 1, 2}, 5), (std::vector<int32_t>{3, 1, 2, 3, 1}));
}

TEST(DraftGain, DraftsOnlyWhatPaysForItsRows) {
  for (int32_t r = 1; r < 20; ++r) EXPECT_LT(spec::verify_step_cost(r), spec::verify_step_cost(r + 1));
  const spec::StepCost table;  // nothing timed: the table
  EXPECT_EQ(spec::best_draft_length({}, table), 0);
  EXPECT_EQ(spec::best_draft_length(std::vector<double>(7, 1.0), table), 7);  // certain drafts: all of them
  EXPECT_EQ(spec::best_draft_length(std::vector<double>(7, 0.0), table), 0);
  // One draft accepted with p costs a 2-row step: worth it only if 1 + p > cost(2).
  const double even = spec::verify_step_cost(2) - 1;
  EXPECT_EQ(spec::best_draft_length(std::vector<double>{even * 0.9}, table), 0);
  EXPECT_EQ(spec::best_draft_length(std::vector<double>{even * 1.1}, table), 1);
  int32_t last = 0;
  for (double p = 0; p <= 1.0; p += 0.01) {  // likelier drafts never get shorter
    const int32_t k = spec::best_draft_length(std::vector<double>(7, p), table);
    EXPECT_GE(k, last) << p;
    last = k;
  }
  // Where rows cost what one row costs (a GPU), every draft with a chance is worth verifying.
  spec::StepCost flat;
  for (int32_t r = 1; r <= spec::StepCost::kRows; ++r) flat.record(r, 0.004);
  EXPECT_EQ(spec::best_draft_length(std::vector<double>(7, 0.1), flat), 7);
  EXPECT_EQ(spec::best_draft_length(std::vector<double>(7, 0.1), table), 0);
}

TEST(StepCost, FollowsTheEnginesTimingsAndShrugsOffOutliers) {
  spec::StepCost c;
  EXPECT_DOUBLE_EQ(c.relative(4), spec::verify_step_cost(4));
  c.record(4, 0.006);  // no 1-row timing yet: still the table
  EXPECT_DOUBLE_EQ(c.relative(4), spec::verify_step_cost(4));
  for (int i = 0; i < 50; ++i) c.record(1, 0.004), c.record(4, 0.006);
  EXPECT_NEAR(c.relative(4), 1.5, 1e-6);
  EXPECT_DOUBLE_EQ(c.relative(3), spec::verify_step_cost(3));  // never timed: the table
  c.record(1, 1.0);  // a step the OS interrupted: clamped to 2x, weighted 0.1
  EXPECT_NEAR(c.relative(4), 0.006 / 0.0044, 1e-6);
  EXPECT_GT(c.relative(40), c.relative(16));  // past the tracked rows: the table's slope
}

namespace {

uint32_t next_random(uint32_t& s) { return (s = s * 1664525u + 1013904223u) >> 8; }

// A sequence decoded with lookup drafts as the engine does it greedily: each step verifies the
// draft against the text that follows (`truth`), emits the accepted tokens and one more.
struct Replay {
  std::vector<int32_t> context;
  std::unique_ptr<spec::Drafter> drafter = spec::PromptLookup().make();
  double cost = 0;  // in 1-row steps (verify_step_cost)
  int64_t emitted = 0, drafted = 0, steps = 0;

  void run(const std::vector<int32_t>& truth) {
    for (size_t at = 0; at < truth.size();) {
      const auto d = drafter->draft(context, 7);
      size_t a = 0;
      while (a < d.size() && at + a < truth.size() && d[a] == truth[at + a]) ++a;
      const size_t n = std::min(a + 1, truth.size() - at);
      context.insert(context.end(), truth.begin() + ptrdiff_t(at), truth.begin() + ptrdiff_t(at + n));
      at += n;
      emitted += int64_t(n);
      drafted += int64_t(d.size());
      cost += spec::verify_step_cost(1 + int32_t(d.size()));
      ++steps;
    }
  }
  double speedup() const { return double(emitted) / cost; }  // against a 1-row step per token
};

std::vector<int32_t> random_text(size_t n, int32_t vocab, uint32_t seed) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(next_random(seed) % uint32_t(vocab));
  return t;
}

}  // namespace

TEST(LookupDrafter, StopsProposingOnTextItCannotPredictAndStartsAgainOnQuotes) {
  // A prompt passage, then a reply that does not quote it: over a 40-token vocabulary the
  // context's end often recurs by chance, and what followed is almost never what comes next.
  const std::vector<int32_t> passage = random_text(200, 40, 1);
  Replay r;
  r.context = passage;
  r.run(random_text(100, 40, 2));
  EXPECT_GT(r.speedup(), 0.97) << "the drafts it tries while learning cost little";
  const int64_t drafted_while_learning = r.drafted;
  const double cost_before = r.cost;
  const int64_t emitted_before = r.emitted;
  r.run(random_text(400, 40, 3));
  EXPECT_LE(r.drafted - drafted_while_learning, 4) << "a drafter that has learned its drafts fail stops proposing";
  EXPECT_GE(double(r.emitted - emitted_before) / (r.cost - cost_before), 0.995);
  // Then the reply quotes the passage: drafting resumes within a few tokens, and the quotation
  // is decoded at least 1.5x as fast as plain decoding would, by the step cost model.
  const int64_t steps_before = r.steps, drafted_before = r.drafted;
  const double cost_q = r.cost;
  const int64_t emitted_q = r.emitted;
  r.run(std::vector<int32_t>(passage.begin() + 20, passage.begin() + 180));
  EXPECT_GT(r.drafted, drafted_before);
  EXPECT_GE(double(r.emitted - emitted_q) / (r.cost - cost_q), 1.5);
  EXPECT_LT(r.steps - steps_before, 160 / 3) << "a quotation should take a fraction of a step per token";
}

TEST(LookupDrafter, QuotationsAreDraftedInFullFromTheStart) {
  // A fresh drafter on a reply that copies its prompt: long matches are trusted at once.
  const std::vector<int32_t> passage = random_text(300, 1000, 4);
  Replay r;
  r.context = passage;
  r.context.insert(r.context.end(), passage.begin(), passage.begin() + 2);
  r.run(std::vector<int32_t>(passage.begin() + 2, passage.begin() + 250));
  EXPECT_GE(r.speedup(), 1.6);
  EXPECT_GE(double(r.emitted) / double(r.steps), 4.0);
}
