#pragma once
// The backend registry, keyed by URI scheme (Arrow's FileSystemFromUri, tooz's drivers).
// Statically linked backends register through register_builtin, which walks the list of backends
// the program was linked with (each backend target adds itself at link time); a
// backend built as a shared module is loaded at run time by its scheme from the plugin path.
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/backend.hpp"
#include "dlock/capabilities.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/uri.hpp"

namespace dlock {

struct backend_info {
  std::string scheme;  // "redis", "mysql+forupdate", "memory", "file"
  capabilities caps;   // declared up front; the suite asserts the opened backend matches
  // The reader-writer lock's and the semaphore's capabilities, where the backend makes them;
  // registry::add folds their offer bits (read_write, semaphore, writer_preferred) into caps.
  primitive_caps primitives{};
  lock_scope scope = lock_scope::network;
  std::string example_uri;  // shown in unknown_scheme errors and by `dlock backends`
  std::string summary;      // one line: the strategy, e.g. "SET NX PX, compare-and-delete unlock"
  // Query keys the backend accepts beyond the common ones (ttl, watchdog, renew, poll).
  std::vector<std::string> parameters;
  // Not empty for a broken strategy kept to show how it fails (the well-known SETNX-then-EXPIRE,
  // plain-DEL release...): what goes wrong. open() refuses such a scheme unless the URI says
  // unsafe=true, and names this reason.
  std::string unsafe_because{};
  // Not empty where a grant's ttl is not lock_options::ttl (the `ttl` parameter): what sets it
  // instead, e.g. ZooKeeper's "the session_timeout parameter: a grant lives as long as its
  // session". Tools that take a ttl refuse one for such a scheme and say this.
  std::string ttl_set_by{};
  // Connects. `defaults` holds the common options already parsed from the URI.
  std::function<std::shared_ptr<backend>(const uri&, const lock_options& defaults)> open;
};

// Query keys every backend accepts; parsed by the registry into lock_options.
const std::vector<std::string>& common_parameters();
// Parses the common keys of `u` into lock_options (throws errc::invalid_uri naming the bad one).
lock_options parse_common_options(const uri& u);

class registry {
 public:
  registry() = default;
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  void add(backend_info info);  // a duplicate scheme throws errc::invalid_argument

  // parse -> find the scheme (loading a plugin if needed) -> check `required` and the query keys
  // before connecting -> info.open. Throws dlock::error; every message shows the redacted URI only.
  [[nodiscard]] std::shared_ptr<backend> open(std::string_view uri_text, capabilities required = {}) const;
  [[nodiscard]] std::shared_ptr<backend> open(std::string_view uri_text, capabilities required,
                                              std::error_code& ec) const noexcept;
  // The same, the backend told to report to `target` before it is returned (backend::set_observer).
  [[nodiscard]] std::shared_ptr<backend> open(std::string_view uri_text, std::shared_ptr<observer> target) const;
  [[nodiscard]] std::shared_ptr<backend> open(std::string_view uri_text, capabilities required,
                                              std::shared_ptr<observer> target) const;
  [[nodiscard]] std::shared_ptr<backend> open(std::string_view uri_text, capabilities required,
                                              std::shared_ptr<observer> target, std::error_code& ec) const noexcept;

  std::vector<backend_info> list() const;  // sorted by scheme
  bool contains(std::string_view scheme) const;
  // The scheme's entry, loading its module from the plugin folders if it is not registered yet;
  // nullopt for an unknown scheme. Connects nowhere.
  std::optional<backend_info> find(std::string_view scheme) const;

  // Plugins: a shared module exporting `dlock_plugin_register` (see spi.hpp, DLOCK_PLUGIN).
  // Where open() meets an unknown scheme it loads, from the first plugin folder that has one,
  // the one module of that scheme: libdlock_<scheme>.so ('+' and '-' become '_'), or the module
  // whose index libdlock_<name>.schemes lists the scheme (one module may register several:
  // libdlock_redis.so has redlock; dlock_add_backend writes the index). No other module is
  // loaded. Folders come from add_plugin_dir and from DLOCK_PLUGIN_PATH (':'-separated), read by
  // default_registry().
  void add_plugin_dir(std::filesystem::path dir);
  void add_plugin_dirs_from_environment();                // DLOCK_PLUGIN_PATH, ':'-separated
  void load_plugin(const std::filesystem::path& module);  // throws errc::unknown_scheme if unloadable
  // Loads every libdlock_*.so in the plugin folders (for `dlock backends`).
  void load_all_plugins();

 private:
  bool try_load_plugin_for(std::string_view scheme) const;

  mutable std::shared_mutex mutex_;
  mutable std::map<std::string, backend_info, std::less<>> by_scheme_;  // plugins add on demand
  std::vector<std::filesystem::path> plugin_dirs_;
};

// The process-wide registry with every backend the program links (dlock::all, or only the
// dlock::<backend> targets it names) and DLOCK_PLUGIN_PATH applied.
// default_registry, register_builtin and open are defined in dlock::builtin, which every backend
// target links: a program linking dlock::redis alone can dlock::open("redis://...").
registry& default_registry();
// Registers the statically linked backends: every dlock::<backend> target this program links.
void register_builtin(registry& r);

// default_registry().open(...).
// The error_code forms return nullptr and set ec (the message: last_error_message()).
[[nodiscard]] std::shared_ptr<backend> open(std::string_view uri_text, capabilities required = {});
[[nodiscard]] std::shared_ptr<backend> open(std::string_view uri_text, capabilities required,
                                            std::error_code& ec) noexcept;
[[nodiscard]] std::shared_ptr<backend> open(std::string_view uri_text, std::error_code& ec) noexcept;
// With an observer set on the backend (dlock/observer.hpp):
//   auto backend = dlock::open("redis://127.0.0.1:6379", std::make_shared<my_observer>());
[[nodiscard]] std::shared_ptr<backend> open(std::string_view uri_text, std::shared_ptr<observer> target);
[[nodiscard]] std::shared_ptr<backend> open(std::string_view uri_text, capabilities required,
                                            std::shared_ptr<observer> target);
[[nodiscard]] std::shared_ptr<backend> open(std::string_view uri_text, capabilities required,
                                            std::shared_ptr<observer> target, std::error_code& ec) noexcept;

}  // namespace dlock
