// ClusterOptions checks and derived values for ClusterNode::Start.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "pynenc_cpp/cluster/node.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster {

// No host and no seeds: the work runs in-process, no cluster at all.
bool IsStandalone(const ClusterOptions& options);

// kBadConfig with a message that starts with the offending option's name
// ("heartbeat_ms: must be > 0 (got 0)") for the first violated rule; the rules
// are listed in docs/cluster/supervisor.md ("Options").
Status ValidateClusterOptions(const ClusterOptions& options);

// The quorum to use: options.quorum if > 0, else a majority of the distinct
// addresses among `seeds` plus `self`.
int EffectiveQuorum(const ClusterOptions& options, const Address& self);

// Seeds merged with cached peers (seeds first, duplicates and self removed).
std::vector<Address> MergeSeeds(const std::vector<Address>& seeds,
                                const std::vector<Address>& cached, const Address& self);

}  // namespace pynenc_cpp::cluster
