#pragma once
// Raw hiredis for the redis tests: they look at and fault the server with their own connections,
// so that what they observe does not depend on the code under test.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "dlock/detail/c_handle.hpp"
#include "dlock/uri.hpp"

namespace dlock::testing::raw_redis {

using context_ptr = dlock::detail::c_handle<redisContext, redisFree>;
using reply_ptr = dlock::detail::c_handle<redisReply, freeReplyObject>;

inline timeval timeval_of(std::chrono::milliseconds d) {
  return timeval{static_cast<time_t>(d.count() / 1000), static_cast<suseconds_t>(d.count() % 1000 * 1000)};
}

// A connection to the first host of a redis:// URI (no AUTH, no SELECT); a test failure when it
// cannot be reached.
inline context_ptr connect(const std::string& uri_text) {
  const auto u = dlock::uri::parse(uri_text);
  context_ptr c(redisConnect(u.hosts()[0].host.c_str(), u.hosts()[0].port_or(6379)));
  EXPECT_TRUE(c && !c->err) << "cannot reach " << u.redacted();
  return c;
}

// A connection to 127.0.0.1:`port` that gives up connecting after a second, and a command after
// `command_timeout`: a node the test stopped or froze must not hang it. Check c && !c->err.
inline context_ptr connect_local(int port, std::chrono::milliseconds command_timeout) {
  context_ptr c(redisConnectWithTimeout("127.0.0.1", port, timeval{1, 0}));
  if (c && !c->err) redisSetTimeout(c.get(), timeval_of(command_timeout));
  return c;
}

// A command as redis-cli sends it, every argument binary-safe; nullptr without a connection or a reply.
inline reply_ptr command(redisContext* c, const std::vector<std::string>& args) {
  if (c == nullptr || c->err) return nullptr;
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return reply_ptr(
      static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

// The text of a bulk-string reply (INFO, CLIENT LIST); "" for any other reply or none.
inline std::string bulk_text(const reply_ptr& r) {
  return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : std::string();
}

// This process's pooled connections (named dlock-<pid>), their lines of CLIENT LIST.
inline std::vector<std::string> this_process_clients(redisContext* c) {
  const std::string text = bulk_text(command(c, {"CLIENT", "LIST", "TYPE", "normal"}));
  const std::string mine = " name=dlock-" + std::to_string(::getpid()) + " ";
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < text.size();) {
    const auto end = std::min(text.find('\n', at), text.size());
    auto line = text.substr(at, end - at);
    at = end + 1;
    if (line.find(mine) != std::string::npos) lines.push_back(std::move(line));
  }
  return lines;
}

// A connection subscribed to channels, read one message at a time.
class subscriber {
 public:
  subscriber(context_ptr c, const std::vector<std::string>& channels) : c_(std::move(c)) {
    for (const auto& channel : channels) {
      auto confirmed = command(c_.get(), {"SUBSCRIBE", channel});
      subscribed_ = subscribed_ && confirmed && confirmed->type == REDIS_REPLY_ARRAY;
    }
  }
  // Every SUBSCRIBE was confirmed.
  bool subscribed() const noexcept { return subscribed_; }

  // The next message's payload, or "" after `timeout`.
  std::string next_payload(std::chrono::milliseconds timeout) {
    auto m = next(timeout);
    return m ? std::string(m->element[2]->str, m->element[2]->len) : std::string();
  }
  // The next message as "<channel> <payload>", or "" after `timeout`.
  std::string next_channel_and_payload(std::chrono::milliseconds timeout) {
    auto m = next(timeout);
    return m ? std::string(m->element[1]->str, m->element[1]->len) + " " +
                   std::string(m->element[2]->str, m->element[2]->len)
             : std::string();
  }

 private:
  // A "message" reply, or nullptr.
  reply_ptr next(std::chrono::milliseconds timeout) {
    if (!c_ || c_->err) return nullptr;
    redisSetTimeout(c_.get(), timeval_of(timeout));
    void* reply = nullptr;
    if (redisGetReply(c_.get(), &reply) != REDIS_OK || reply == nullptr) return nullptr;
    reply_ptr m(static_cast<redisReply*>(reply));
    if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 || std::string(m->element[0]->str) != "message")
      return nullptr;
    return m;
  }

  context_ptr c_;
  bool subscribed_ = true;
};

}  // namespace dlock::testing::raw_redis
