#pragma once
// The threads the mysql backend does not wait for: a connect abandoned by a stopped acquire, and
// the KILL that ends a stopped statement on the server. They may still use Connector/C++ while
// the process exits, and its driver is a static of the client library that exit() destroys.
#include <functional>

namespace dlock::mysql {

// Runs `work` on a thread of its own, counted: at exit the count is waited down before the driver
// is destroyed (each such thread ends by its connect and command timeouts; the wait gives up after
// 10 s), which also orders the thread's last use of the driver before its destruction. Throws
// std::system_error when no thread can be started.
void start_detached(std::function<void()> work);

}  // namespace dlock::mysql
