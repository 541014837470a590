#pragma once
#include <optional>
// mysql+getlock://: MariaDB/MySQL named locks (GET_LOCK / RELEASE_LOCK). Leases share a few
// pooled connections (a connection holds any number of named locks since MariaDB 10.0.2 / MySQL
// 5.7; a local guard keeps one process from taking the same name twice through one connection);
// a caller that must wait does so on a connection of its own. The server frees the locks when
// their connection ends, queues waiters of GET_LOCK(name, timeout) itself, and knows nothing of ttl.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "connection.hpp"
#include "dlock/spi.hpp"
#include "dlock_sql/pool.hpp"

namespace dlock::sql {
class session_monitor;
class session_share;
}  // namespace dlock::sql

namespace dlock::mysql {

class getlock_backend final : public backend {
 public:
  // What the backend's locks and leases share (leases keep it alive past the backend).
  struct shared {
    std::shared_ptr<dlock::sql::pool> connections;  // sql_common's pool; a lease holds a dedicated connection
    std::shared_ptr<dlock::sql::session_monitor> monitor;
    std::shared_ptr<dlock::sql::session_share> share;  // the connections leases share
    std::chrono::milliseconds command_timeout;
    // GET_LOCK, the check of the semaphore table and the fencing token, one statement (binds the
    // key, the key, the wait): the token, 0 (not granted) or -1 (the name was a semaphore's).
    std::string get_lock_sql;
    std::string token_sql;  // NEXTVAL of the sequence alone
    // The semaphores' table (getlock_semaphore.hpp): its name quoted, the max_count of a name.
    std::string semaphores_table;
    std::string max_count_sql;
    // A semaphore's slot: GET_LOCK(slot, 0), then IS_USED_LOCK(the name) and the token (binds the
    // name's key, the slot's key, the wait): the token, 0 (not granted) or -1 (the name is held
    // as a mutex); and the record of the name in the semaphores' table (binds key, max_count).
    std::string slot_sql;
    std::string register_sql;
  };

  // The pool keys, command_timeout, sequence= (default dlock_getlock_fence), semaphore_table=
  // (default dlock_getlock_semaphores) and create_sequence=.
  static std::vector<std::string> parameters();
  getlock_backend(const uri& u, const lock_options& defaults);

 protected:
  std::unique_ptr<distributed_lock> do_make_lock(std::string name, lock_options options) override;
  // N GET_LOCK slots (getlock_semaphore.hpp). No do_make_rw_lock: GET_LOCK has no shared mode.
  std::unique_ptr<semaphore> do_make_semaphore(std::string name, std::uint32_t max_count,
                                               lock_options options) override;
  // IS_USED_LOCK(key): the holding connection, named "connection <id>" (a named lock records no
  // owner id); no waiters (the server's queue is not readable without performance_schema).
  // force_release: KILL CONNECTION of the holder, which frees every named lock it held.
  lock_info do_inspect(const std::string& name) override;
  std::vector<lock_holder> do_force_release(const std::string& name) override;

 private:
  std::optional<std::string> holding_connection(const std::string& name);
  std::shared_ptr<const shared> shared_;
};

}  // namespace dlock::mysql
