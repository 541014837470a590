// The session monitor and the session-bound lease (session_lease.hpp).
#include "dlock_sql/session_lease.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "dlock/error.hpp"

namespace dlock::sql {

// ---------------------------------------------------------------- monitor

session_monitor::~session_monitor() {
  {
    std::lock_guard lk(m_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (!thread_.joinable()) return;
  // The last lease may die on this very thread (a lost callback that drops it): never join oneself.
  if (thread_.get_id() == std::this_thread::get_id())
    thread_.detach();
  else
    thread_.join();
}

void session_monitor::add(session_lease* l) {
  std::lock_guard lk(m_);
  leases_.push_back(l);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void session_monitor::remove(session_lease* l) noexcept {
  std::unique_lock lk(m_);
  // On the monitor's own thread (a lost callback released and dropped the lease during its
  // check) the check in progress is this call's caller: waiting for it would never end.
  if (thread_.get_id() != std::this_thread::get_id()) check_done_.wait(lk, [&] { return checking_ != l; });
  leases_.remove(l);
}

void session_monitor::loop() noexcept {
  std::unique_lock lk(m_);
  while (!stopping_) {
    wake_.wait_for(lk, tick_);
    if (!stopping_) check_each(lk);
  }
}

// Each lease is checked outside m_: a check may wait on the network (up to the lease's validity),
// and meanwhile new leases must still be added and others removed.
void session_monitor::check_each(std::unique_lock<std::mutex>& lk) noexcept {
  std::vector<session_lease*> round;
  try {
    round.assign(leases_.begin(), leases_.end());
  } catch (...) {
    return;  // out of memory: the next tick tries again; validity deadlines still fire
  }
  for (auto* l : round) {
    if (stopping_) return;
    if (std::find(leases_.begin(), leases_.end(), l) == leases_.end()) continue;  // removed meanwhile
    checking_ = l;
    lk.unlock();
    l->check();
    lk.lock();
    checking_ = nullptr;
    check_done_.notify_all();
  }
}

// ---------------------------------------------------------------- session

session::~session() {
  if (ended_) conn_.discard();  // it may still hold locks: closed, never back to the pool
}

void session::end() noexcept {
  if (ended_) return;
  ended_ = true;
  // Shut down, not closed: other leases' stop callbacks may still name this socket.
  if (conn_ && conn_->native_socket() >= 0) ::shutdown(conn_->native_socket(), SHUT_RDWR);
}

bool session::add_holder() noexcept {
  std::lock_guard lk(membership_);
  if (ended_ || cut_) return false;
  ++holders;
  return true;
}

session::lost_exit session::exit_of_lost(int fd, lost_exit& decided, socket_guard& bound) noexcept {
  std::lock_guard lk(membership_);
  if (decided != lost_exit::undecided) return decided;
  if (holders > 1 && !cut_ && !ended_) {
    decided = lost_exit::statement;
    bound.cut_at(std::chrono::steady_clock::now() + deadline_grace);
  } else {
    cut_ = true;
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    decided = lost_exit::cut;
  }
  return decided;
}

void session::give_back() noexcept {
  if (ended_) conn_.discard();
  conn_ = {};
  ended_ = true;
}

// ---------------------------------------------------------------- lease

namespace {
// How often a session is confirmed with a round trip: ttl/3, the watchdog's renewal cadence, so
// two checks can fail before the validity (ttl - drift after the last success) runs out.
std::chrono::milliseconds confirm_period(std::chrono::milliseconds ttl) {
  return std::max(ttl / 3, std::chrono::milliseconds{1});
}
}  // namespace

bool rebase_after_wait(connection& c, std::chrono::milliseconds ttl, std::chrono::steady_clock::time_point& start,
                       sql_error& err) noexcept {
  const auto now = std::chrono::steady_clock::now();
  if (now - start < confirm_period(ttl)) return true;
  result out;
  if (!c.execute("SELECT 1", {}, out, err)) return false;
  start = now;
  return true;
}

session_lease::session_lease(std::shared_ptr<session_monitor> monitor, std::string name, std::chrono::milliseconds ttl,
                             clock::time_point start, bool confirm, pool::handle h)
    : session_lease(std::move(monitor), std::move(name), ttl, start, confirm, std::make_shared<session>(std::move(h))) {
  session_->holders = 1;  // nobody else can see this session yet
}

session_lease::session_lease(std::shared_ptr<session_monitor> monitor, std::string name, std::chrono::milliseconds ttl,
                             clock::time_point start, bool confirm, std::shared_ptr<session> s)
    : lease_state(std::move(name), ttl, validity_after(start, ttl)),
      monitor_(std::move(monitor)),
      session_(std::move(s)),
      confirmed_basis_(start),
      next_confirm_(confirm ? start + confirm_period(ttl) : clock::time_point::max()),
      socket_(session_->conn() ? session_->conn()->native_socket() : -1),
      exit_bound_(socket_, socket_guard::only_by_cut_at{}) {
  when_lost_.emplace(lost_token(), on_lost{this});
}

void session_lease::start_watching() {
  monitor_->add(this);
  watched_ = true;
}

session_lease::~session_lease() {
  stop_watching();
  std::lock_guard lk(connection_mutex());
  // A derived class that did not end the session leaves a connection in an unknown state
  // (still holding its lock): end it rather than return it to the pool.
  if (attached_) end_session(false);
}

void session_lease::stop_watching() noexcept {
  if (!watched_) return;
  watched_ = false;
  monitor_->remove(this);
}

void session_lease::end_session(bool keep) noexcept {
  if (!attached_) return;
  when_lost_.reset();  // no exit is decided (nor its bound armed) from here on
  // Before the socket may be closed. A bound that fired shut the socket down: whatever the
  // give-back answered, the session is ending on the server, for every lease on it.
  if (exit_bound_.disarm()) keep = false;
  attached_ = false;
  if (session_->holders > 0) --session_->holders;
  if (!keep) session_->end();
  left_session();
  if (session_->holders == 0) session_->give_back_unless_kept();
}

void session_lease::do_release(std::error_code& ec) noexcept {
  std::lock_guard lk(connection_mutex());
  try {
    if (lost()) {  // it leaves its session now if still on it: shut down, or its lock given back
      leave_after_loss();
      set_error(ec, errc::not_owner,
                release_label() + ": the lease was lost (its session ended, or was not confirmed within the ttl)");
      return;
    }
    if (!connection()) {
      end_session(false);  // no-op unless the session ended under us
      set_error(ec, errc::not_owner, release_label() + ": " + std::string(freed_with_session()));
      return;
    }
  } catch (...) {  // out of memory formatting the message
    end_session(false);
    ec = make_error_code(errc::not_owner);
    return;
  }
  release_session(ec);
}

void session_lease::on_lost::operator()() const noexcept {
  (void)lease->session_->exit_of_lost(lease->socket_, lease->exit_, lease->exit_bound_);
  lease->monitor_->wake();
}

void session_lease::leave_after_loss() noexcept {
  if (!attached_) return;
  // The statement is bounded by exit_bound_: a session that cannot answer it within
  // deadline_grace of the loss is shut down (and with it the other leases' locks, which a silent
  // session could not keep anyway).
  if (session_->exit_of_lost(socket_, exit_, exit_bound_) == session::lost_exit::statement && connection()) {
    std::error_code ignored;
    release_session(ignored);
  }
  end_session(false);  // a no-op once release_session left; else the socket is shut down already
}

bool session_lease::confirm_session() noexcept {
  auto& s = *session_;
  // Another lease of this session confirmed it (or a statement of theirs proved it alive) after
  // this lease's last confirmation and recently enough: one SELECT 1 per session, not per lease.
  auto start = s.answered_at();
  if (!(start > confirmed_basis_ && clock::now() < start + confirm_period(ttl()))) {
    start = clock::now();
    result out;
    sql_error err;
    if (!s.conn()->execute("SELECT 1", {}, out, err)) return false;
    s.answered(start);
  }
  confirmed_basis_ = start;
  set_valid_until(validity_after(start, ttl()));
  next_confirm_ = start + confirm_period(ttl());
  return true;
}

void session_lease::check() noexcept {
  if (released()) return;
  if (lost()) {
    // The give-back must start well within its bound (deadline_grace from the loss): wait for the
    // other leases' short statements, but not for one stuck on a silent link (the bound ends it),
    // nor for a release in progress (it leaves the session itself).
    std::unique_lock lk(connection_mutex(), std::defer_lock);
    if (lk.try_lock_for(deadline_grace / 2)) leave_after_loss();
    return;
  }
  {
    // try_lock: a release in progress owns the connection; it will tell the holder itself. On a
    // shared session the mutex is busy with other leases' short statements: when a confirmation
    // is due, wait for them (they never wait on the server: waiters use sessions of their own).
    std::unique_lock lk(connection_mutex(), std::try_to_lock);
    if (!lk.owns_lock()) {
      if (clock::now() < next_confirm_) return;
      lk.lock();
    }
    if (!attached_) return;
    const bool closed = !connection() || !connection()->poll_alive();
    if (!closed && (clock::now() < next_confirm_ || confirm_session())) return;
    end_session(false);
  }
  // Outside the connection mutex: a lost callback may release this lease.
  mark_lost(make_error_code(errc::lock_lost));
}

}  // namespace dlock::sql
