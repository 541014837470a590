#pragma once
// memcached+unsafe-delete://: the well-known memcached lock recipe, `add` with a ttl and a plain `delete`
// release that never checks whose item it deletes. UNSAFE, kept so the comparison suite can show
// a slow holder deleting its successor's lock; open() refuses it unless the URI says unsafe=true.
#include <memory>

#include "dlock/spi.hpp"

namespace dlock::memcached {

// Throws dlock::error.
std::shared_ptr<backend> open_unsafe_delete(const uri& u, const lock_options& defaults);

}  // namespace dlock::memcached
