// Conformance hooks for memory://: the test-only break and the table probe.
#include "dlock_test/hooks.hpp"
#include "dlock/uri.hpp"
#include "memory_backend.hpp"

namespace {

std::string namespace_of(const std::string& uri_text) {
  return dlock::memory::namespace_of(dlock::uri::parse(uri_text));
}

}  // namespace

DLOCK_TEST_HOOKS("memory", {.break_lock =
                                [](const std::string& uri, const dlock::lease& held) {
                                  dlock::memory::break_grant(namespace_of(uri), std::string(held.name()));
                                },
                            .is_held_on_server =
                                [](const std::string& uri, std::string_view name) {
                                  return dlock::memory::is_held(namespace_of(uri), std::string(name));
                                },
                            .inspection = {.inspect = true, .list = true, .force_release = true}});
