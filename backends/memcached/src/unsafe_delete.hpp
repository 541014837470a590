#pragma once
// memcached+unsafe-delete://: the well-known memcached lock recipe, `add` with a ttl and a plain `delete`
// release that never checks whose item it deletes. UNSAFE, kept so the comparison suite can show
// a slow holder deleting its successor's lock; open() refuses it unless the URI says unsafe=true.
#include "dlock/registry.hpp"

namespace dlock::memcached {

void register_unsafe_delete(registry& r);

}  // namespace dlock::memcached
