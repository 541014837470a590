// dlock::default_registry() and dlock::open(): in the static library dlock::builtin, linked into
// the program, not into the shared core, because the registry they fill is "the backends this
// program was linked with". Each backend target contributes one spi::builtin_backend to the
// linker-gathered section "dlock_backends" (cmake/backend_entry.cpp.in); the linker defines the
// section's bounds, and they are null when the program links no backend at all.
#include "dlock/registry.hpp"
#include "dlock/spi.hpp"

// The names are the linker's (it defines __start_/__stop_<section> for a section named like a C
// identifier), hence reserved identifiers on purpose.
extern "C" {
// NOLINTNEXTLINE(bugprone-reserved-identifier)
extern const dlock::spi::builtin_backend __start_dlock_backends[] __attribute__((weak, visibility("hidden")));
// NOLINTNEXTLINE(bugprone-reserved-identifier)
extern const dlock::spi::builtin_backend __stop_dlock_backends[] __attribute__((weak, visibility("hidden")));
}

namespace dlock {

void register_builtin(registry& r) {
  for (const auto* entry = __start_dlock_backends; entry != __stop_dlock_backends; ++entry) entry->register_backend(r);
}

registry& default_registry() {
  static registry& r = *[] {
    auto* made = new registry;  // never destroyed: leases may outlive static destruction
    register_builtin(*made);
    made->add_plugin_dirs_from_environment();
    return made;
  }();
  return r;
}

std::shared_ptr<backend> open(std::string_view uri_text, capabilities required) {
  return default_registry().open(uri_text, required);
}

std::shared_ptr<backend> open(std::string_view uri_text, capabilities required, std::error_code& ec) noexcept {
  return default_registry().open(uri_text, required, ec);
}

std::shared_ptr<backend> open(std::string_view uri_text, std::error_code& ec) noexcept {
  return default_registry().open(uri_text, {}, ec);
}

std::shared_ptr<backend> open(std::string_view uri_text, std::shared_ptr<observer> target) {
  return default_registry().open(uri_text, std::move(target));
}

std::shared_ptr<backend> open(std::string_view uri_text, capabilities required, std::shared_ptr<observer> target) {
  return default_registry().open(uri_text, required, std::move(target));
}

std::shared_ptr<backend> open(std::string_view uri_text, capabilities required, std::shared_ptr<observer> target,
                              std::error_code& ec) noexcept {
  return default_registry().open(uri_text, required, std::move(target), ec);
}

}  // namespace dlock
