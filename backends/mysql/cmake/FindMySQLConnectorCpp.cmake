# FindMySQLConnectorCpp: MySQL Connector/C++ 1.1 (the legacy JDBC-style API: mysql_driver.h,
# cppconn/*.h, libmysqlcppconn). Debian's libmysqlcppconn-dev ships neither a .pc file nor a CMake
# config, so this looks for the header and the library directly.
#
# Result: the IMPORTED target MySQLConnectorCpp::MySQLConnectorCpp, MySQLConnectorCpp_FOUND,
# MySQLConnectorCpp_VERSION. Hints: MySQLConnectorCpp_ROOT (CMake's <Package>_ROOT rule).
# The connector's headers include Boost headers (boost/shared_ptr etc.); those are found as
# Boost's header-only target when available and added to the interface.
find_path(MySQLConnectorCpp_INCLUDE_DIR NAMES mysql_driver.h cppconn/driver.h)
find_library(MySQLConnectorCpp_LIBRARY NAMES mysqlcppconn)

if(MySQLConnectorCpp_INCLUDE_DIR AND EXISTS "${MySQLConnectorCpp_INCLUDE_DIR}/cppconn/version_info.h")
  file(STRINGS "${MySQLConnectorCpp_INCLUDE_DIR}/cppconn/version_info.h" _mcc_ver
       REGEX "^#define MYCPPCONN_DM_VERSION[ \t]+\"[0-9.]+\"")
  string(REGEX REPLACE ".*\"([0-9.]+)\".*" "\\1" MySQLConnectorCpp_VERSION "${_mcc_ver}")
  unset(_mcc_ver)
endif()

include(DlockFindLibrary)
dlock_find_library_target(MySQLConnectorCpp TARGET MySQLConnectorCpp::MySQLConnectorCpp)
if(MySQLConnectorCpp_TARGET_CREATED)
  find_package(Boost QUIET)
  if(TARGET Boost::headers)
    set_property(TARGET MySQLConnectorCpp::MySQLConnectorCpp APPEND PROPERTY
      INTERFACE_LINK_LIBRARIES Boost::headers)
  endif()
endif()
