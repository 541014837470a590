#include "connection.hpp"

#include <fcntl.h>
#include <openssl/sha.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stop_token>

#include "dlock/acquire_stop.hpp"
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

// The value of `field` in an INFO reply ("field:value\r\n" lines), or empty.
std::string_view info_field(std::string_view info, std::string_view field) {
  for (std::size_t at = 0; at < info.size();) {
    auto end = info.find('\n', at);
    if (end == std::string_view::npos) end = info.size();
    auto line = info.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > field.size() && line.substr(0, field.size()) == field && line[field.size()] == ':')
      return line.substr(field.size() + 1);
    at = end + 1;
  }
  return {};
}

// Whether the TCP connect of a non-blocking context completed (0) or its error, waiting at most
// until `deadline` and looking at the acquire's stop request every stop_poll_slice. ETIMEDOUT at
// the deadline, ECANCELED at a stop.
int finish_connect(int fd, std::chrono::steady_clock::time_point deadline) noexcept {
  for (;;) {
    if (spi::stop_requested()) return ECANCELED;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return ETIMEDOUT;
    pollfd p{fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min(left, spi::stop_poll_slice).count()));
    if (ready < 0 && errno != EINTR) return errno;
    if (ready <= 0) continue;
    int error = 0;
    socklen_t size = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) return errno;
    return error;
  }
}

// Connects within where.connect_timeout. When abandoned_at_stop(), the TCP connect is driven
// without blocking and ends at the stop request; the socket is then made blocking, as hiredis'
// blocking API expects.
redisContext* connect_context(const endpoint& where) noexcept {
  if (!abandoned_at_stop())
    return redisConnectWithTimeout(where.host.c_str(), where.port, to_timeval(where.connect_timeout));
  const auto deadline = std::chrono::steady_clock::now() + where.connect_timeout;
  redisContext* ctx = redisConnectNonBlock(where.host.c_str(), where.port);
  if (ctx == nullptr || ctx->err != 0) return ctx;
  const int error = finish_connect(ctx->fd, deadline);
  if (error != 0 && error != ECANCELED && error != ETIMEDOUT) {
    // Refused or unreachable on the first address only: hiredis' blocking connect goes on to the
    // name's other addresses ("localhost": ::1, then 127.0.0.1) in what is left of the timeout.
    redisFree(ctx);
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return redisConnectWithTimeout(where.host.c_str(), where.port,
                                   to_timeval(std::max(left, std::chrono::milliseconds{1})));
  }
  const int flags = ::fcntl(ctx->fd, F_GETFL);
  if (error != 0 || flags < 0 || ::fcntl(ctx->fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    ctx->err = REDIS_ERR_IO;
    const char* why = error == ECANCELED   ? "abandoned: the acquire was asked to stop"
                      : error == ETIMEDOUT ? "Connection timed out"
                                           : std::strerror(error != 0 ? error : errno);
    std::snprintf(ctx->errstr, sizeof ctx->errstr, "%s", why);
    return ctx;
  }
  ctx->flags |= REDIS_BLOCK;
  return ctx;
}

// While alive, when abandoned_at_stop(): the stop request shuts the socket's reading side down,
// so a handshake command (AUTH, PING, ...) that gets no answer reads end-of-file at once. Only
// the reading side: hiredis writes with write(2), which would raise SIGPIPE on a socket shut for
// writing. A connection being opened holds no lock: nothing is left behind, provided a connection
// whose socket was shut is never handed out (see stop_watching).
class handshake_stopper {
 public:
  explicit handshake_stopper(int fd) {
    if (abandoned_at_stop()) on_stop_.emplace(spi::current_stop_token(), shut_down{fd, &fired_});
  }
  handshake_stopper(const handshake_stopper&) = delete;
  handshake_stopper& operator=(const handshake_stopper&) = delete;
  // Ends the watch: the callback has run to its end or never will. Whether it shut the socket:
  // a stop that came after the handshake's last answer was read still leaves a connection that
  // sends its next command and cannot read the answer. Pooled, it would run an acquire whose
  // grant nobody receives, and a reentrant or fair grant cannot be undone without its answer.
  bool stop_watching() noexcept {
    on_stop_.reset();
    return fired_.load(std::memory_order_acquire);
  }

 private:
  struct shut_down {
    int fd;
    std::atomic<bool>* fired;
    void operator()() const noexcept {
      fired->store(true, std::memory_order_release);
      ::shutdown(fd, SHUT_RD);
    }
  };
  std::atomic<bool> fired_{false};
  // Declared after the connection that owns `fd` (destroyed first): the callback then never
  // shuts down a descriptor number that was closed and handed to another socket.
  std::optional<std::stop_callback<shut_down>> on_stop_;
};

}  // namespace

bool abandoned_at_stop() noexcept { return spi::current_stop_token().stop_possible() && !spi::stop_requested(); }

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

void connection::fail(std::error_code& ec, const std::string& doing) noexcept {
  broken_ = true;
  const char* what = context_ && context_->errstr[0] != '\0' ? context_->errstr : "connection failed";
  const bool protocol = context_ && context_->err == REDIS_ERR_PROTOCOL;
  set_error(ec, protocol ? errc::backend_error : errc::backend_unavailable,
            "redis " + where_.label() + ": " + doing + ": " + what +
                (protocol ? " (the server does not speak the Redis protocol)" : ""));
}

std::unique_ptr<connection> connection::open(const endpoint& where, std::error_code& ec) noexcept {
  try {
    context_ptr ctx(connect_context(where));
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
    const int fd = ctx->fd;
    std::unique_ptr<connection> c(new connection(where, std::move(ctx)));
    handshake_stopper stopper(fd);
    if (where.password) {
      std::vector<std::string_view> auth{"AUTH"};
      if (!where.user.empty()) auth.push_back(where.user);
      auth.push_back(*where.password);
      auto r = c->command(auth, ec);
      if (ec) {
        set_error(ec, ec,
                  "redis " + where.label() + ": no answer to AUTH (is it a Redis server?): " + last_error_message());
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
      set_error(ec, ec,
                "redis " + where.label() + ": no answer to PING (is it a Redis server?): " + last_error_message());
      return nullptr;
    }
    if (is_error(pong.get(), "NOAUTH")) {
      set_error(ec, errc::authentication_failed,
                "redis " + where.label() + ": the server requires a password; give one as redis://user:password@host");
      return nullptr;
    }
    if (pong->type != REDIS_REPLY_STATUS || std::string_view(pong->str, pong->len) != "PONG") {
      set_error(ec, errc::backend_error,
                "redis " + where.label() + ": unexpected answer to PING: " + std::string(error_text(pong.get())) +
                    " (expected PONG from a Redis server)");
      return nullptr;
    }
    // Named "dlock-<pid>" so CLIENT LIST shows whose connection it is (and a test can kill only
    // this process's connections). One round trip per new connection, none per lock operation.
    {
      const auto name = "dlock-" + std::to_string(::getpid());
      auto r = c->command({"CLIENT", "SETNAME", name}, ec);
      if (ec) return nullptr;
    }
    if (where.learn_server_start && !c->learn_server_start(ec)) return nullptr;
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
    if (stopper.stop_watching()) {
      set_error(ec, errc::backend_unavailable,
                "redis " + where.label() + ": connection abandoned: the acquire was asked to stop");
      return nullptr;
    }
    return c;
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_unavailable, "redis " + where.label() + ": " + e.what());
    return nullptr;
  }
}

bool connection::learn_server_start(std::error_code& ec) noexcept {
  auto r = command({"INFO", "server"}, ec);
  const auto answered = std::chrono::steady_clock::now();
  if (ec) return false;
  const auto info = r->type == REDIS_REPLY_STRING ? std::string_view(r->str, r->len) : std::string_view();
  const auto uptime_text = info_field(info, "uptime_in_seconds");
  std::int64_t uptime = -1;
  std::from_chars(uptime_text.data(), uptime_text.data() + uptime_text.size(), uptime);
  run_id_ = std::string(info_field(info, "run_id"));
  if (uptime < 0 || run_id_.empty()) {
    set_error(ec, errc::backend_error,
              "redis " + where_.label() + ": INFO server gave no run_id and uptime_in_seconds (" +
                  (r->type == REDIS_REPLY_ERROR ? std::string(error_text(r.get())) : std::string("no such fields")) +
                  "); they are needed to wait one ttl after a restart: allow INFO to this user, or set "
                  "wait_after_restart=false if the server persists every write (appendfsync always)");
    return false;
  }
  // Redis counts uptime_in_seconds as the difference of two whole-second wall-clock readings (its
  // cached time now, and its start, each rounded down), so it says 1 as soon as the wall clock
  // passes a second boundary, possibly a few milliseconds after the start: it exceeds the real
  // age by up to (not including) one second. Taking it for the age placed the start up to a
  // second too early, and with a 1s ttl a restarted server granted 0.1s after it started. It was
  // counted at some instant before `answered` (and its cached clock may lag, which only lowers
  // it): the server started before `answered - uptime + 1s`.
  server_started_by_ = answered - std::chrono::seconds(uptime) + std::chrono::seconds(1);
  return true;
}

bool connection::resume_after_timeout(std::chrono::milliseconds read_timeout) noexcept {
  if (!timed_out_ || !context_) return false;
  context_->err = 0;
  context_->errstr[0] = '\0';
  broken_ = false;
  timed_out_ = false;
  return redisSetTimeout(context_.get(), to_timeval(read_timeout)) == REDIS_OK;
}

void connection::set_read_timeout(std::chrono::milliseconds read_timeout) noexcept {
  if (context_) redisSetTimeout(context_.get(), to_timeval(read_timeout));
}

bool connection::closed_by_server() const noexcept {
  if (!context_ || context_->fd < 0) return true;
  // Idle: nothing may arrive, so anything readable (EOF, RST, stray bytes) means it is unusable.
  pollfd p{context_->fd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
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
    if (redisAppendCommandArgv(context_.get(), static_cast<int>(b.argv.size()), b.argv.data(), b.lens.data()) !=
        REDIS_OK)
      return false;
    ++unanswered_;
    return true;
  } catch (...) {
    return false;
  }
}

bool connection::append_formatted(std::string_view command) noexcept {
  if (redisAppendFormattedCommand(context_.get(), command.data(), command.size()) != REDIS_OK) return false;
  ++unanswered_;
  return true;
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
    // A blocking read that hit SO_RCVTIMEO fails with EAGAIN: the server may answer later.
    const int read_errno = errno;
    timed_out_ = context_->err == REDIS_ERR_IO && (read_errno == EAGAIN || read_errno == EWOULDBLOCK);
    fail(ec, timed_out_ ? "no reply within command_timeout " + std::to_string(where_.command_timeout.count()) + "ms"
                        : std::string("reading a reply"));
    return nullptr;
  }
  if (unanswered_ > 0) --unanswered_;
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
  return eval_source(s, keys, args, ec);
}

reply_ptr connection::eval_source(const script& s, const std::vector<std::string_view>& keys,
                                  const std::vector<std::string_view>& args, std::error_code& ec) noexcept {
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

}  // namespace dlock::redis
