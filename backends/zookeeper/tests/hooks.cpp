// Conformance hooks for zookeeper://: the saboteur expires the holder's session from outside (a
// second handle with the same session id and password, then closed: the classic trick); the probe
// lists the lock nodes under the name's parent with a raw client.
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "../src/name_mapping.hpp"
#include "../src/sequence.hpp"
#include "../src/zk_lease.hpp"
#include "dlock/uri.hpp"
#include "dlock_test/hooks.hpp"

namespace {

std::string hosts_of(const dlock::uri& u) {
  std::string hosts;
  for (const auto& h : u.hosts()) hosts += (hosts.empty() ? "" : ",") + h.host + ":" + std::to_string(h.port_or(2181));
  return hosts;
}

struct zh_close {
  void operator()(zhandle_t* zh) const noexcept { zookeeper_close(zh); }
};
using zh_ptr = std::unique_ptr<zhandle_t, zh_close>;

bool still_connecting(int state) {
  return state == 0 || state == ZOO_NOTCONNECTED_STATE || state == ZOO_CONNECTING_STATE ||
         state == ZOO_ASSOCIATING_STATE;
}

// Waits (up to 5 s) until the handle leaves the connecting states; returns the state it reached.
int settle(zhandle_t* zh) {
  int state = zoo_state(zh);
  for (int i = 0; i < 200 && still_connecting(state); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    state = zoo_state(zh);
  }
  return state;
}

zh_ptr open_handle(const dlock::uri& u, const clientid_t* id) {
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  zh_ptr zh(zookeeper_init(hosts_of(u).c_str(), nullptr, 4000, id, nullptr, 0));
  if (!zh) throw std::runtime_error("zookeeper hooks: zookeeper_init failed");
  return zh;
}

zh_ptr connect(const dlock::uri& u) {
  auto zh = open_handle(u, nullptr);
  if (settle(zh.get()) != ZOO_CONNECTED_STATE) throw std::runtime_error("zookeeper hooks: no session");
  return zh;
}

}  // namespace

namespace dlock::zookeeper::testing {
// Connecting with the holder's session moves the session to this handle; closing it then ends the
// session. The holder's client reconnects at once and may take the session back before the close,
// which then ends nothing: so try again until a handle given that session id is told it expired.
void expire_session(const std::string& text, const clientid_t& id) {
  const auto u = dlock::uri::parse(text);
  for (int attempt = 0; attempt < 50; ++attempt) {
    auto zh = open_handle(u, &id);
    const int state = settle(zh.get());
    if (state == ZOO_EXPIRED_SESSION_STATE) return;
    if (state != ZOO_CONNECTED_STATE) throw std::runtime_error("zookeeper hooks: cannot reach the server");
  }
  throw std::runtime_error("zookeeper hooks: the holder's session outlived 50 closes");
}
}  // namespace dlock::zookeeper::testing

namespace {

void break_lock(const std::string& text, const dlock::lease& held) {
  const auto id = dlock::zookeeper::session_of(*held.state());
  if (!id) throw std::runtime_error("zookeeper hooks: not a zookeeper lease");
  dlock::zookeeper::testing::expire_session(text, *id);
}

bool is_held(const std::string& text, std::string_view name) {
  const auto u = dlock::uri::parse(text);
  auto zh = connect(u);
  std::string root = u.path();
  while (!root.empty() && root.back() == '/') root.pop_back();
  String_vector children{0, nullptr};
  const int rc = zoo_get_children(zh.get(), dlock::zookeeper::parent_path(root, name).c_str(), 0, &children);
  bool held = false;
  if (rc == ZOK)
    for (int i = 0; i < children.count; ++i) held = held || dlock::zookeeper::sequence_of(children.data[i]).has_value();
  deallocate_String_vector(&children);
  if (rc != ZOK && rc != ZNONODE) throw std::runtime_error(std::string("zookeeper hooks: ") + zerror(rc));
  return held;
}

}  // namespace

DLOCK_TEST_HOOKS("zookeeper", {.break_lock = break_lock,
                               .is_held_on_server = is_held,
                               .validity_kept_alive = true,
                               .inspection = {.inspect = true, .list = true, .force_release = true}});
