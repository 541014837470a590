#include "pipeline.hpp"

#include <algorithm>
#include <optional>
#include <stop_token>

#include "dlock/acquire_stop.hpp"
#include "dlock/error.hpp"

namespace dlock::redis {

namespace {

using clock = std::chrono::steady_clock;

// A command in the protocol's own form (RESP arrays of bulk strings), built by the caller so the
// leader only copies bytes into the connection's buffer.
void append_bulk(std::string& out, std::string_view s) {
  out += '$';
  out += std::to_string(s.size());
  out += "\r\n";
  out += s;
  out += "\r\n";
}

std::string format_command(const std::vector<std::string_view>& args) {
  std::string out;
  out += '*';
  out += std::to_string(args.size());
  out += "\r\n";
  for (auto a : args) append_bulk(out, a);
  return out;
}

std::string eval_command(std::string_view verb, std::string_view script_ref, const std::vector<std::string_view>& keys,
                         const std::vector<std::string_view>& args) {
  std::string out;
  out.reserve(64 + script_ref.size() + 32 * (keys.size() + args.size()));
  out += '*';
  out += std::to_string(3 + keys.size() + args.size());
  out += "\r\n";
  append_bulk(out, verb);
  append_bulk(out, script_ref);
  append_bulk(out, std::to_string(keys.size()));
  for (auto k : keys) append_bulk(out, k);
  for (auto a : args) append_bulk(out, a);
  return out;
}

}  // namespace

struct pipeline::node {
  enum class place { queued, promoted, taken };

  // Set by the caller.
  std::string command;               // formatted
  std::string trailer;               // formatted; empty: none (its reply is read right after the command's)
  const script* fallback = nullptr;  // EVALSHA: sent again as EVAL on NOSCRIPT
  const std::vector<std::string_view>* keys = nullptr;
  const std::vector<std::string_view>* args = nullptr;
  clock::time_point deadline;
  std::chrono::milliseconds min_server_age{0};

  // Set by the leader before it finishes the node (the caller reads them after `finished`).
  outcome out;
  std::error_code ec;
  std::string message;

  place where = place::queued;  // under pipeline::mutex_

  // The caller's own wake-up, so a leader finishing a batch never makes its callers contend for
  // the queue's mutex.
  std::mutex m;
  std::condition_variable cv;
  bool finished = false;  // under m
  bool nudged = false;    // under m: promoted to lead
  bool stopped = false;   // under m: its caller's acquire was asked to stop while it was queued

  void fail(std::error_code code, std::string text) noexcept {
    ec = code;
    try {
      message = std::move(text);
    } catch (...) {
    }
  }
  void finish() noexcept {
    std::lock_guard lock(m);
    finished = true;
    cv.notify_one();  // under m: the caller may return (and the node go) as soon as m is free
  }
};

late_replies::late_replies(pool::handle c, std::size_t owed) noexcept : owed_(owed) {
  // Only a read timeout leaves the stream intact: after any other failure nothing more will come,
  // and the pool may open a fresh connection at once.
  if (c && c->timed_out()) c_ = std::move(c);
}

reply_ptr late_replies::take(std::size_t index, std::chrono::milliseconds slice, std::stop_token stop,
                             clock::time_point give_up_at) noexcept {
  std::lock_guard lock(mutex_);
  if (!read_all_tried_) {
    read_all_tried_ = true;
    try {
      got_.reserve(owed_);
      if (c_ && c_->resume_after_timeout(slice)) {
        while (got_.size() < owed_ && !stop.stop_requested() && clock::now() < give_up_at) {
          std::error_code ec;
          if (auto r = c_->read(ec)) {
            got_.push_back(std::move(r));
          } else if (!c_->resume_after_timeout(slice)) {
            break;
          }
        }
      }
    } catch (...) {
    }
    if (got_.size() < owed_) {
      c_ = {};  // replies still owed: the pool drops it
    } else {
      c_->set_read_timeout(c_->where().command_timeout);
    }
  }
  return index < got_.size() ? std::move(got_[index]) : nullptr;
}

bool late_replies::with_connection(const std::function<void(connection&)>& use) noexcept {
  std::lock_guard lock(mutex_);
  if (!c_ || !read_all_tried_ || got_.size() < owed_) return false;
  try {
    use(*c_);
  } catch (...) {
  }
  return true;
}

pipeline::pipeline(std::shared_ptr<pool> connections)
    : pool_(std::move(connections)), lanes_(std::max<std::size_t>(pool_->max_size(), 1)) {}

pipeline::outcome pipeline::eval(const script& s, const std::vector<std::string_view>& keys,
                                 const std::vector<std::string_view>& args, clock::time_point deadline,
                                 std::chrono::milliseconds min_server_age, std::error_code& ec, bool source_only,
                                 const std::vector<std::string_view>& trailer) noexcept {
  node me;
  try {
    me.command = source_only ? eval_command("EVAL", s.source, keys, args) : eval_command("EVALSHA", s.sha1, keys, args);
    if (!trailer.empty()) me.trailer = format_command(trailer);
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis: out of memory");
    return {};
  }
  if (!source_only) me.fallback = &s;
  me.keys = &keys;
  me.args = &args;
  me.deadline = deadline;
  me.min_server_age = min_server_age;
  submit(me);
  return finish_call(me, ec);
}

pipeline::outcome pipeline::command(const std::vector<std::string_view>& args, clock::time_point deadline,
                                    std::error_code& ec) noexcept {
  node me;
  try {
    me.command = format_command(args);
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis: out of memory");
    return {};
  }
  me.deadline = deadline;
  submit(me);
  return finish_call(me, ec);
}

// The message goes to the caller's thread (last_error_message() is per thread).
pipeline::outcome pipeline::finish_call(node& me, std::error_code& ec) noexcept {
  if (me.ec) set_error(ec, me.ec, std::move(me.message));
  return std::move(me.out);
}

void pipeline::submit(node& me) noexcept {
  std::unique_lock lock(mutex_);
  if (leaders_ < lanes_) {
    ++leaders_;
    lock.unlock();
    lead(me);
    return;
  }
  try {
    queue_.push_back(&me);
  } catch (...) {
    lock.unlock();
    me.fail(make_error_code(errc::backend_unavailable), "redis: out of memory");
    return;
  }
  lock.unlock();
  // A request queued inside a stoppable acquire is withdrawn at its stop request as at its
  // deadline: never sent. Registered with no mutex held (a stop already requested runs the
  // callback here), and ended before the node goes.
  struct wake_at_stop {
    node* n;
    void operator()() const noexcept {
      std::lock_guard own(n->m);
      n->stopped = true;
      n->cv.notify_one();
    }
  };
  std::optional<std::stop_callback<wake_at_stop>> on_stop;
  if (abandoned_at_stop()) on_stop.emplace(spi::current_stop_token(), wake_at_stop{&me});
  const bool forever = me.deadline == clock::time_point::max();
  for (;;) {
    bool deadline_passed = false, stopped = false;
    {
      std::unique_lock own(me.m);
      const auto woken = [&] { return me.finished || me.nudged || me.stopped; };
      if (forever)
        me.cv.wait(own, woken);
      else
        deadline_passed = !me.cv.wait_until(own, me.deadline, woken);
      if (me.finished) return;
      stopped = me.stopped;
    }
    lock.lock();
    if (me.where == node::place::promoted) {
      lock.unlock();
      if (!stopped) {
        lead(me);
      } else {  // its turn to lead came with the stop: the next one leads instead
        me.out.withdrawn = true;
        hand_off();
      }
      return;
    }
    if (me.where == node::place::taken) break;  // sent (or being sent): its leader answers it
    if (deadline_passed || stopped) {
      queue_.erase(std::find(queue_.begin(), queue_.end(), &me));
      lock.unlock();
      me.out.withdrawn = true;
      return;
    }
    lock.unlock();
  }
  lock.unlock();
  // A leader has it: the reply, or the connection's failure within command_timeout.
  std::unique_lock own(me.m);
  me.cv.wait(own, [&] { return me.finished; });
}

// The oldest request queued leads the next batch; with none queued, one leader fewer.
void pipeline::hand_off() noexcept {
  std::lock_guard lock(mutex_);
  if (queue_.empty()) {
    --leaders_;
    return;
  }
  auto* next = queue_.front();
  queue_.pop_front();
  next->where = node::place::promoted;
  // Under mutex_: once promoted, `next` stays alive until it has led, and it reads `where` under
  // mutex_ only after this nudge or its own deadline.
  std::lock_guard own(next->m);
  next->nudged = true;
  next->cv.notify_one();
}

void pipeline::lead(node& me) noexcept {
  std::vector<node*> batch;
  std::error_code ec;
  // Waits only while callers outside the pipeline (renewal batches, checks, undos) hold
  // connections: the pipeline itself never has more batches in flight than the pool has room.
  auto c = pool_->checkout(me.deadline, ec);
  if (!c) {
    if (clock::now() >= me.deadline)
      me.out.withdrawn = true;
    else
      me.fail(ec, last_error_message());
    hand_off();
    return;
  }
  try {
    batch.reserve(16);
    batch.push_back(&me);
    std::lock_guard lock(mutex_);
    batch.reserve(queue_.size() + 1);
    for (auto* n : queue_) {
      n->where = node::place::taken;
      batch.push_back(n);
    }
    queue_.clear();
  } catch (...) {
    // out of memory: this batch is the leader's own request; the queued ones follow in the next
  }
  const auto now = clock::now();
  std::vector<node*> to_send;
  try {
    to_send.reserve(batch.size());
    for (auto* n : batch) {
      if (n->deadline <= now) {
        n->out.withdrawn = true;
        continue;
      }
      if (n->min_server_age > std::chrono::milliseconds::zero()) {
        const auto young =
            std::chrono::ceil<std::chrono::milliseconds>(c->server_started_by() + n->min_server_age - now);
        if (young > std::chrono::milliseconds::zero()) {
          n->out.server_young = young;
          n->out.run_id = c->run_id();
          continue;
        }
      }
      if (!c->append_formatted(n->command) || (!n->trailer.empty() && !c->append_formatted(n->trailer))) {
        n->fail(make_error_code(errc::backend_unavailable), "redis " + pool_->where().label() + ": out of memory");
        continue;
      }
      to_send.push_back(n);
    }
  } catch (...) {
    for (auto* n : batch)
      if (!n->ec && !n->out.withdrawn && n->out.server_young.count() == 0 &&
          std::find(to_send.begin(), to_send.end(), n) == to_send.end())
        n->fail(make_error_code(errc::backend_unavailable), "redis: out of memory");
  }
  exchange(c, to_send);
  c = {};  // back to the pool (dropped if broken) before the next batch checks one out
  hand_off();
  for (auto* n : batch)
    if (n != &me) n->finish();
}

// Writes `nodes`' commands (appended already) in one write, reads their replies in order, and
// sends the ones answered NOSCRIPT again with the source.
void pipeline::exchange(pool::handle& c, std::vector<node*>& nodes) noexcept {
  if (nodes.empty()) return;
  batches_.fetch_add(1, std::memory_order_relaxed);
  requests_.fetch_add(nodes.size(), std::memory_order_relaxed);
  // Every request from `from` on is left without its reply (`from`'s trailer only, when
  // `from_trailer`): their replies are owed in order, commands and trailers alike.
  const auto fail_from = [&](std::size_t from, bool from_trailer, std::error_code ec, const std::string& message) {
    std::size_t owed = 0;
    std::vector<std::size_t> at(nodes.size(), static_cast<std::size_t>(-1));
    try {
      for (auto i = from; i < nodes.size(); ++i) {
        if (!(i == from && from_trailer)) at[i] = owed++;
        if (!nodes[i]->trailer.empty()) ++owed;
      }
    } catch (...) {
    }
    std::shared_ptr<late_replies> late;
    try {
      late = std::make_shared<late_replies>(std::move(c), owed);
    } catch (...) {
      c = {};
    }
    for (auto i = from; i < nodes.size(); ++i) {
      nodes[i]->fail(ec, message);
      nodes[i]->out.late = late;
      nodes[i]->out.late_index = at[i];
    }
  };
  if (!c->flush()) {
    std::error_code ec;
    set_error(ec, errc::backend_unavailable,
              "redis " + pool_->where().label() + ": sending " + std::to_string(nodes.size()) +
                  " pipelined commands: " + (c->raw() && c->raw()->errstr[0] ? c->raw()->errstr : "connection failed"));
    fail_from(0, false, ec, last_error_message());
    return;
  }
  std::vector<node*> without_script;
  bool replica = false;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    std::error_code ec;
    auto r = c->read(ec);
    if (!r) {
      const auto& message = last_error_message();
      // The ones answered NOSCRIPT did not run: they fail, with nothing to read late.
      for (auto* n : without_script) n->fail(ec, message);
      fail_from(i, false, ec, message);
      return;
    }
    reply_ptr trailer;
    if (!nodes[i]->trailer.empty()) {
      trailer = c->read(ec);
      if (!trailer) {
        const auto& message = last_error_message();
        for (auto* n : without_script) n->fail(ec, message);
        nodes[i]->out.reply = std::move(r);
        fail_from(i, true, ec, message);
        return;
      }
    }
    if (nodes[i]->fallback && is_error(r.get(), "NOSCRIPT")) {
      try {
        without_script.push_back(nodes[i]);
        continue;
      } catch (...) {
      }
    }
    if (is_error(r.get(), "READONLY")) {
      // A replica now (a failover while the connection was open): nothing ran. Not an answer to
      // judge but an outage: waiting forms try again, on a connection to the master.
      replica = true;
      nodes[i]->fail(make_error_code(errc::backend_unavailable),
                     "redis " + c->where().label() + ": " + std::string(error_text(r.get())) +
                         " (the server is a replica now: the master moved; its connections are closed and the "
                         "next ones go to the master)");
      continue;
    }
    nodes[i]->out.reply = std::move(r);
    nodes[i]->out.trailer = std::move(trailer);
  }
  if (replica) {
    c->discard();
    pool_->retire_all();
  }
  if (without_script.empty()) return;
  // The server lost its script cache (restart, SCRIPT FLUSH): those again with the source (EVAL
  // caches it, so the next EVALSHA hits), in this batch's turn on this connection.
  std::vector<node*> again;
  for (auto* n : without_script) {
    try {
      n->command = eval_command("EVAL", n->fallback->source, *n->keys, *n->args);
      n->fallback = nullptr;
      if (c->append_formatted(n->command) && (n->trailer.empty() || c->append_formatted(n->trailer))) {
        again.push_back(n);
        continue;
      }
    } catch (...) {
    }
    n->fail(make_error_code(errc::backend_unavailable), "redis: out of memory");
  }
  exchange(c, again);
}

}  // namespace dlock::redis
