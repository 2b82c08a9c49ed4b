// The SQLite components' schemas across versions: a file written by an older
// pynenc-cpp is migrated in place when it is opened, its records kept.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backend_fixture.h"
#include "sqlite/sqlite_db.h"
#include "sqlite/sqlite_state_backend.h"
#include "sqlite/sqlite_trigger_store.h"
#include "sqlite_test_util.h"

namespace pynenc_cpp::sqlite {
namespace {

using pynenc_cpp::testing::ReadInt;
using pynenc_cpp::testing::SqliteBackend;

std::int64_t HistoryIndexes(Database& db) {
  return ReadInt(db,
                 "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                 "name = 'state_history_by_invocation'");
}

HistoryRecord Entry(TimestampUs ts, InvocationStatus status) {
  return HistoryRecord{InvocationId("ignored"), ts, status, "{\"ts\": " + std::to_string(ts) + "}"};
}

// A file as pynenc-cpp's state backend schema version 1 left it: version 2's
// tables plus the index version 2 dropped, recorded as version 1.
TEST(SqliteSchema, AVersionOneStateBackendFileIsMigratedWithItsHistoryKept) {
  SqliteBackend b;
  auto opened = Database::Open(SqliteOptions{b.Path()});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<Database> db = opened.value();
  {
    auto backend = NewSqliteStateBackend(db, b.Config());
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    const std::vector<InvocationId> ids = {InvocationId("inv-1")};
    ASSERT_TRUE(backend.value()->AddHistories(ids, Entry(20, InvocationStatus::kPending)).ok());
    ASSERT_TRUE(backend.value()->AddHistories(ids, Entry(10, InvocationStatus::kRegistered)).ok());
  }
  EXPECT_EQ(HistoryIndexes(*db), 0);  // a new file never has it
  ASSERT_TRUE(db->Write([](Conn& c) {
                  return c.Exec(
                      "CREATE INDEX state_history_by_invocation ON state_history "
                      "(app_id, invocation_id, timestamp_us); "
                      "UPDATE pynenc_cpp_schema SET version = 1 WHERE component = 'state_backend'");
                }).ok());
  ASSERT_EQ(HistoryIndexes(*db), 1);

  auto migrated = NewSqliteStateBackend(db, b.Config());
  ASSERT_TRUE(migrated.ok()) << migrated.status().ToString();
  EXPECT_EQ(HistoryIndexes(*db), 0);
  EXPECT_EQ(ReadInt(*db, "SELECT version FROM pynenc_cpp_schema WHERE component = 'state_backend'"),
            2);
  auto history = migrated.value()->GetHistory(InvocationId("inv-1"));
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  ASSERT_EQ(history.value().size(), 2u);
  EXPECT_EQ(history.value()[0].status, InvocationStatus::kRegistered);  // timestamp order
  EXPECT_EQ(history.value()[1].timestamp_us, 20);
  // The lookup by invocation still goes through an index, not a table scan.
  EXPECT_EQ(ReadInt(*db,
                    "SELECT count(*) FROM pragma_index_list('state_history') WHERE origin = 'u'"),
            1);
}

// A file as the trigger store's schema version 1 left it (no pending reports):
// migrated to version 2, its valid conditions kept, and the notes work.
TEST(SqliteSchema, AVersionOneTriggerStoreFileGetsThePendingReportsTable) {
  SqliteBackend b;
  auto opened = Database::Open(SqliteOptions{b.Path()});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<Database> db = opened.value();
  {
    auto store = NewSqliteTriggerStore(db, b.Config());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(store.value()->RecordValidConditions({{"v", "vj"}}).ok());
  }
  ASSERT_TRUE(db->Write([](Conn& c) {
                  return c.Exec(
                      "DROP TABLE trig_pending_reports; "
                      "UPDATE pynenc_cpp_schema SET version = 1 WHERE component = 'trigger'");
                }).ok());

  auto migrated = NewSqliteTriggerStore(db, b.Config());
  ASSERT_TRUE(migrated.ok()) << migrated.status().ToString();
  EXPECT_EQ(ReadInt(*db, "SELECT version FROM pynenc_cpp_schema WHERE component = 'trigger'"), 2);
  EXPECT_EQ(migrated.value()->ValidConditions().value(), (std::vector<IdJson>{{"v", "vj"}}));
  ASSERT_TRUE(migrated.value()->NotePendingReports({{"n", "nj"}}).ok());
  EXPECT_EQ(migrated.value()->PendingReports().value(), (std::vector<IdJson>{{"n", "nj"}}));
}

TEST(SqliteSchema, AStateBackendFileFromANewerBuildIsRefused) {
  SqliteBackend b;
  auto opened = Database::Open(SqliteOptions{b.Path()});
  ASSERT_TRUE(opened.ok());
  std::shared_ptr<Database> db = opened.value();
  ASSERT_TRUE(NewSqliteStateBackend(db, b.Config()).ok());
  ASSERT_TRUE(db->Write([](Conn& c) {
                  return c.Exec(
                      "UPDATE pynenc_cpp_schema SET version = 99 WHERE component = 'state_backend'");
                }).ok());
  auto refused = NewSqliteStateBackend(db, b.Config());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kBadConfig);
  EXPECT_NE(refused.status().message().find("newer pynenc-cpp"), std::string::npos);
}

}  // namespace
}  // namespace pynenc_cpp::sqlite
