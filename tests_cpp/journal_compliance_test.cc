// Compliance suite of the Journal port, run against every backend of
// testing::AllBackends (cross-object, cross-process and durability cases on
// DurableBackends).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <barrier>
#include <limits>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "backend_fixture.h"
#include "pynenc_cpp/ports/generation_source.h"
#include "pynenc_cpp/ports/journal.h"

namespace pynenc_cpp {

// gtest printers (found by ADL, so outside the anonymous namespace).
static void PrintTo(const JournalEntry& e, std::ostream* os) {
  *os << "{seq " << e.seq << ", gen " << Generation::FromPacked(e.generation).ToString() << ", "
      << ::testing::PrintToString(e.payload) << "}";
}
static void PrintTo(const JournalSnapshot& s, std::ostream* os) {
  *os << "{seq " << s.seq << ", gen " << Generation::FromPacked(s.generation).ToString() << ", "
      << ::testing::PrintToString(s.state) << "}";
}

namespace {

using Entries = std::vector<JournalEntry>;

template <typename B>
constexpr bool kIsMem = std::is_same_v<B, testing::MemBackend>;

std::uint64_t G(std::uint32_t term, std::uint32_t seq) { return Generation{term, seq}.Packed(); }
JournalEntry E(std::uint64_t seq, std::uint64_t gen, const std::string& payload) {
  return JournalEntry{seq, gen, payload};
}
std::optional<JournalSnapshot> Snap(std::uint64_t seq, std::uint64_t gen, const std::string& s) {
  return JournalSnapshot{seq, gen, s};
}
// The error code of a call (kOk on success).
ErrorCode Code(const Status& s) { return s.code(); }
template <typename T>
ErrorCode Code(const Result<T>& r) {
  return r.status().code();
}
// The value of a call that must succeed; `fallback` (and a failure) otherwise.
template <typename T>
T Ok(Result<T> r, T fallback = T{}) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : fallback;
}

template <typename B>
class JournalCompliance : public testing::BackendTest<B> {
 protected:
  std::unique_ptr<Journal> Open(const std::string& app_id = "journal-app") {
    auto opened = OpenJournal(this->backend_.Config(nullptr, app_id));
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }
  void SetUp() override {
    j_ = Open();
    ASSERT_NE(j_, nullptr);
  }
  std::uint64_t Append(const std::string& entity, std::uint64_t expected, std::uint64_t gen,
                       const std::vector<std::string>& events) {
    return Ok(j_->Append(entity, expected, gen, events));
  }
  Entries Read(const std::string& entity, std::uint64_t after = 0, std::size_t limit = 0) {
    return Ok(j_->Read(entity, after, limit));
  }
  std::uint64_t Last(const std::string& entity) { return Ok(j_->LastSeq(entity), UINT64_MAX); }
  std::uint64_t FenceOf(const std::string& entity) { return Ok(j_->FenceOf(entity), UINT64_MAX); }
  std::optional<JournalSnapshot> Load(const std::string& e) { return Ok(j_->LoadSnapshot(e)); }
  std::unique_ptr<Journal> j_;
};
TYPED_TEST_SUITE(JournalCompliance, testing::AllBackends, testing::BackendNames);

template <typename B>
class JournalDurable : public JournalCompliance<B> {};
TYPED_TEST_SUITE(JournalDurable, testing::DurableBackends, testing::BackendNames);

TYPED_TEST(JournalCompliance, AppendAtZeroThenChainedAtomically) {
  EXPECT_EQ(this->Last("e"), 0u);
  EXPECT_EQ(this->Append("e", 0, G(1, 0), {"a"}), 1u);
  EXPECT_EQ(this->Append("e", 1, G(1, 0), {"b", "c"}), 3u);
  EXPECT_EQ(this->Append("e", 3, G(1, 0), {"d"}), 4u);
  EXPECT_EQ(this->Last("e"), 4u);
  EXPECT_EQ(this->Read("e"), (Entries{E(1, G(1, 0), "a"), E(2, G(1, 0), "b"), E(3, G(1, 0), "c"),
                                      E(4, G(1, 0), "d")}));
  std::vector<std::string> big;  // a large batch lands whole
  for (int i = 0; i < 2500; ++i) big.push_back(std::to_string(i));
  ASSERT_EQ(this->Append("e", 4, G(2, 0), big), 2504u);
  const Entries after = this->Read("e", 4);
  ASSERT_EQ(after.size(), big.size());
  EXPECT_EQ(after.front(), E(5, G(2, 0), "0"));
  EXPECT_EQ(after.back(), E(2504, G(2, 0), "2499"));
}

TYPED_TEST(JournalCompliance, WrongExpectedSeqIsAConflictAndWritesNothing) {
  auto empty = this->j_->Append("e", 1, G(1, 0), {"x"});
  EXPECT_EQ(Code(empty), ErrorCode::kConflict);
  EXPECT_EQ(empty.status().message(), "entity 'e' is at sequence 0, not 1");
  ASSERT_EQ(this->Append("e", 0, G(1, 0), {"a", "b"}), 2u);
  for (std::uint64_t wrong : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{3}, UINT64_MAX}) {
    auto r = this->j_->Append("e", wrong, G(1, 0), {"x", "y"});
    EXPECT_EQ(Code(r), ErrorCode::kConflict) << wrong;
    EXPECT_EQ(r.status().message(), "entity 'e' is at sequence 2, not " + std::to_string(wrong));
  }
  // A refused append with a higher generation does not raise the fence either.
  EXPECT_EQ(Code(this->j_->Append("e", 1, G(7, 0), {"x"})), ErrorCode::kConflict);
  EXPECT_EQ(this->FenceOf("e"), G(1, 0));
  EXPECT_EQ(this->Last("e"), 2u);
  EXPECT_EQ(this->Read("e"), (Entries{E(1, G(1, 0), "a"), E(2, G(1, 0), "b")}));
}

TYPED_TEST(JournalCompliance, LowerGenerationIsStaleEvenAtTheRightSeq) {
  ASSERT_EQ(this->Append("e", 0, G(2, 3), {"a"}), 1u);
  auto lower_seq = this->j_->Append("e", 1, G(2, 2), {"stale", "too"});
  EXPECT_EQ(Code(lower_seq), ErrorCode::kStaleGeneration);
  EXPECT_EQ(lower_seq.status().message(), "stale generation 2.2 for entity 'e': fenced at 2.3");
  auto lower_term = this->j_->Append("e", 1, G(1, UINT32_MAX), {"stale"});
  EXPECT_EQ(Code(lower_term), ErrorCode::kStaleGeneration);
  EXPECT_EQ(lower_term.status().message(),
            "stale generation 1.4294967295 for entity 'e': fenced at 2.3");
  EXPECT_EQ(Code(this->j_->Append("e", 1, 0, {"stale"})), ErrorCode::kStaleGeneration);
  // The generation is checked before the position.
  EXPECT_EQ(Code(this->j_->Append("e", 5, G(2, 2), {"stale"})), ErrorCode::kStaleGeneration);
  EXPECT_EQ(this->Read("e"), (Entries{E(1, G(2, 3), "a")}));
  EXPECT_EQ(this->FenceOf("e"), G(2, 3));
}

TYPED_TEST(JournalCompliance, EqualAndHigherGenerationsAreAcceptedAndRaiseTheFence) {
  EXPECT_EQ(this->FenceOf("e"), 0u);
  ASSERT_EQ(this->Append("e", 0, G(2, 3), {"a"}), 1u);
  EXPECT_EQ(this->FenceOf("e"), G(2, 3));
  ASSERT_EQ(this->Append("e", 1, G(2, 3), {"b"}), 2u);  // equal
  ASSERT_EQ(this->Append("e", 2, G(2, 4), {"c"}), 3u);  // higher seq
  EXPECT_EQ(this->FenceOf("e"), G(2, 4));
  ASSERT_EQ(this->Append("e", 3, G(3, 0), {"d"}), 4u);  // higher term, lower seq
  EXPECT_EQ(this->FenceOf("e"), G(3, 0));
  EXPECT_EQ(Code(this->j_->Append("e", 4, G(2, 4), {"x"})), ErrorCode::kStaleGeneration);
  EXPECT_EQ(this->Read("e"), (Entries{E(1, G(2, 3), "a"), E(2, G(2, 3), "b"), E(3, G(2, 4), "c"),
                                      E(4, G(3, 0), "d")}));
}

TYPED_TEST(JournalCompliance, FenceRaisesRefusesLowerAndReturnsTheLastSeq) {
  EXPECT_EQ(Ok(this->j_->Fence("new", G(1, 0)), UINT64_MAX), 0u);
  EXPECT_EQ(this->FenceOf("new"), G(1, 0));
  EXPECT_EQ(this->Last("new"), 0u);
  ASSERT_EQ(this->Append("e", 0, G(1, 0), {"a", "b"}), 2u);
  EXPECT_EQ(Ok(this->j_->Fence("e", G(2, 0))), 2u);
  EXPECT_EQ(this->FenceOf("e"), G(2, 0));
  // The predecessor's append, at the right position, now fails.
  auto late = this->j_->Append("e", 2, G(1, 0), {"late"});
  EXPECT_EQ(Code(late), ErrorCode::kStaleGeneration);
  EXPECT_EQ(late.status().message(), "stale generation 1.0 for entity 'e': fenced at 2.0");
  auto lower = this->j_->Fence("e", G(1, 5));
  EXPECT_EQ(Code(lower), ErrorCode::kStaleGeneration);
  EXPECT_EQ(lower.status().message(), "stale generation 1.5 for entity 'e': fenced at 2.0");
  EXPECT_EQ(this->FenceOf("e"), G(2, 0));
  EXPECT_EQ(Ok(this->j_->Fence("e", G(2, 0))), 2u);  // equal
  EXPECT_EQ(this->Append("e", 2, G(2, 0), {"c"}), 3u);
  EXPECT_EQ(this->Read("e"), (Entries{E(1, G(1, 0), "a"), E(2, G(1, 0), "b"), E(3, G(2, 0), "c")}));
}

TYPED_TEST(JournalCompliance, ReadHonoursAfterSeqAndLimitInOrder) {
  ASSERT_EQ(this->Append("e", 0, G(1, 0), {"1", "2", "3"}), 3u);
  for (std::uint64_t s = 3; s < 10; ++s) {
    ASSERT_EQ(this->Append("e", s, G(1, 0), {std::to_string(s + 1)}), s + 1);
  }
  auto seqs = [](const Entries& entries) {
    std::vector<std::uint64_t> out;
    for (const JournalEntry& e : entries) {
      EXPECT_EQ(e.payload, std::to_string(e.seq));
      out.push_back(e.seq);
    }
    return out;
  };
  using V = std::vector<std::uint64_t>;
  EXPECT_EQ(seqs(this->Read("e")), (V{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(seqs(this->Read("e", 3)), (V{4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(seqs(this->Read("e", 3, 2)), (V{4, 5}));
  EXPECT_EQ(seqs(this->Read("e", 0, 1)), (V{1}));
  EXPECT_EQ(seqs(this->Read("e", 9, 5)), (V{10}));
  EXPECT_EQ(seqs(this->Read("e", 5, std::numeric_limits<std::size_t>::max())), (V{6, 7, 8, 9, 10}));
  EXPECT_EQ(seqs(this->Read("e", 10)), V{});
  EXPECT_EQ(seqs(this->Read("e", 100, 3)), V{});
  EXPECT_EQ(seqs(this->Read("e", UINT64_MAX)), V{});
  EXPECT_EQ(seqs(this->Read("e", UINT64_MAX - 1, 2)), V{});
}

TYPED_TEST(JournalCompliance, PayloadsAndEntitiesAreBinarySafe) {
  const std::string nul("a\0b\xff\r\n\0", 7), entity("entity with:colons\x01", 19);
  const std::string big(1 << 20, '\0');
  ASSERT_EQ(this->Append(entity, 0, G(1, 2), {nul, "", "3:4:x", big}), 4u);
  const Entries entries = this->Read(entity);
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0], E(1, G(1, 2), nul));
  EXPECT_EQ(entries[1], E(2, G(1, 2), ""));
  EXPECT_EQ(entries[2], E(3, G(1, 2), "3:4:x"));
  EXPECT_TRUE(entries[3] == E(4, G(1, 2), big));  // EXPECT_EQ would print a MiB
  ASSERT_TRUE(this->j_->SaveSnapshot(entity, 4, G(1, 2), nul).ok());
  EXPECT_EQ(this->Load(entity), Snap(4, G(1, 2), nul));
}

TYPED_TEST(JournalCompliance, UnknownEntityIsEmptyAndUnfenced) {
  EXPECT_EQ(this->Last("nobody"), 0u);
  EXPECT_EQ(this->FenceOf("nobody"), 0u);
  EXPECT_EQ(this->Read("nobody"), Entries{});
  EXPECT_EQ(this->Load("nobody"), std::nullopt);
  EXPECT_EQ(this->Append("nobody", 0, 0, {"first"}), 1u);  // generation 0 may still append
}

TYPED_TEST(JournalCompliance, SnapshotsSaveLoadAndReplaceOnlyOlderOnes) {
  Journal& j = *this->j_;
  ASSERT_EQ(this->Append("e", 0, G(1, 0), {"a", "b", "c"}), 3u);
  ASSERT_TRUE(j.SaveSnapshot("e", 2, G(1, 0), "state@2").ok());
  EXPECT_EQ(this->Load("e"), Snap(2, G(1, 0), "state@2"));
  ASSERT_TRUE(j.SaveSnapshot("e", 3, G(1, 0), "state@3").ok());
  EXPECT_EQ(this->Load("e"), Snap(3, G(1, 0), "state@3"));
  ASSERT_TRUE(j.SaveSnapshot("e", 1, G(1, 0), "older").ok());  // ignored
  EXPECT_EQ(this->Load("e"), Snap(3, G(1, 0), "state@3"));
  ASSERT_TRUE(j.SaveSnapshot("e", 3, G(1, 1), "again@3").ok());  // equal seq replaces
  EXPECT_EQ(this->Load("e"), Snap(3, G(1, 1), "again@3"));
  EXPECT_EQ(this->FenceOf("e"), G(1, 1));  // an accepted snapshot raises the fence
  // An ignored (older) snapshot changes nothing, not even the fence.
  ASSERT_TRUE(j.SaveSnapshot("e", 2, G(4, 0), "older").ok());
  EXPECT_EQ(this->Load("e"), Snap(3, G(1, 1), "again@3"));
  EXPECT_EQ(this->FenceOf("e"), G(1, 1));
  // A snapshot at 0 (an initial state) is allowed on an empty entity.
  ASSERT_TRUE(j.SaveSnapshot("fresh", 0, G(1, 0), "init").ok());
  EXPECT_EQ(this->Load("fresh"), Snap(0, G(1, 0), "init"));
  EXPECT_EQ(this->Last("fresh"), 0u);
}

TYPED_TEST(JournalCompliance, SnapshotsAreFencedAndNotPastTheEnd) {
  Journal& j = *this->j_;
  ASSERT_EQ(this->Append("e", 0, G(2, 0), {"a", "b"}), 2u);
  Status stale = j.SaveSnapshot("e", 1, G(1, 9), "stale");
  EXPECT_EQ(stale.code(), ErrorCode::kStaleGeneration);
  EXPECT_EQ(stale.message(), "stale generation 1.9 for entity 'e': fenced at 2.0");
  EXPECT_EQ(Code(j.SaveSnapshot("e", 9, G(1, 9), "s")), ErrorCode::kStaleGeneration);  // first
  Status past = j.SaveSnapshot("e", 3, G(2, 0), "future");
  EXPECT_EQ(past.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(past.message(),
            "journal: snapshot at sequence 3 of entity 'e' is past its last sequence 2");
  EXPECT_EQ(Code(j.SaveSnapshot("e", UINT64_MAX, G(3, 0), "s")), ErrorCode::kInvalidArgument);
  EXPECT_EQ(Code(j.SaveSnapshot("none", 1, G(3, 0), "s")), ErrorCode::kInvalidArgument);
  EXPECT_EQ(this->Load("e"), std::nullopt);
  EXPECT_EQ(this->Load("none"), std::nullopt);
  EXPECT_EQ(this->FenceOf("e"), G(2, 0));  // refused snapshots do not fence
  EXPECT_EQ(this->FenceOf("none"), 0u);
  ASSERT_TRUE(j.SaveSnapshot("e", 1, G(3, 0), "new owner").ok());
  EXPECT_EQ(this->FenceOf("e"), G(3, 0));
  EXPECT_EQ(Code(j.Append("e", 2, G(2, 0), {"x"})), ErrorCode::kStaleGeneration);
  EXPECT_EQ(this->Last("e"), 2u);
}

TYPED_TEST(JournalCompliance, EntitiesAreIsolated) {
  ASSERT_EQ(this->Append("a", 0, G(1, 0), {"a1", "a2"}), 2u);
  ASSERT_EQ(this->Append("a:log", 0, G(1, 0), {"x"}), 1u);
  ASSERT_TRUE(this->j_->Fence("a", G(5, 0)).ok());
  ASSERT_TRUE(this->j_->SaveSnapshot("a", 2, G(5, 0), "sa").ok());
  ASSERT_EQ(this->Append("b", 0, G(1, 0), {"b1"}), 1u);  // not fenced by "a"
  EXPECT_EQ(this->Read("b"), (Entries{E(1, G(1, 0), "b1")}));
  EXPECT_EQ(this->Read("a:log"), (Entries{E(1, G(1, 0), "x")}));
  EXPECT_EQ(this->Last("a"), 2u);
  EXPECT_EQ(this->FenceOf("b"), G(1, 0));
  EXPECT_EQ(this->FenceOf("a:log"), G(1, 0));
  EXPECT_EQ(this->Load("b"), std::nullopt);
  EXPECT_EQ(this->Load("a"), Snap(2, G(5, 0), "sa"));
}

TYPED_TEST(JournalCompliance, AppIdsAreIsolated) {
  auto other = this->Open("other-app");
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(this->Append("e", 0, G(5, 0), {"mine"}), 1u);
  ASSERT_TRUE(this->j_->SaveSnapshot("e", 1, G(5, 0), "s").ok());
  EXPECT_EQ(Ok(other->LastSeq("e"), UINT64_MAX), 0u);
  EXPECT_EQ(Ok(other->FenceOf("e"), UINT64_MAX), 0u);
  EXPECT_EQ(Ok(other->LoadSnapshot("e")), std::nullopt);
  EXPECT_EQ(Ok(other->Append("e", 0, G(1, 0), {"theirs", "too"})), 2u);  // not fenced by us
  EXPECT_EQ(this->Read("e"), (Entries{E(1, G(5, 0), "mine")}));
  EXPECT_EQ(this->FenceOf("e"), G(5, 0));
}

TYPED_TEST(JournalCompliance, InvalidArgumentsChangeNothing) {
  const std::uint64_t too_big = std::uint64_t{1} << 63;
  const ErrorCode invalid = ErrorCode::kInvalidArgument;
  Journal& j = *this->j_;
  ASSERT_EQ(this->Append("e", 0, G(1, 0), {"a"}), 1u);
  EXPECT_EQ(Code(j.Append("", 0, G(1, 0), {"x"})), invalid);
  EXPECT_EQ(Code(j.Append("e", 1, G(1, 0), {})), invalid);
  EXPECT_EQ(Code(j.Append("e", 1, too_big, {"x"})), invalid);
  EXPECT_EQ(Code(j.Append("e", 1, UINT64_MAX, {"x"})), invalid);
  EXPECT_EQ(Code(j.Fence("", G(1, 0))), invalid);
  EXPECT_EQ(Code(j.Fence("e", too_big)), invalid);
  EXPECT_EQ(Code(j.Read("", 0)), invalid);
  EXPECT_EQ(Code(j.LastSeq("")), invalid);
  EXPECT_EQ(Code(j.FenceOf("")), invalid);
  EXPECT_EQ(Code(j.SaveSnapshot("", 0, G(1, 0), "s")), invalid);
  EXPECT_EQ(Code(j.SaveSnapshot("e", 1, too_big, "s")), invalid);
  EXPECT_EQ(Code(j.LoadSnapshot("")), invalid);
  EXPECT_EQ(this->Read("e"), (Entries{E(1, G(1, 0), "a")}));
  EXPECT_EQ(this->FenceOf("e"), G(1, 0));
  EXPECT_EQ(this->Load("e"), std::nullopt);
}

TYPED_TEST(JournalCompliance, LargestGenerationRoundTrips) {
  const std::uint64_t largest = (std::uint64_t{1} << 63) - 1;
  ASSERT_EQ(this->Append("e", 0, largest, {"top"}), 1u);
  EXPECT_EQ(this->Read("e"), (Entries{E(1, largest, "top")}));
  EXPECT_EQ(this->FenceOf("e"), largest);
  EXPECT_EQ(Code(this->j_->Append("e", 1, largest - 1, {"x"})), ErrorCode::kStaleGeneration);
  ASSERT_TRUE(this->j_->SaveSnapshot("e", 1, largest, "s").ok());
  EXPECT_EQ(this->Load("e"), Snap(1, largest, "s"));
}

TYPED_TEST(JournalCompliance, OpenRejectsBadConfig) {
  for (const BackendConfig& bad :
       {BackendConfig{"nope", "a", nullptr}, BackendConfig{"ftp://x", "a", nullptr},
        this->backend_.Config(nullptr, "")}) {
    EXPECT_EQ(Code(OpenJournal(bad)), ErrorCode::kBadConfig) << bad.uri;
  }
}

// Appenders race round by round with the same expected seq (through two
// objects on the same storage when it is shared): exactly one wins each round,
// the others get kConflict, and the log has one entry per round, in order.
TYPED_TEST(JournalCompliance, RacingAppendersExactlyOneWinsEachRound) {
  constexpr int kAppenders = 6, kRounds = 30;
  std::unique_ptr<Journal> second = kIsMem<TypeParam> ? nullptr : this->Open();
  std::barrier sync(kAppenders);
  std::vector<std::vector<int>> wins(kRounds);  // wins[r]: who won round r
  std::mutex wins_mu;
  std::vector<std::thread> threads;
  for (int a = 0; a < kAppenders; ++a) {
    Journal* j = (a % 2 == 1 && second) ? second.get() : this->j_.get();
    threads.emplace_back([&, j, a] {
      for (int r = 0; r < kRounds; ++r) {
        sync.arrive_and_wait();
        auto res = j->Append("e", r, G(1, 0), {std::to_string(a) + "-" + std::to_string(r)});
        if (res.ok()) {
          EXPECT_EQ(res.value(), static_cast<std::uint64_t>(r + 1));
          std::lock_guard<std::mutex> lock(wins_mu);
          wins[r].push_back(a);
        } else {
          EXPECT_EQ(Code(res), ErrorCode::kConflict) << res.status().ToString();
        }
        sync.arrive_and_wait();
      }
    });
  }
  for (auto& th : threads) th.join();
  const Entries log = this->Read("e");
  ASSERT_EQ(log.size(), static_cast<std::size_t>(kRounds));
  for (int r = 0; r < kRounds; ++r) {
    ASSERT_EQ(wins[r].size(), 1u) << "round " << r;
    EXPECT_EQ(log[r], E(r + 1, G(1, 0), std::to_string(wins[r][0]) + "-" + std::to_string(r)));
  }
}

// Appends `each` events "<who>:<i>" to "e", re-reading the last seq after each
// kConflict. False on any other error.
bool AppendWithRetries(Journal& j, int who, int each) {
  for (int i = 0; i < each;) {
    auto last = j.LastSeq("e");
    if (!last.ok()) return false;
    auto r = j.Append("e", last.value(), G(1, 0), {std::to_string(who) + ":" + std::to_string(i)});
    if (r.ok()) {
      ++i;
    } else if (Code(r) != ErrorCode::kConflict) {
      return false;
    }
  }
  return true;
}

// Checks that the log of "e" holds every "<who>:<i>" exactly once, seqs 1..n
// without gaps, each appender's events in its order.
void ExpectEveryEventOnceInOrder(const Entries& log, int appenders, int each) {
  ASSERT_EQ(log.size(), static_cast<std::size_t>(appenders * each));
  std::vector<int> next(appenders, 0);
  for (std::size_t s = 0; s < log.size(); ++s) {
    EXPECT_EQ(log[s].seq, s + 1);
    const int who = std::stoi(log[s].payload.substr(0, log[s].payload.find(':')));
    ASSERT_TRUE(who >= 0 && who < appenders) << log[s].payload;
    EXPECT_EQ(log[s].payload, std::to_string(who) + ":" + std::to_string(next[who]++));
  }
}

TYPED_TEST(JournalCompliance, RetryingAppendersLeaveNoGapsOrDuplicates) {
  constexpr int kAppenders = 4, kEach = 25;
  std::vector<std::thread> threads;
  for (int a = 0; a < kAppenders; ++a) {
    threads.emplace_back([this, a] { EXPECT_TRUE(AppendWithRetries(*this->j_, a, kEach)); });
  }
  for (auto& th : threads) th.join();
  ExpectEveryEventOnceInOrder(this->Read("e"), kAppenders, kEach);
}

TYPED_TEST(JournalDurable, AppendersInSeveralProcessesLeaveNoGapsOrDuplicates) {
  constexpr int kChildren = 4, kEach = 20;
  std::vector<pid_t> children;
  for (int k = 0; k < kChildren; ++k) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto journal = OpenJournal(this->backend_.Config(nullptr, "journal-app"));
      _exit(!journal.ok() ? 2 : AppendWithRetries(*journal.value(), k, kEach) ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  ExpectEveryEventOnceInOrder(this->Read("e"), kChildren, kEach);
}

// The failover case through two objects on the same storage: the successor
// fences, and the predecessor's append at the right position is refused.
TYPED_TEST(JournalDurable, SuccessorFenceStopsThePredecessorThroughAnotherObject) {
  auto successor = this->Open();
  ASSERT_NE(successor, nullptr);
  ASSERT_EQ(this->Append("e", 0, G(1, 0), {"a"}), 1u);
  EXPECT_EQ(Ok(successor->Fence("e", G(2, 0))), 1u);
  EXPECT_EQ(Code(this->j_->Append("e", 1, G(1, 0), {"late"})), ErrorCode::kStaleGeneration);
  EXPECT_EQ(Ok(successor->Append("e", 1, G(2, 0), {"b"})), 2u);
  EXPECT_EQ(this->Read("e"), (Entries{E(1, G(1, 0), "a"), E(2, G(2, 0), "b")}));
}

TYPED_TEST(JournalDurable, EntriesFenceAndSnapshotSurviveReopening) {
  const std::string payload("v\0w", 3), state("s\0", 2);
  ASSERT_EQ(this->Append("e", 0, G(4, 2), {payload, "two"}), 2u);
  ASSERT_TRUE(this->j_->SaveSnapshot("e", 1, G(4, 2), state).ok());
  ASSERT_TRUE(this->j_->Fence("e", G(5, 0)).ok());
  ASSERT_TRUE(this->j_->Fence("fenced-only", G(3, 0)).ok());
  this->j_ = this->Open();
  ASSERT_NE(this->j_, nullptr);
  EXPECT_EQ(this->Read("e"), (Entries{E(1, G(4, 2), payload), E(2, G(4, 2), "two")}));
  EXPECT_EQ(this->Last("e"), 2u);
  EXPECT_EQ(this->FenceOf("e"), G(5, 0));
  EXPECT_EQ(this->FenceOf("fenced-only"), G(3, 0));
  EXPECT_EQ(this->Load("e"), Snap(1, G(4, 2), state));
  EXPECT_EQ(Code(this->j_->Append("e", 2, G(4, 2), {"stale"})), ErrorCode::kStaleGeneration);
  EXPECT_EQ(this->Append("e", 2, G(5, 0), {"next"}), 3u);
}

TEST(RedisJournal, UnreachableServerIsABackendFailureNamingIt) {
  const int closed = testing::RedisServer::FreePort();
  auto opened = OpenJournal(
      {"redis://127.0.0.1:" + std::to_string(closed) + "/0?connect_timeout_ms=300", "a", nullptr});
  ASSERT_EQ(Code(opened), ErrorCode::kBackendFailure);
  EXPECT_NE(opened.status().message().find("127.0.0.1:" + std::to_string(closed)),
            std::string::npos)
      << opened.status().ToString();

  testing::RedisServer server;
  auto journal = OpenJournal(
      {"redis://127.0.0.1:" + std::to_string(server.port()) + "/0?connect_timeout_ms=300", "a",
       nullptr});
  ASSERT_TRUE(journal.ok()) << journal.status().ToString();
  Journal& j = *journal.value();
  ASSERT_TRUE(j.Append("e", 0, G(1, 0), {"a"}).ok());
  server.Stop(SIGKILL);
  const ErrorCode failure = ErrorCode::kBackendFailure;
  EXPECT_EQ(Code(j.Append("e", 1, G(1, 0), {"b"})), failure);
  EXPECT_EQ(Code(j.Fence("e", G(1, 0))), failure);
  EXPECT_EQ(Code(j.Read("e", 0)), failure);
  EXPECT_EQ(Code(j.LastSeq("e")), failure);
  EXPECT_EQ(Code(j.FenceOf("e")), failure);
  EXPECT_EQ(Code(j.SaveSnapshot("e", 1, G(1, 0), "s")), failure);
  EXPECT_EQ(Code(j.LoadSnapshot("e")), failure);
}

}  // namespace
}  // namespace pynenc_cpp
