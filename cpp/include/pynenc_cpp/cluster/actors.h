// The port between a node and the actor runtime of its process (the Python
// asyncio ClusteredActorSystem): the node hands over what its instances must
// do through an inbox (docs/cluster/actors.md), and carries their messages:
//  * to a label (a singleton): reliable, in order per sender, acknowledged by
//    the owner once processed and re-sent to the next owner otherwise, held in
//    a bounded per-label buffer while no owner runs it;
//  * to a node-local actor path (replies, plain actors): best effort.
//
// Thread safety: plain value types.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "pynenc_cpp/cluster/specs.h"

namespace pynenc_cpp::cluster {

struct InboxItem {
  enum class Kind : std::uint8_t {
    kStart = 0,    // an instance of `label` starts under `generation` (payload: its state)
    kStop = 1,     // it stops (payload: the reason); answer with InstanceStopped
    kLabel = 2,    // a message for the instance of `label`; answer with AckLabel(token)
    kPath = 3,     // a message for the local actor at path `label`; no answer
    kRegrant = 4,  // the running instance of `label` now holds `generation`
  };
  Kind kind = Kind::kPath;
  std::string label;  // the label, or the path of kPath
  Generation generation;
  SpecKind spec_kind = SpecKind::kActor;
  std::string actor_type;
  std::string payload;
  std::uint64_t token = 0;  // kLabel
};

// How the actor runtime answers a kLabel item.
enum class LabelOutcome : std::uint8_t {
  kProcessed = 0,  // handled: the sender forgets it
  kDuplicate = 1,  // already handled by this instance
  kNotHere = 2,    // not running here (any more): the sender re-sends to the owner
  kRejected = 3,   // cannot be handled (undecodable): dropped, and the sender forgets it
};

struct ActorMailStats {
  std::uint64_t label_sent = 0;        // envelopes sent (re-sends included)
  std::uint64_t label_resent = 0;      // envelopes sent again (owner change, timeout, not here)
  std::uint64_t label_acked = 0;       // messages acknowledged (processed, duplicate, rejected)
  std::uint64_t label_overflowed = 0;  // sends refused: the label's buffer was full
  std::uint64_t label_duplicates = 0;  // envelopes this node acknowledged as duplicates
  std::uint64_t path_sent = 0;
  std::uint64_t path_dropped = 0;  // inbox full, or no such node
  std::uint64_t inbox_overflowed = 0;
  std::map<std::string, std::uint64_t> buffered;  // label -> messages not yet acknowledged
};

}  // namespace pynenc_cpp::cluster
