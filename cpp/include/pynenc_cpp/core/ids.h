// Identifiers used by the engine. pynenc identifiers are opaque strings at this
// level: TaskId is pynenc's `TaskId.key` ("module.func"), CallId is `CallId.key`
// ("<task key>:<args id>"), RunnerId and WorkflowId are the runner's and the
// workflow's ids. Strong types keep them from being mixed up at compile time.
#pragma once

#include <compare>
#include <functional>
#include <string>
#include <utility>

namespace pynenc_cpp {

template <typename Tag>
class Id {
 public:
  Id() = default;
  explicit Id(std::string value) : value_(std::move(value)) {}
  const std::string& str() const { return value_; }
  bool empty() const { return value_.empty(); }
  auto operator<=>(const Id&) const = default;
  bool operator==(const Id&) const = default;

 private:
  std::string value_;
};

using InvocationId = Id<struct InvocationIdTag>;
using CallId = Id<struct CallIdTag>;
using TaskId = Id<struct TaskIdTag>;
using RunnerId = Id<struct RunnerIdTag>;
using WorkflowId = Id<struct WorkflowIdTag>;

}  // namespace pynenc_cpp

template <typename Tag>
struct std::hash<pynenc_cpp::Id<Tag>> {
  size_t operator()(const pynenc_cpp::Id<Tag>& id) const noexcept {
    return std::hash<std::string>{}(id.str());
  }
};
