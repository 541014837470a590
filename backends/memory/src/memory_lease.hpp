#pragma once
// One hold of a memory:// grant, of any kind (mutex, read, write, semaphore permits). A mutex's
// re-entries each get their own lease (one hold each), sharing the grant's id and fencing token.
#include <memory>

#include "dlock/spi.hpp"
#include "memory_table.hpp"

namespace dlock::memory {

class memory_lease final : public spi::lease_state {
 public:
  memory_lease(std::string name, std::chrono::milliseconds ttl, std::shared_ptr<table> owner_table, ticket t);
  ~memory_lease() override;

  std::optional<std::uint64_t> fencing_token() const noexcept override { return ticket_.token; }

 protected:
  void do_release(std::error_code& ec) noexcept override;
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override;

 private:
  std::shared_ptr<table> table_;
  ticket ticket_;
};

// One table call, as a lease: nullptr when not granted (or refused: ec says why), exceptions
// (allocation failures) mapped to errc::backend_error. For every kind's do_try_acquire and
// do_acquire_until.
template <class Call>
std::unique_ptr<spi::lease_state> lease_from(const std::string& name, std::chrono::milliseconds ttl,
                                             const std::shared_ptr<table>& owner_table, std::error_code& ec,
                                             Call&& call) noexcept {
  try {
    auto t = call();
    return t ? std::make_unique<memory_lease>(name, ttl, owner_table, std::move(*t)) : nullptr;
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, "memory lock '" + name + "': " + e.what());
    return nullptr;
  }
}

}  // namespace dlock::memory
