// Plain-file state of a node, kept in its state dir (used by the node runtime):
//   node_id      32 lowercase hex characters + "\n"; created once, never rewritten
//   incarnation  decimal u64 + "\n"; the last incarnation this node announced
//   peers        one "host:port" per line: members last seen alive (merged with
//                the seeds at boot)
//   term_floor   decimal u32 + "\n": the highest generation term an instance
//                started under on this node, reported to the leader after a
//                restart so terms keep rising (docs/cluster/singletons.md)
// Every write goes to a unique temporary file in the same directory, is flushed
// with fsync and then moved into place, so a crash never leaves a torn file.
// node_id is moved with link(2) (no clobber): when two processes race on an
// empty state dir both end with the same id.
//
// Errors are values: kBadConfig "state dir not writable: <dir>: <reason>" when
// the directory cannot be created or written, kBadConfig "corrupt <file>: ..."
// for unparsable node_id / incarnation contents. A missing incarnation or peers
// file reads as 0 / empty; malformed peers lines are skipped (it is a cache).
//
// Thread safety: free functions with no shared state; concurrent calls on the
// same directory are safe at the file level (atomic replace) but the last
// writer wins.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pynenc_cpp/cluster/types.h"
#include "pynenc_cpp/core/error.h"

namespace pynenc_cpp::cluster::membership {

inline constexpr std::size_t kMaxCachedPeers = 4096;

// Creates `state_dir` (and parents) if needed, then reads or creates node_id.
Result<NodeId> LoadOrCreateNodeId(const std::string& state_dir);
bool IsValidNodeId(const std::string& id);

Result<std::uint64_t> LoadIncarnation(const std::string& state_dir);
Status StoreIncarnation(const std::string& state_dir, std::uint64_t incarnation);

// At most kMaxCachedPeers addresses, in file order, duplicates removed.
Result<std::vector<Address>> LoadPeers(const std::string& state_dir);
Status StorePeers(const std::string& state_dir, const std::vector<Address>& peers);

// The term_floor file: 0 if missing; kBadConfig "corrupt <path>: ..." otherwise
// unparsable (remove the file to forget this node's history).
Result<std::uint32_t> LoadTermFloor(const std::string& state_dir);
Status StoreTermFloor(const std::string& state_dir, std::uint32_t term);

}  // namespace pynenc_cpp::cluster::membership
