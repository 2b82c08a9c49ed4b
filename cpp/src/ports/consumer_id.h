// The consumer id of a broker connection that takes ids from a queue with an
// acknowledgement (Redis and SQLite reliable dequeue): what names the deliveries it
// holds, so that another process can tell them from its own.
#pragma once

#include <string>

namespace pynenc_cpp::broker_ids {

// "<host>-<pid>-<64 random bits in hex>": unique per process and call.
std::string NewConsumerId();

}  // namespace pynenc_cpp::broker_ids
