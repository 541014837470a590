#pragma once
// redlock://h1:p1,h2:p2,h3:p3: Redlock over N independent masters (redis-py key layout on each).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "background_thread.hpp"
#include "connection.hpp"
#include "dlock/spi.hpp"

namespace dlock::redis {

struct redlock_state {
  std::vector<std::shared_ptr<pool>> masters;
  std::string prefix;
  // Grant nothing on a master younger than the ttl (see redis_settings.hpp).
  bool wait_after_restart = true;
  std::size_t quorum() const noexcept { return masters.size() / 2 + 1; }
  // Undoes grants whose replies were lost. Tasks hold a plain pointer to this; last, so its thread
  // is joined before the members above go.
  background_thread background;
};

class redlock_backend final : public backend {
 public:
  redlock_backend(const uri& u, const lock_options& defaults);

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;
  // Per master; the holder is the value (the grant's token) a majority holds.
  lock_info do_inspect(const std::string& name) override;
  std::vector<std::string> do_list(const std::string& prefix) override;
  std::vector<lock_holder> do_force_release(const std::string& name) override;

 private:
  std::optional<lock_holder> majority_holder(const std::string& key) const;
  std::shared_ptr<redlock_state> state_;
};

}  // namespace dlock::redis
