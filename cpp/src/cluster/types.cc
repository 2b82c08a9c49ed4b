#include "pynenc_cpp/cluster/types.h"

namespace pynenc_cpp::cluster {

std::string_view MemberStateName(MemberState s) {
  switch (s) {
    case MemberState::kAlive:
      return "alive";
    case MemberState::kSuspect:
      return "suspect";
    case MemberState::kDead:
      return "dead";
    case MemberState::kLeft:
      return "left";
  }
  return "unknown";
}

std::string_view MemberEventName(MemberEventKind k) {
  switch (k) {
    case MemberEventKind::kJoined:
      return "joined";
    case MemberEventKind::kSuspected:
      return "suspected";
    case MemberEventKind::kAliveAgain:
      return "alive_again";
    case MemberEventKind::kDead:
      return "dead";
    case MemberEventKind::kLeft:
      return "left";
  }
  return "unknown";
}

}  // namespace pynenc_cpp::cluster
