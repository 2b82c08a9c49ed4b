// Internal to the coordinator: the checks the spec validators share, with the
// messages pynenc_cpp.cluster's dataclasses raise (ValueError naming the field).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster::spec_checks {

// `ms` as seconds the way a user wrote them: "0", "-1", "2.5", "0.001".
std::string Seconds(std::int64_t ms);

// kInvalidArgument "<field> must be a non-empty str, got ''" or "<field> must be
// at most <max> bytes, got <n>".
Status Name(std::string_view field, const std::string& value, std::size_t max);

// kInvalidArgument "<field> must contain non-empty str, got ''" for an empty item.
Status NonEmptyItems(std::string_view field, const std::vector<std::string>& items);

// kInvalidArgument "<field> must be > 0 and <= 86400 (a day), got <seconds>"
// unless 0 < ms <= kMaxDrainTimeoutMs. `field` is the seconds field's name.
Status DrainTimeout(std::string_view field, std::int64_t ms);

}  // namespace pynenc_cpp::cluster::spec_checks
