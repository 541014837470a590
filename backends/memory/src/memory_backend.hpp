#pragma once
// memory://[namespace]: the reference backend, one lock table per namespace inside this process.
#include <memory>
#include <string>

#include "capabilities.hpp"
#include "dlock/spi.hpp"
#include "memory_table.hpp"

namespace dlock::memory {

// Names are table keys: any bytes, up to 64 KiB.
inline constexpr std::size_t memory_max_name_length = 64 * 1024;

// The namespace a memory:// URI names: "" for memory:// (and memory:///), "ns" for memory://ns (and
// memory://ns/), "ns/sub" for memory://ns/sub. Case-sensitive, as lock names are. Throws errc::invalid_uri for a user,
// password, port or several hosts.
std::string namespace_of(const uri& u);

class memory_backend final : public backend {
 public:
  memory_backend(const uri& u, const lock_options& defaults);
  const std::string& ns() const noexcept { return ns_; }

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;
  std::unique_ptr<rw_lock> do_make_rw_lock(std::string name, lock_options options) override;
  std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max_count,
                                               lock_options options) override;
  lock_info do_inspect(const std::string& name) override;
  std::vector<std::string> do_list(const std::string& prefix) override;
  std::vector<lock_holder> do_force_release(const std::string& name) override;

 private:
  std::string ns_;
  std::shared_ptr<table> table_;  // the namespace's: mutexes, reader-writer locks and semaphores
};

// Test-only saboteur for the conformance hooks: frees every grant of `name` in namespace `ns`
// (its mutex, readers, writer or semaphore permits), marks their leases lost (errc::lock_lost)
// and hands the name to the next waiters. False if nothing held it.
bool break_grant(const std::string& ns, const std::string& name);
// The probe for the conformance hooks: is `name` granted (as anything) in namespace `ns` right now?
bool is_held(const std::string& ns, const std::string& name);

}  // namespace dlock::memory
