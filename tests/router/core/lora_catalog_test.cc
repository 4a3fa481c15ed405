// Which worker holds which LoRA adapter (LoraCatalog), and how many adapters a step may hold
// (AdapterSlots).
#include "router/core/lora_catalog.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/core/adapter_slots.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

AdapterInfo Adapter(const std::string& name, const std::string& digest = "d1") {
  return {.name = name, .rank = 8, .digest = digest};
}

TEST(LoraCatalogTest, WorkersHoldWhatTheyAnnouncedThenLoadedAndNothingOnceGone) {
  LoraCatalog c;
  c.Configure({"configured"});
  EXPECT_TRUE(c.Known("configured")) << "listed before any worker holds it";
  EXPECT_EQ(c.NumHolding("configured"), 0);
  ASSERT_TRUE(c.AddWorker(0, {Adapter("sql")}).ok());
  ASSERT_TRUE(c.AddWorker(1, {}).ok());
  EXPECT_TRUE(c.Holds(0, "sql"));
  EXPECT_FALSE(c.Holds(1, "sql"));
  EXPECT_TRUE(c.Holds(1, "")) << "every worker holds the base model";
  EXPECT_FALSE(c.Known("")) << "the base model is no adapter";
  ASSERT_TRUE(c.Loaded(1, Adapter("sql")).ok());
  EXPECT_EQ(c.NumHolding("sql"), 2);
  c.Unloaded(0, "sql");
  EXPECT_FALSE(c.Holds(0, "sql"));
  c.RemoveWorker(1);
  EXPECT_FALSE(c.Known("sql")) << "held by no worker any more, and never configured";
  EXPECT_THAT(c.Names(), ElementsAre("configured"));
  c.Forget("configured");
  EXPECT_TRUE(c.Names().empty());
}

TEST(LoraCatalogTest, OneNameIsOneSetOfWeights) {
  LoraCatalog c;
  ASSERT_TRUE(c.AddWorker(0, {Adapter("sql", "aaaa")}).ok());
  const absl::Status joined = c.AddWorker(1, {Adapter("chat"), Adapter("sql", "bbbb")});
  EXPECT_EQ(joined.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(joined.message(), HasSubstr("`sql`"));
  EXPECT_FALSE(c.Known("chat")) << "a refused worker leaves nothing behind";
  EXPECT_EQ(c.Loaded(2, Adapter("sql", "cccc")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(c.Loaded(2, Adapter("sql", "aaaa")).ok());
  // Once no worker holds the old weights, the name may take new ones.
  c.RemoveWorker(0);
  c.RemoveWorker(2);
  EXPECT_TRUE(c.AddWorker(3, {Adapter("sql", "bbbb")}).ok());
}

TEST(AdapterSlotsTest, AWaitingSequenceIsAdmittedOnlyWhileTheStepsAdaptersFit) {
  auto seq = [](const std::string& adapter) {
    auto s = std::make_unique<Sequence>();
    s->adapter = adapter;
    return s;
  };
  std::vector<std::unique_ptr<Sequence>> owned;
  for (const char* a : {"a", "a", "", "b"}) owned.push_back(seq(a));
  std::vector<Sequence*> running;
  for (auto& s : owned) running.push_back(s.get());
  AdapterSlots slots(/*max_loras=*/3, running);
  const auto c = seq("c"), d = seq("d"), a = seq("a"), base = seq("");
  EXPECT_TRUE(slots.Admits(*a)) << "its adapter already runs";
  EXPECT_TRUE(slots.Admits(*base)) << "the base model takes no slot";
  EXPECT_TRUE(slots.Admits(*c));
  slots.Admit(*c);
  EXPECT_FALSE(slots.Admits(*d)) << "a, b and c fill the three slots";
  EXPECT_TRUE(slots.Admits(*c));
  EXPECT_TRUE(slots.Admits(*base));
}

}  // namespace
}  // namespace pagoda
