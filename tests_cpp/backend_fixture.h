// Backends for the typed compliance suites: each gives a BackendConfig for a
// fresh, empty store. A suite written once as TYPED_TEST over `AllBackends`
// runs against every backend; a new backend is done when the suites pass.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "pynenc_cpp/core/clock.h"
#include "pynenc_cpp/ports/backend_config.h"

namespace pynenc_cpp::testing {

struct MemBackend {
  static constexpr const char* kName = "Mem";
  BackendConfig Config(std::shared_ptr<Clock> clock = nullptr,
                       const std::string& app_id = "compliance-app") const {
    return BackendConfig{"memory://", app_id, std::move(clock)};
  }
};

// A temporary directory holding one database file, removed afterwards.
class SqliteBackend {
 public:
  static constexpr const char* kName = "Sqlite";
  SqliteBackend() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pynenc-cpp-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
    EXPECT_FALSE(dir_.empty());
  }
  ~SqliteBackend() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  SqliteBackend(const SqliteBackend&) = delete;
  SqliteBackend& operator=(const SqliteBackend&) = delete;

  std::string Path() const { return dir_ + "/compliance.db"; }
  BackendConfig Config(std::shared_ptr<Clock> clock = nullptr,
                       const std::string& app_id = "compliance-app") const {
    return BackendConfig{"sqlite://" + Path(), app_id, std::move(clock)};
  }

 private:
  std::string dir_;
};

using AllBackends = ::testing::Types<MemBackend, SqliteBackend>;
// Backends whose data outlives the component object and is shared between
// processes: the reopen and cross-process suites run on these only.
using DurableBackends = ::testing::Types<SqliteBackend>;

// Names typed-test instantiations "Mem", "Sqlite", ... in test ids.
struct BackendNames {
  template <typename T>
  static std::string GetName(int) {
    return T::kName;
  }
};

// Base fixture: `this->backend_` of type B.
template <typename B>
class BackendTest : public ::testing::Test {
 protected:
  B backend_;
};

}  // namespace pynenc_cpp::testing
