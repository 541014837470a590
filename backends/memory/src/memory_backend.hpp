#pragma once
// memory://[namespace]: the reference backend, one lock table per namespace inside this process.
#include <memory>
#include <string>

#include "capabilities.hpp"
#include "dlock/spi.hpp"
#include "counting_table.hpp"
#include "memory_table.hpp"

namespace dlock::memory {

// Names are table keys: any bytes, up to 64 KiB.
inline constexpr std::size_t memory_max_name_length = 64 * 1024;

// The namespace a memory:// URI names: "" for memory://, "ns" for memory://ns, "ns/sub" for
// memory://ns/sub. Throws errc::invalid_uri for a user, password, port or several hosts.
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

 private:
  std::string ns_;
  std::shared_ptr<table> table_;
  std::shared_ptr<counting_table> rw_table_;
  std::shared_ptr<counting_table> semaphore_table_;
};

// Test-only saboteur for the conformance hooks: frees the grant of `name` in namespace `ns`,
// marks its leases lost (errc::lock_lost) and hands the lock to the next waiter. False if free.
bool break_grant(const std::string& ns, const std::string& name);
// The probe for the conformance hooks: is `name` granted in namespace `ns` right now?
bool is_held(const std::string& ns, const std::string& name);
// The same for the reader-writer locks and semaphores of namespace `ns`: frees every grant of
// `name` (leases marked lost) and returns how many; counts the live grants of `name`.
std::size_t break_shared_grants(const std::string& ns, const std::string& name);
std::size_t shared_holders(const std::string& ns, const std::string& name);

}  // namespace dlock::memory
