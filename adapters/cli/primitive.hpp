#pragma once
// Which primitive `dlock run` and `dlock hold` take on NAME: the exclusive mutex (the default),
// one side of the reader-writer lock (--shared, --write), or N permits of an M-permit semaphore
// (--permits N --of M). The mutex of a name counts as a writer of the name's reader-writer lock
// on every backend; a semaphore of the name is refused while the name is held as a lock.
#include <cstdint>
#include <string>

#include "args.hpp"
#include "dlock/capabilities.hpp"

namespace dlock::cli {

struct primitive_request {
  enum class kind { mutex, read, write, permits };
  kind what = kind::mutex;
  std::uint32_t permits = 1;  // kind::permits: how many permits ...
  std::uint32_t of = 0;       // ... of a semaphore of this many (the same in every process)
};

// Reads --shared, --write, --permits N, --of M. Every inconsistent combination is a usage_error
// (exit 64) naming what is wrong, before anything connects.
primitive_request parse_primitive(const args& a);

// What the backend must offer for it (empty for the mutex): dlock::open refuses a backend
// without it before connecting, naming the schemes that have it.
capabilities required_capabilities(const primitive_request& p);

// For messages: "lock 'x'", "the read side of rw lock 'x'", "2 of the 3 permits of semaphore 'x'".
std::string describe(const primitive_request& p, const std::string& name);

// Why an attempt came back empty, as a sentence: "no permit of semaphore 'x' (2 in all) is free".
std::string not_free(const primitive_request& p, const std::string& name);

}  // namespace dlock::cli
