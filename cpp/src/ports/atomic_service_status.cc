#include <array>

#include "pynenc_cpp/ports/orchestrator.h"

namespace pynenc_cpp {
namespace {
constexpr std::array<std::string_view, 4> kAtomicServiceNames = {"running", "completed",
                                                                 "abandoned", "blocked"};
}  // namespace

std::string_view AtomicServiceStatusName(AtomicServiceStatus status) {
  return kAtomicServiceNames[static_cast<std::size_t>(status)];
}

std::optional<AtomicServiceStatus> ParseAtomicServiceStatus(std::string_view name) {
  for (std::size_t i = 0; i < kAtomicServiceNames.size(); ++i) {
    if (kAtomicServiceNames[i] == name) return static_cast<AtomicServiceStatus>(i);
  }
  return std::nullopt;
}

}  // namespace pynenc_cpp
