#include "gateway.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <functional>
#include <stdexcept>
#include <stop_token>

#include "dlock/acquire_deadline.hpp"
#include "dlock/acquire_stop.hpp"
#include "dlock/detail/c_handle.hpp"
#include "dlock/error.hpp"

namespace dlock::etcd {

namespace {

constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

struct curl_global {
  curl_global() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};
void init_curl_once() { static const curl_global once; }

using easy_ptr = detail::c_handle<CURL, curl_easy_cleanup>;
using slist_ptr = detail::c_handle<curl_slist, curl_slist_free_all>;
using multi_ptr = detail::c_handle<CURLM, curl_multi_cleanup>;

std::size_t append_body(char* data, std::size_t size, std::size_t count, void* target) {
  static_cast<std::string*>(target)->append(data, size * count);
  return size * count;
}

slist_ptr headers_with(const std::string& token) {
  slist_ptr list(curl_slist_append(nullptr, "Content-Type: application/json"));
  if (!token.empty()) list.reset(curl_slist_append(list.release(), ("Authorization: " + token).c_str()));
  return list;
}

// A JSON POST of `body` to `url` on `c`, the answer handed to `write(..., target)` as it arrives.
// `body` and `headers` must outlive the transfer. NOSIGNAL: no SIGALRM from the resolver in a
// threaded program.
void set_json_post(CURL* c, const std::string& url, const std::string& body, curl_slist* headers,
                   curl_write_callback write, void* target, std::chrono::milliseconds connect_timeout) {
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, target);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
}

// What the gateway's error body says: grpc's code and the message.
struct server_error {
  int code = 0;
  std::string message;
};
server_error error_of(const std::string& body) {
  server_error e;
  const auto j = json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (j.contains("code") && j["code"].is_number_integer()) e.code = j["code"].get<int>();
    if (j.contains("message") && j["message"].is_string()) e.message = j["message"].get<std::string>();
    if (e.message.empty() && j.contains("error") && j["error"].is_string()) e.message = j["error"].get<std::string>();
  }
  if (e.message.empty()) e.message = body.substr(0, 200);
  return e;
}
constexpr int grpc_unavailable = 14, grpc_unauthenticated = 16, grpc_invalid_argument = 3;
bool token_refused(const server_error& e) {
  return e.code == grpc_unauthenticated || e.message.find("invalid auth token") != std::string::npos;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += alphabet[v >> 18];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  if (i < bytes.size()) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += alphabet[v >> 18];
    out += alphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? alphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64_decode(std::string_view text) {
  std::string out;
  unsigned v = 0;
  int bits = 0;
  for (const char c : text) {
    const auto at = alphabet.find(c);
    if (at == std::string_view::npos) continue;  // '=' padding
    v = (v << 6) | static_cast<unsigned>(at);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((v >> bits) & 0xff);
    }
  }
  return out;
}

std::int64_t int64_field(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return 0;
  const auto& v = object[key];
  if (v.is_string()) return std::stoll(v.get<std::string>());
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return 0;
}

// An easy handle driven by a multi handle of its own: the multi's poll can be woken from another
// thread (curl_multi_wakeup), which is how a stop request cuts a request in flight; the
// connection stays in the multi's cache for the next request on this handle.
struct gateway::handle {
  easy_ptr easy;
  multi_ptr multi;
};

gateway::gateway(gateway_options options) : options_(std::move(options)) {
  init_curl_once();
  if (options_.endpoints.empty())
    throw error(errc::invalid_uri, "etcd: the URI names no member (etcd://host:port,...)");
}

gateway::~gateway() = default;

std::unique_ptr<gateway::handle> gateway::borrow() {
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      auto h = std::move(idle_.back());
      idle_.pop_back();
      return h;
    }
  }
  auto h = std::make_unique<handle>();
  h->easy.reset(curl_easy_init());
  h->multi.reset(curl_multi_init());
  if (!h->easy || !h->multi) throw error(errc::backend_unavailable, "etcd: curl init failed");
  return h;
}

void gateway::give_back(std::unique_ptr<handle> h) {
  std::lock_guard lock(mutex_);
  if (idle_.size() < 64) idle_.push_back(std::move(h));
}

namespace {

struct reply {
  CURLcode rc = CURLE_OK;
  bool stopped = false;  // cut by the stop request of this thread's acquire
  long status = 0;
  std::string body;
};

// The request's bound: the command timeout, cut to what is left of this thread's acquire
// (io_deadline; none outside an acquire). Zero when nothing is left.
std::chrono::milliseconds time_left(std::chrono::milliseconds command_timeout) {
  const auto until = spi::io_deadline();
  if (until == steady::time_point::max()) return command_timeout;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - steady::now());
  return std::clamp(left, std::chrono::milliseconds::zero(), command_timeout);
}

// One POST on the handle's multi, its poll woken by a stop request on this thread's acquire: the
// transfer then ends at once, its connection dropped with the handle. (A CURLOPT_XFERINFOFUNCTION
// that returns non-zero on a stop is not enough: curl calls it about once a second while a transfer
// is silent, and a stop then took 0.9 s to end one; the wakeup takes well under a millisecond.)
reply post(CURL* c, CURLM* m, const std::string& url, const std::string& body, const std::string& token,
           std::chrono::milliseconds connect_timeout, std::chrono::milliseconds timeout) {
  reply r;
  const auto headers = headers_with(token);
  curl_easy_reset(c);
  set_json_post(c, url, body, headers.get(), append_body, &r.body, std::min(connect_timeout, timeout));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
  if (curl_multi_add_handle(m, c) != CURLM_OK) {
    r.rc = CURLE_FAILED_INIT;
    return r;
  }
  const std::stop_callback wake(spi::current_stop_token(), [m] { curl_multi_wakeup(m); });
  while (true) {
    int running = 0;
    if (curl_multi_perform(m, &running) != CURLM_OK) {
      r.rc = CURLE_FAILED_INIT;
      break;
    }
    if (running == 0) {
      r.rc = CURLE_GOT_NOTHING;
      int left = 0;
      while (CURLMsg* done = curl_multi_info_read(m, &left))
        if (done->msg == CURLMSG_DONE && done->easy_handle == c) r.rc = done->data.result;
      break;
    }
    if (spi::stop_requested()) {
      r.stopped = true;
      break;
    }
    // curl's own timeouts are in its timer: perform() sees them when the poll returns, at the
    // latest after the timeout curl_multi_poll is given here.
    curl_multi_poll(m, nullptr, 0, 1000, nullptr);
  }
  curl_multi_remove_handle(m, c);
  if (r.rc == CURLE_OK && !r.stopped) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  return r;
}

}  // namespace

std::string gateway::authenticate(const std::string& endpoint) {
  auto h = borrow();
  const json body = {{"name", options_.user}, {"password", options_.password}};
  const auto timeout = time_left(options_.command_timeout);
  if (timeout <= std::chrono::milliseconds::zero())
    throw error(errc::backend_unavailable, "etcd: the acquire's deadline passed before authenticating");
  const auto r = post(h->easy.get(), h->multi.get(), "http://" + endpoint + "/v3/auth/authenticate", body.dump(), "",
                      options_.connect_timeout, timeout);
  if (r.stopped) throw error(errc::backend_unavailable, "etcd: authenticating at " + endpoint + ": stopped");
  if (r.rc == CURLE_OK) give_back(std::move(h));
  if (r.rc != CURLE_OK)
    throw error(errc::backend_unavailable, "etcd: authenticating at " + endpoint + ": " + curl_easy_strerror(r.rc));
  if (r.status != 200) {
    const auto e = error_of(r.body);
    if (e.code == grpc_unavailable) throw error(errc::backend_unavailable, "etcd: " + endpoint + ": " + e.message);
    throw error(errc::authentication_failed, "etcd: user '" + options_.user + "' refused: " + e.message);
  }
  const auto j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("token") || !j["token"].is_string())
    throw error(errc::backend_error, "etcd: /v3/auth/authenticate answered without a token");
  return j["token"].get<std::string>();
}

std::string gateway::token() {
  if (options_.user.empty()) return {};
  {
    std::lock_guard lock(mutex_);
    if (!token_.empty()) return token_;
  }
  auto fresh = authenticate(options_.endpoints[preferred_.load() % options_.endpoints.size()]);
  std::lock_guard lock(mutex_);
  token_ = fresh;
  return fresh;
}

void gateway::forget_token(const std::string& stale) {
  std::lock_guard lock(mutex_);
  if (token_ == stale) token_.clear();
}

json gateway::call(const std::string& path, const json& body) {
  const auto text = body.dump();
  const std::size_t n = options_.endpoints.size();
  const std::size_t first = preferred_.load();
  std::string last_failure;
  bool token_retried = false;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t at = (first + i) % n;
    const auto& endpoint = options_.endpoints[at];
    std::string auth;
    try {
      auth = token();
    } catch (const error& e) {
      if (e.code() != make_error_code(errc::backend_unavailable)) throw;
      last_failure = e.detail();
      preferred_.store((at + 1) % n);
      continue;
    }
    const auto timeout = time_left(options_.command_timeout);
    if (timeout <= std::chrono::milliseconds::zero())
      throw error(errc::backend_unavailable, "etcd: the acquire's deadline passed before " + path +
                                                 (last_failure.empty() ? "" : " (last: " + last_failure + ")"));
    auto h = borrow();
    const auto r =
        post(h->easy.get(), h->multi.get(), "http://" + endpoint + path, text, auth, options_.connect_timeout, timeout);
    // The acquire was stopped: its caller stops waiting now, not after the other members.
    if (r.stopped) throw error(errc::backend_unavailable, "etcd: " + path + " to " + endpoint + ": stopped");
    if (r.rc != CURLE_OK) {  // the member is down or cut off: its connection is not reused
      last_failure = endpoint + ": " + curl_easy_strerror(r.rc);
      preferred_.store((at + 1) % n);
      continue;
    }
    give_back(std::move(h));
    if (r.status == 200) {
      preferred_.store(at);
      auto j = json::parse(r.body, nullptr, false);
      if (j.is_discarded()) throw error(errc::backend_error, "etcd: " + path + " answered with no JSON");
      return j;
    }
    const auto e = error_of(r.body);
    if (e.code == grpc_unavailable) {  // no leader, no quorum, or shutting down: another member may serve
      last_failure = endpoint + ": " + e.message;
      preferred_.store((at + 1) % n);
      continue;
    }
    if (!auth.empty() && token_refused(e) && !token_retried) {
      forget_token(auth);
      token_retried = true;
      --i;  // the same member again, with a fresh token
      continue;
    }
    if (e.code == grpc_unauthenticated ||
        (e.code == grpc_invalid_argument && e.message.find("user name") != std::string::npos)) {
      if (options_.user.empty())
        throw error(errc::authentication_failed,
                    "etcd: the server has authentication enabled and this URI gives no user (it answered '" +
                        e.message + "'): give user:password in the URI (etcd://user:password@host:2379), in " +
                        "--uri-file or in DLOCK_URI");
      throw error(errc::authentication_failed, "etcd: " + path + ": " + e.message);
    }
    throw error(errc::backend_error, "etcd: " + path + ": " + e.message);
  }
  throw error(errc::backend_unavailable, "etcd: no member answered " + path + " (last: " + last_failure + ")");
}

namespace {

// The watch stream: one JSON object a line, each {"result": WatchResponse}.
struct watch_stream {
  std::string pending;
  bool deleted = false;
  bool ended = false;  // canceled or compacted: the caller re-reads instead
  void take(std::string_view data) {
    pending.append(data);
    std::size_t eol;
    while ((eol = pending.find('\n')) != std::string::npos) {
      const auto line = pending.substr(0, eol);
      pending.erase(0, eol + 1);
      const auto j = json::parse(line, nullptr, false);
      if (!j.is_object()) continue;
      const auto& result = j.contains("result") ? j["result"] : j;
      if (result.contains("events"))
        for (const auto& ev : result["events"])
          if (ev.contains("type") && ev["type"] == "DELETE") deleted = true;
      if ((result.contains("canceled") && result["canceled"] == true) || int64_field(result, "compact_revision") > 0 ||
          j.contains("error"))
        ended = true;
    }
  }
};

std::size_t take_stream(char* data, std::size_t size, std::size_t count, void* target) {
  static_cast<watch_stream*>(target)->take(std::string_view(data, size * count));
  return size * count;
}

}  // namespace

watch_end gateway::wait_deleted(const std::string& key, std::int64_t from, steady::time_point until,
                                std::chrono::milliseconds every, const std::function<void()>& between) {
  return wait_deleted_in(key, {}, from, until, every, between);
}

watch_end gateway::wait_deleted_in(const std::string& key, const std::string& range_end, std::int64_t from,
                                   steady::time_point until, std::chrono::milliseconds every,
                                   const std::function<void()>& between) {
  json request = {
      {"create_request",
       {{"key", base64_encode(key)}, {"start_revision", std::to_string(from)}, {"filters", json::array({"NOPUT"})}}}};
  if (!range_end.empty()) request["create_request"]["range_end"] = base64_encode(range_end);
  const auto text = request.dump();
  auto next_between = steady::now() + every;
  const std::size_t n = options_.endpoints.size();
  std::size_t failures = 0;
  while (true) {
    const std::size_t at = preferred_.load() % n;
    const auto auth = token();
    watch_stream stream;
    easy_ptr easy(curl_easy_init());
    multi_ptr multi(curl_multi_init());
    if (!easy || !multi) throw error(errc::backend_unavailable, "etcd: curl init failed");
    const auto headers = headers_with(auth);
    const auto url = "http://" + options_.endpoints[at] + "/v3/watch";
    CURL* c = easy.get();
    set_json_post(c, url, text, headers.get(), take_stream, &stream, options_.connect_timeout);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_multi_add_handle(multi.get(), c);
    const std::stop_callback wake(spi::current_stop_token(), [m = multi.get()] { curl_multi_wakeup(m); });
    bool transfer_done = false;
    while (true) {
      int running = 0;
      curl_multi_perform(multi.get(), &running);
      if (stream.deleted) {
        curl_multi_remove_handle(multi.get(), c);
        return watch_end::deleted;
      }
      if (stream.ended) {
        curl_multi_remove_handle(multi.get(), c);
        return watch_end::deleted;  // the caller reads the keys again either way
      }
      if (running == 0) {
        transfer_done = true;
        break;
      }
      const auto now = steady::now();
      if (spi::stop_requested()) {
        curl_multi_remove_handle(multi.get(), c);
        return watch_end::stopped;
      }
      if (now >= until) {
        curl_multi_remove_handle(multi.get(), c);
        return watch_end::deadline;
      }
      if (now >= next_between) {
        between();
        next_between = steady::now() + every;
      }
      const auto slice = std::min({until - now, next_between - now, steady::duration(spi::stop_poll_slice)});
      const int ms = static_cast<int>(
          std::max<std::int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(slice).count()));
      curl_multi_poll(multi.get(), nullptr, 0, ms, nullptr);
    }
    curl_multi_remove_handle(multi.get(), c);
    // The member closed the stream (it went down, or refused): the next member, from the same revision.
    if (transfer_done) {
      preferred_.store((at + 1) % n);
      if (++failures >= n) return watch_end::deleted;  // the caller's read says whether any member serves
    }
  }
}

}  // namespace dlock::etcd
