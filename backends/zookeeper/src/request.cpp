#include "request.hpp"

#include <utility>

namespace dlock::zookeeper::request {

namespace {

void fill_names(std::vector<std::string>& out, const String_vector* names) {
  if (!names) return;
  for (int i = 0; i < names->count; ++i) out.emplace_back(names->data[i]);
}

void children_answered(int rc, const String_vector* names, const void* data) {
  pending<std::vector<std::string>>::answer(data, rc, [&](std::vector<std::string>& out) { fill_names(out, names); });
}

}  // namespace

children_request::children_request(session& s, const std::string& path, bool watch)
    : pending_([&](const void* data) {
        return watch ? zoo_awget_children(s.handle(), path.c_str(), &session::watcher, &s, &children_answered, data)
                     : zoo_aget_children(s.handle(), path.c_str(), 0, &children_answered, data);
      }) {}

int children_request::wait(clock::time_point deadline, std::vector<std::string>& out) {
  out.clear();
  const int rc = pending_.wait(deadline);
  if (rc == ZOK) out = std::move(pending_.value());
  return rc;
}

int data(session& s, const std::string& path, clock::time_point deadline, std::string& out, Stat* stat) {
  out.clear();
  using node_read = std::pair<std::string, Stat>;
  pending<node_read> request([&](const void* context) {
    return zoo_aget(
        s.handle(), path.c_str(), 0,
        [](int rc, const char* value, int length, const Stat* read, const void* context) {
          pending<node_read>::answer(context, rc, [&](node_read& got) {
            if (value && length > 0) got.first.assign(value, static_cast<std::size_t>(length));
            if (read) got.second = *read;
          });
        },
        context);
  });
  const int rc = request.wait(deadline);
  if (rc == ZOK) {
    out = std::move(request.value().first);
    if (stat) *stat = request.value().second;
  }
  return rc;
}

int create(session& s, const std::string& path, std::string_view data, const ACL_vector* acl, int mode,
           clock::time_point deadline, created_node* out) {
  pending<created_node> request([&](const void* context) {
    return zoo_acreate2(
        s.handle(), path.c_str(), data.data(), data.data() ? static_cast<int>(data.size()) : -1, acl, mode,
        [](int rc, const char* made, const Stat* stat, const void* context) {
          pending<created_node>::answer(context, rc, [&](created_node& node) {
            if (made) node.path = made;
            if (stat) node.stat = *stat;
          });
        },
        context);
  });
  const int rc = request.wait(deadline);
  if (rc == ZOK && out) *out = std::move(request.value());
  return rc;
}

int children(session& s, const std::string& path, clock::time_point deadline, std::vector<std::string>& out,
             bool watch) {
  return children_request(s, path, watch).wait(deadline, out);
}

int exists(session& s, const std::string& path, clock::time_point deadline, Stat* out, bool watch) {
  pending<Stat> request([&](const void* context) {
    return zoo_awexists(
        s.handle(), path.c_str(), watch ? &session::watcher : nullptr, watch ? &s : nullptr,
        [](int rc, const Stat* stat, const void* context) {
          pending<Stat>::answer(context, rc, [&](Stat& st) {
            if (stat) st = *stat;
          });
        },
        context);
  });
  const int rc = request.wait(deadline);
  if (rc == ZOK && out) *out = request.value();
  return rc;
}

int remove(session& s, const std::string& path, clock::time_point deadline) {
  struct none {};
  pending<none> request([&](const void* context) {
    return zoo_adelete(
        s.handle(), path.c_str(), -1,
        [](int rc, const void* context) { pending<none>::answer(context, rc, [](none&) {}); }, context);
  });
  return request.wait(deadline);
}

}  // namespace dlock::zookeeper::request
