# FindZooKeeperC: the ZooKeeper C client, multi-threaded library (libzookeeper_mt), ending in the
# IMPORTED target ZooKeeperC::zookeeper_mt.
#
# ZooKeeper C 3.8.0 (Debian's libzookeeper-mt-dev) ships neither a .pc nor a CMake package, so a
# plain header/library search. zookeeper.h hides the synchronous API behind #ifdef THREADED, which
# the _mt library implements: the target carries THREADED as a usage requirement.
#
# Result variables: ZooKeeperC_FOUND, ZooKeeperC_VERSION, ZooKeeperC_INCLUDE_DIR, ZooKeeperC_LIBRARY.
if(TARGET ZooKeeperC::zookeeper_mt)
  set(ZooKeeperC_FOUND TRUE)
  return()
endif()

find_path(ZooKeeperC_INCLUDE_DIR NAMES zookeeper/zookeeper.h)
find_library(ZooKeeperC_LIBRARY NAMES zookeeper_mt)

if(ZooKeeperC_INCLUDE_DIR AND EXISTS "${ZooKeeperC_INCLUDE_DIR}/zookeeper/zookeeper_version.h")
  file(STRINGS "${ZooKeeperC_INCLUDE_DIR}/zookeeper/zookeeper_version.h" _zk_version_line
       REGEX "^#define ZOO_VERSION \"[0-9.]+\"")
  string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" ZooKeeperC_VERSION "${_zk_version_line}")
endif()

find_package(Threads QUIET)
include(DlockFindLibrary)
dlock_find_library_target(ZooKeeperC TARGET ZooKeeperC::zookeeper_mt INTERFACE_DEFINITIONS THREADED)
if(ZooKeeperC_TARGET_CREATED AND TARGET Threads::Threads)
  set_property(TARGET ZooKeeperC::zookeeper_mt APPEND PROPERTY INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
