// A run-time module for the module lookup tests: registers the schemes of DLOCK_TEST_MODULE_SCHEMES
// (a comma-separated list of string literals), each opening the core's test-local backend.
#include <string>

#include "../test_backend.hpp"
#include "dlock/registry.hpp"
#include "dlock/spi.hpp"

namespace {

void register_test_module(dlock::registry& r) {
  for (const char* scheme : {DLOCK_TEST_MODULE_SCHEMES})
    r.add({.scheme = scheme,
           .caps = {},
           .scope = dlock::lock_scope::process,
           .example_uri = std::string(scheme) + "://",
           .summary = "module lookup test",
           .parameters = {},
           .unsafe_because = {},
           .open = [](const dlock::uri&, const dlock::lock_options& o) {
             return std::make_shared<dlock::core_test::test_backend>(dlock::capabilities{}, o);
           }});
}

}  // namespace

DLOCK_PLUGIN(register_test_module)
