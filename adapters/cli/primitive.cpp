#include "primitive.hpp"

#include "dlock/semaphore.hpp"

namespace dlock::cli {

primitive_request parse_primitive(const args& a) {
  const bool shared = a.flag("shared"), write = a.flag("write");
  const bool permits = a.get("permits").has_value(), of = a.get("of").has_value();
  primitive_request p;
  if (shared && write) throw usage_error("--shared and --write are the two sides of one reader-writer lock: give one");
  if ((shared || write) && (permits || of))
    throw usage_error(std::string(shared ? "--shared" : "--write") + " and --" + (permits ? "permits" : "of") +
                      " choose different primitives (a reader-writer lock, a semaphore): give one");
  if (shared) p.what = primitive_request::kind::read;
  if (write) p.what = primitive_request::kind::write;
  if (!permits && !of) return p;
  if (!of)
    throw usage_error("--permits " + *a.get("permits") +
                      " needs --of M, the semaphore's number of permits (the same M in every process using the name)");
  if (!permits) throw usage_error("--of " + *a.get("of") + " needs --permits N, how many of its permits to take");
  constexpr long most = max_semaphore_count;
  const long m = a.integer("of", 0, 0, most);
  if (m == 0) throw usage_error("--of 0: a semaphore has at least 1 permit (1 to " + std::to_string(most) + ")");
  const long n = a.integer("permits", 0, 0, most);
  if (n == 0) throw usage_error("--permits 0: take at least 1 permit");
  if (n > m)
    throw usage_error("--permits " + std::to_string(n) + " is more than --of " + std::to_string(m) +
                      ": a semaphore of " + std::to_string(m) + " permits can never grant " + std::to_string(n));
  p.what = primitive_request::kind::permits;
  p.permits = static_cast<std::uint32_t>(n);
  p.of = static_cast<std::uint32_t>(m);
  return p;
}

capabilities required_capabilities(const primitive_request& p) {
  switch (p.what) {
    case primitive_request::kind::read:
    case primitive_request::kind::write: return {capability::read_write};
    case primitive_request::kind::permits: return {capability::semaphore};
    case primitive_request::kind::mutex: break;
  }
  return {};
}

std::string describe(const primitive_request& p, const std::string& name) {
  switch (p.what) {
    case primitive_request::kind::read: return "the read side of rw lock '" + name + "'";
    case primitive_request::kind::write: return "the write side of rw lock '" + name + "'";
    case primitive_request::kind::permits:
      return std::to_string(p.permits) + " of the " + std::to_string(p.of) + " permits of semaphore '" + name + "'";
    case primitive_request::kind::mutex: break;
  }
  return "lock '" + name + "'";
}

std::string not_free(const primitive_request& p, const std::string& name) {
  switch (p.what) {
    case primitive_request::kind::read:
      return "the read side of rw lock '" + name + "' is not free: a writer or the mutex of the same name holds it " +
             "(or a writer waits for it, where writers are preferred)";
    case primitive_request::kind::write:
      return "the write side of rw lock '" + name +
             "' is not free: readers, a writer or the mutex of the same name hold it";
    case primitive_request::kind::permits:
      if (p.permits == 1) return "no permit of semaphore '" + name + "' (" + std::to_string(p.of) + " in all) is free";
      return "fewer than " + std::to_string(p.permits) + " of the " + std::to_string(p.of) + " permits of semaphore '" +
             name + "' are free";
    case primitive_request::kind::mutex: break;
  }
  return "lock '" + name + "' is held by someone else (a mutex, or readers or a writer of the same name)";
}

}  // namespace dlock::cli
