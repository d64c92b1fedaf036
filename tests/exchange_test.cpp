// The exchange between ranks and what is built on it, on 1-4 ranks of one
// host: sums over both transports (the same bits on every rank and from
// either transport), the small collectives, and sampling from logits split
// by vocabulary rows against sampling from all of them on one rank.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/sampler.h"
#include "runtime/exchange.h"
#include "tests/mpi_test_env.h"
#include "topology/model_shape.h"

namespace tps {
namespace {

using testing::mpi;

// Values every rank can compute for any rank: partial r, element i.
float part(int r, size_t i) { return std::sin(0.37f * static_cast<float>(i) + r) * (r + 1) * 1e3f; }

TEST(Exchange, SumsInRankOrderOverBothTransports) {
  const int R = mpi().size();
  // Longer than the shared slot (1000 floats), so sums go in pieces too.
  const size_t n = 2880 * 3 + 5;
  std::vector<float> want(n);
  for (size_t i = 0; i < n; ++i) {
    float s = part(0, i);
    for (int r = 1; r < R; ++r) s += part(r, i);
    want[i] = s;
  }
  for (const char* how : {"shm", "mpi", "auto"}) {
    SCOPED_TRACE(how);
    Exchange ex(mpi(), how, 1000);
    EXPECT_EQ(ex.transport(), R == 1 ? Transport::solo
                              : std::string(how) == "mpi" ? Transport::mpi
                                                          : Transport::shm);
    for (int round = 0; round < 3; ++round) {  // the slots alternate
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = part(mpi().rank(), i);
      ex.sum(x.data(), n);
      EXPECT_EQ(x, want) << "round " << round;
    }
    EXPECT_EQ(ex.stats().calls, R == 1 ? 0u : 3u);
  }
}

TEST(Exchange, GatherBroadcastSendReceive) {
  Exchange ex(mpi(), "auto", 16);
  const int R = ex.size(), me = ex.rank();
  std::vector<int> all(R);
  ex.all_gather(&me, all.data(), sizeof me);
  for (int r = 0; r < R; ++r) EXPECT_EQ(all[r], r);
  double v = me == R - 1 ? 2.5 : 0;
  ex.broadcast(&v, sizeof v, R - 1);
  EXPECT_EQ(v, 2.5);
  if (R > 1) {  // a ring: each rank passes its number on
    int got = -1;
    if (me == 0) {
      ex.send(&me, sizeof me, 1);
      ex.recv(&got, sizeof got, R - 1);
    } else {
      ex.recv(&got, sizeof got, me - 1);
      ex.send(&me, sizeof me, (me + 1) % R);
    }
    EXPECT_EQ(got, (me + R - 1) % R);
  }
  ex.barrier();
}

// Logits every rank can make whole: flat, peaked, tied.
std::vector<float> logits(size_t vocab, int kind) {
  std::vector<float> v(vocab);
  uint64_t z = 12345;
  for (size_t i = 0; i < vocab; ++i) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    const float u = static_cast<float>(z >> 40) / static_cast<float>(1 << 24);
    v[i] = kind == 0 ? u * 2 : kind == 1 ? u * 12 : std::floor(u * 4);  // 2: many ties
  }
  return v;
}

TEST(SplitSampler, SameTokensAsOneRankFromTheSameLogits) {
  Exchange ex(mpi(), "auto", 16);
  for (size_t vocab : {size_t{1000}, size_t{201088}}) {
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<float> all = logits(vocab, kind);
      const Range mine = even_share(static_cast<int64_t>(vocab), kVocabGranule, ex.rank(), ex.size());
      SplitLogits split{std::span<const float>(all.data() + mine.begin, mine.size()), mine.begin,
                        static_cast<int64_t>(vocab), ex};
      for (SamplerParams p : {SamplerParams{0.0f, 0, 1.0f, 0.0f, 1}, SamplerParams{1.0f, 0, 1.0f, 0.0f, 2},
                              SamplerParams{0.8f, 40, 1.0f, 0.0f, 3}, SamplerParams{1.0f, 0, 0.9f, 0.0f, 4},
                              SamplerParams{1.0f, 0, 0.3f, 0.0f, 5}, SamplerParams{1.0f, 0, 1.0f, 0.2f, 6},
                              SamplerParams{0.5f, 300, 0.95f, 0.05f, 7}}) {
        SCOPED_TRACE(::testing::Message() << "vocab " << vocab << " kind " << kind << " temp "
                                        << p.temperature << " top-k " << p.top_k << " top-p "
                                        << p.top_p << " min-p " << p.min_p);
        Sampler together(p), alone(p);
        const int draws = vocab > 10000 ? 3 : 20;  // the large vocabulary sorts slowly
        for (int draw = 0; draw < draws; ++draw) ASSERT_EQ(together.sample(split), alone.sample(all));
      }
      EXPECT_EQ(argmax(split), argmax(all));
      std::vector<TokenLogprob> a = top_logprobs(split, 7), b = top_logprobs(all, 7);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].id, b[i].id);
        EXPECT_EQ(a[i].logprob, b[i].logprob);
      }
      EXPECT_EQ(logprob_of(split, 777), logprob_of(all, 777));
    }
  }
}

}  // namespace
}  // namespace tps
