# FindLibMemcached: libmemcached (the "awesome" fork, 1.1.x), ending in the IMPORTED target
# LibMemcached::LibMemcached.
#
# libmemcached 1.1.4 installs only libmemcached.pc (its CMake package files are not shipped by
# Debian), so pkg-config is the one source of truth. The .pc also links libmemcachedutil.
#
# Result variables: LibMemcached_FOUND, LibMemcached_VERSION.
if(TARGET LibMemcached::LibMemcached)
  set(LibMemcached_FOUND TRUE)
  return()
endif()

find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_LibMemcached QUIET IMPORTED_TARGET libmemcached)
endif()
if(PC_LibMemcached_FOUND)
  set(LibMemcached_VERSION "${PC_LibMemcached_VERSION}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibMemcached
  REQUIRED_VARS PC_LibMemcached_FOUND
  VERSION_VAR LibMemcached_VERSION)

if(LibMemcached_FOUND AND NOT TARGET LibMemcached::LibMemcached)
  add_library(LibMemcached::LibMemcached INTERFACE IMPORTED)
  set_target_properties(LibMemcached::LibMemcached PROPERTIES INTERFACE_LINK_LIBRARIES PkgConfig::PC_LibMemcached)
endif()
