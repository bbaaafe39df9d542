// Tests of worker/rank: which source of a worker's rank wins, and the
// errors for sources that hold no rank.
#include "worker/rank.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/unit/status_matchers.h"

namespace shardmap {
namespace {

RankSources Sources(std::map<std::string, std::string> env,
                    std::string hostname = "box") {
  RankSources s;
  s.hostname = std::move(hostname);
  s.getenv = [env](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return s;
}

TEST(RankTest, NoSourceMeansNoRank) {
  auto r = ResolveRank(Sources({}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
  // An empty variable is not a rank either.
  r = ResolveRank(Sources({{"SHARDMAP_RANK", ""}}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(RankTest, FlagThenHostnameThenEnvironmentInOrder) {
  RankSources s = Sources({{"SHARDMAP_RANK", "5"},
                           {"JOB_COMPLETION_INDEX", "6"},
                           {"LWS_WORKER_INDEX", "7"}},
                          "shardmap-worker-3");
  s.flag = 2;
  s.from_hostname = true;
  EXPECT_EQ(*ResolveRank(s), 2);
  s.flag.reset();
  EXPECT_EQ(*ResolveRank(s), 3);
  s.from_hostname = false;
  EXPECT_EQ(*ResolveRank(s), 5);
  EXPECT_EQ(*ResolveRank(Sources(
                {{"JOB_COMPLETION_INDEX", "6"}, {"LWS_WORKER_INDEX", "7"}})),
            6);
  EXPECT_EQ(*ResolveRank(Sources({{"LWS_WORKER_INDEX", "7"}})), 7);
}

TEST(RankTest, BadSourcesAreNamed) {
  RankSources s = Sources({});
  s.flag = -1;
  EXPECT_TRUE(StatusIs(ResolveRank(s).status(),
                       absl::StatusCode::kInvalidArgument, {"--rank", "-1"}));
  EXPECT_TRUE(StatusIs(
      ResolveRank(Sources({{"JOB_COMPLETION_INDEX", "x1"}})).status(),
      absl::StatusCode::kInvalidArgument, {"JOB_COMPLETION_INDEX", "'x1'"}));
  EXPECT_TRUE(StatusIs(ResolveRank(Sources({{"SHARDMAP_RANK", "-2"}})).status(),
                       absl::StatusCode::kInvalidArgument, {"SHARDMAP_RANK"}));
  for (const char* host : {"worker", "worker-", "worker-a"}) {
    RankSources h = Sources({}, host);
    h.from_hostname = true;
    EXPECT_TRUE(StatusIs(ResolveRank(h).status(),
                         absl::StatusCode::kInvalidArgument,
                         {"--rank-from-hostname", host}))
        << host;
  }
}

}  // namespace
}  // namespace shardmap
