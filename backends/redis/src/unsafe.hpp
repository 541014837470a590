#pragma once
// The well-known broken Redis lock recipes, kept as UNSAFE schemes so the comparison suite can show
// each one failing where it is known to fail. Never a default:
// open() refuses them unless the URI says unsafe=true. None has fencing, renewal or a lost
// notification; see README.md ("The unsafe variants") for what each one gets wrong.
//
//   redis+unsafe-setnx-expire  SETNX key token, then EXPIRE as a second command; release DEL
//   redis+unsafe-getset        SETNX key <expiry in client ms>; GET + GETSET takeover of an
//                              expired value; release DEL if our own clock says we are in time
//   redis+unsafe-del           SET key token NX PX ttl (atomic); release by plain DEL, no owner check
//   redis+unsafe-incr          INCR key == 1 wins, then EXPIRE as a second command; release DEL
#include <memory>

#include "dlock/spi.hpp"

namespace dlock::redis {

enum class unsafe_strategy { setnx_expire, getset, del, incr };

// The backend of an unsafe scheme (u.scheme() names it in messages); throws dlock::error.
std::shared_ptr<backend> open_unsafe(const uri& u, const lock_options& defaults, unsafe_strategy strategy);

}  // namespace dlock::redis
