#include "cluster/lease/lease_codec.h"

#include <type_traits>

#include "cluster/wire.h"

namespace pynenc_cpp::cluster::lease_wire {

std::pair<std::uint8_t, std::string> Encode(const Message& message) {
  wire::ByteWriter w;
  std::uint8_t type = 0;
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Request>) {
          type = kRequest;
          w.U64(m.seq);
          w.U64(m.epoch);
          w.Str(m.candidate);
        } else if constexpr (std::is_same_v<M, Grant>) {
          type = kGrant;
          w.U64(m.seq);
          w.U8(m.granted ? 1 : 0);
          w.Str(m.grantor);
        } else {
          type = kRelease;
          w.Str(m.holder);
        }
      },
      message);
  return {type, std::move(w).Take()};
}

Result<Message> Decode(std::uint8_t type, std::string_view payload) {
  wire::ByteReader r(payload);
  auto malformed = [type]() {
    return Status::InvalidArgument("malformed lease message of type " + std::to_string(type));
  };
  switch (type) {
    case kRequest: {
      Request m;
      if (!r.U64(m.seq) || !r.U64(m.epoch) || !r.Str(m.candidate, kMaxLeaseNodeIdBytes) ||
          !r.done()) {
        return malformed();
      }
      return Message(std::move(m));
    }
    case kGrant: {
      Grant m;
      std::uint8_t granted = 0;
      if (!r.U64(m.seq) || !r.U8(granted) || granted > 1 ||
          !r.Str(m.grantor, kMaxLeaseNodeIdBytes) || !r.done()) {
        return malformed();
      }
      m.granted = granted == 1;
      return Message(std::move(m));
    }
    case kRelease: {
      Release m;
      if (!r.Str(m.holder, kMaxLeaseNodeIdBytes) || !r.done()) return malformed();
      return Message(std::move(m));
    }
    default:
      return Status::InvalidArgument("unknown lease message type " + std::to_string(type));
  }
}

}  // namespace pynenc_cpp::cluster::lease_wire
