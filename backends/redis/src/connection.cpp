#include "connection.hpp"

#include <openssl/sha.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

#include "dlock/error.hpp"

namespace dlock::redis {

namespace {

timeval to_timeval(std::chrono::milliseconds d) noexcept {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

std::string hex(const unsigned char* data, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(digits[data[i] >> 4]);
    out.push_back(digits[data[i] & 0xf]);
  }
  return out;
}

// hiredis wants argv/argvlen arrays; string_views give both without copying.
struct argv_buffers {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  void add(std::string_view s) {
    argv.push_back(s.data());
    lens.push_back(s.size());
  }
};

}  // namespace

std::string endpoint::label() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

script::script(std::string src) : source(std::move(src)) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(source.data()), source.size(), digest);
  sha1 = hex(digest, sizeof digest);
}

std::string_view error_text(const redisReply* r) noexcept {
  if (r == nullptr || r->type != REDIS_REPLY_ERROR || r->str == nullptr) return {};
  return {r->str, r->len};
}

bool is_error(const redisReply* r, std::string_view prefix) noexcept {
  return error_text(r).substr(0, prefix.size()) == prefix;
}

void connection::fail(std::error_code& ec, std::string_view doing) noexcept {
  broken_ = true;
  const char* what = context_ && context_->errstr[0] != '\0' ? context_->errstr : "connection failed";
  const bool protocol = context_ && context_->err == REDIS_ERR_PROTOCOL;
  set_error(ec, protocol ? errc::backend_error : errc::backend_unavailable,
            "redis " + where_.label() + ": " + std::string(doing) + ": " + what +
                (protocol ? " (the server does not speak the Redis protocol)" : ""));
}

std::unique_ptr<connection> connection::open(const endpoint& where, std::error_code& ec) noexcept {
  try {
    context_ptr ctx(redisConnectWithTimeout(where.host.c_str(), where.port, to_timeval(where.connect_timeout)));
    if (!ctx) {
      set_error(ec, errc::backend_unavailable, "redis " + where.label() + ": out of memory creating a connection");
      return nullptr;
    }
    if (ctx->err != 0) {
      set_error(ec, errc::backend_unavailable,
                "redis " + where.label() + ": cannot connect within " + std::to_string(where.connect_timeout.count()) +
                    "ms: " + ctx->errstr);
      return nullptr;
    }
    redisSetTimeout(ctx.get(), to_timeval(where.command_timeout));
    redisEnableKeepAlive(ctx.get());
    std::unique_ptr<connection> c(new connection(where, std::move(ctx)));
    if (where.password) {
      std::vector<std::string_view> auth{"AUTH"};
      if (!where.user.empty()) auth.push_back(where.user);
      auth.push_back(*where.password);
      auto r = c->command(auth, ec);
      if (ec) {
        set_error(ec, ec, "redis " + where.label() + ": no answer to AUTH (is it a Redis server?): " + last_error_message());
        return nullptr;
      }
      if (r->type == REDIS_REPLY_ERROR) {
        const auto text = error_text(r.get());
        // WRONGPASS (ACL), "ERR invalid password" (old servers), "ERR AUTH <password> called
        // without any password configured". The reply never contains the password.
        set_error(ec, errc::authentication_failed,
                  "redis " + where.label() + ": authentication as '" + (where.user.empty() ? "default" : where.user) +
                      "' refused: " + std::string(text));
        return nullptr;
      }
    }
    auto pong = c->command({"PING"}, ec);
    if (ec) {
      set_error(ec, ec, "redis " + where.label() + ": no answer to PING (is it a Redis server?): " + last_error_message());
      return nullptr;
    }
    if (is_error(pong.get(), "NOAUTH")) {
      set_error(ec, errc::authentication_failed,
                "redis " + where.label() + ": the server requires a password; give one as redis://user:password@host");
      return nullptr;
    }
    if (pong->type != REDIS_REPLY_STATUS || std::string_view(pong->str, pong->len) != "PONG") {
      set_error(ec, errc::backend_error, "redis " + where.label() + ": unexpected answer to PING: " +
                                             std::string(error_text(pong.get())) + " (expected PONG from a Redis server)");
      return nullptr;
    }
    // Named "dlock-<pid>" so CLIENT LIST shows whose connection it is (and a test can kill only
    // this process's connections). One round trip per new connection, none per lock operation.
    {
      const auto name = "dlock-" + std::to_string(::getpid());
      auto r = c->command({"CLIENT", "SETNAME", name}, ec);
      if (ec) return nullptr;
    }
    if (where.db != 0) {
      const auto db = std::to_string(where.db);
      auto r = c->command({"SELECT", db}, ec);
      if (ec) return nullptr;
      if (r->type == REDIS_REPLY_ERROR) {
        set_error(ec, errc::backend_error,
                  "redis " + where.label() + ": SELECT " + db + " refused: " + std::string(error_text(r.get())));
        return nullptr;
      }
    }
    return c;
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_unavailable, "redis " + where.label() + ": " + e.what());
    return nullptr;
  }
}

reply_ptr connection::command(const std::vector<std::string_view>& args, std::error_code& ec) noexcept {
  if (!append(args) || !flush()) {
    fail(ec, "sending a command");
    return nullptr;
  }
  return read(ec);
}

bool connection::append(const std::vector<std::string_view>& args) noexcept {
  try {
    argv_buffers b;
    for (auto a : args) b.add(a);
    return redisAppendCommandArgv(context_.get(), static_cast<int>(b.argv.size()), b.argv.data(), b.lens.data()) ==
           REDIS_OK;
  } catch (...) {
    return false;
  }
}

bool connection::append_eval(const script& s, const std::vector<std::string_view>& keys,
                             const std::vector<std::string_view>& args) noexcept {
  try {
    const auto nkeys = std::to_string(keys.size());
    std::vector<std::string_view> all{"EVALSHA", s.sha1, nkeys};
    all.insert(all.end(), keys.begin(), keys.end());
    all.insert(all.end(), args.begin(), args.end());
    return append(all);
  } catch (...) {
    return false;
  }
}

bool connection::flush() noexcept {
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(context_.get(), &done) != REDIS_OK) {
      broken_ = true;
      return false;
    }
  }
  return true;
}

reply_ptr connection::read(std::error_code& ec) noexcept {
  void* raw_reply = nullptr;
  if (redisGetReply(context_.get(), &raw_reply) != REDIS_OK || raw_reply == nullptr) {
    fail(ec, "reading a reply");
    return nullptr;
  }
  return reply_ptr(static_cast<redisReply*>(raw_reply));
}

reply_ptr connection::eval(const script& s, const std::vector<std::string_view>& keys,
                           const std::vector<std::string_view>& args, std::error_code& ec) noexcept {
  if (!append_eval(s, keys, args) || !flush()) {
    fail(ec, "sending EVALSHA");
    return nullptr;
  }
  auto r = read(ec);
  if (!r || !is_error(r.get(), "NOSCRIPT")) return r;
  // The server lost its script cache (restart, SCRIPT FLUSH): send the source once; EVAL also
  // caches it, so the next EVALSHA hits again.
  try {
    const auto nkeys = std::to_string(keys.size());
    std::vector<std::string_view> all{"EVAL", s.source, nkeys};
    all.insert(all.end(), keys.begin(), keys.end());
    all.insert(all.end(), args.begin(), args.end());
    return command(all, ec);
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis: out of memory");
    return nullptr;
  }
}

std::int64_t connection::client_id(std::error_code& ec) noexcept {
  auto r = command({"CLIENT", "ID"}, ec);
  if (ec) return -1;
  return r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
}

pool::pool(endpoint where, std::size_t max_size) : where_(std::move(where)), max_size_(max_size ? max_size : 1) {}

pool::handle::~handle() {
  if (owner_ && c_) owner_->give_back(std::move(c_));
}

pool::handle pool::checkout(std::error_code& ec) noexcept {
  try {
    std::unique_lock lock(mutex_);
    const auto deadline = std::chrono::steady_clock::now() + where_.connect_timeout;
    while (idle_.empty() && open_count_ >= max_size_) {
      if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
          open_count_ >= max_size_) {
        set_error(ec, errc::backend_unavailable,
                  "redis " + where_.label() + ": all " + std::to_string(max_size_) +
                      " pooled connections stayed busy; raise pool_size");
        return {};
      }
    }
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return handle(shared_from_this(), std::move(c));
    }
    ++open_count_;
    lock.unlock();
    auto c = connection::open(where_, ec);
    if (!c) {
      lock.lock();
      --open_count_;
      returned_.notify_one();
      return {};
    }
    return handle(shared_from_this(), std::move(c));
  } catch (...) {
    set_error(ec, errc::backend_unavailable, "redis " + where_.label() + ": out of memory");
    return {};
  }
}

void pool::give_back(std::unique_ptr<connection> c) noexcept {
  std::lock_guard lock(mutex_);
  if (c->broken()) {
    --open_count_;  // dropped: the next checkout reconnects
  } else {
    try {
      idle_.push_back(std::move(c));
    } catch (...) {
      --open_count_;
    }
  }
  returned_.notify_one();
}

}  // namespace dlock::redis
