// Reading a SQLite file's state back in white-box tests of the SQLite backend.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "sqlite/sqlite_db.h"

namespace pynenc_cpp::testing {

// The integer in the first column of the first row of `sql`, read in one read
// transaction of `db` (-1, and a test failure, if the statement fails).
inline std::int64_t ReadInt(sqlite::Database& db, const std::string& sql) {
  std::int64_t n = -1;
  EXPECT_TRUE(db.Read([&](sqlite::Conn& c) -> Status {
                  auto q = c.Prepare(sql);
                  if (!q.ok()) return q.status();
                  auto row = q.value()->Step();
                  if (!row.ok()) return row.status();
                  n = q.value()->Int(0);
                  return Status::Ok();
                }).ok());
  return n;
}

}  // namespace pynenc_cpp::testing
