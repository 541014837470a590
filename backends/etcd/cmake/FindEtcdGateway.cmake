# What etcd:// builds against: libcurl (HTTP/1.1 to the v3 JSON gateway) and nlohmann-json (its bodies), as one
# IMPORTED target, EtcdGateway::deps, since a backend option names one package. Both ship CMake support in Debian.
include(FindPackageHandleStandardArgs)
find_package(CURL QUIET)
find_package(nlohmann_json 3 QUIET)
find_package_handle_standard_args(EtcdGateway REQUIRED_VARS CURL_FOUND nlohmann_json_FOUND)
if(EtcdGateway_FOUND AND NOT TARGET EtcdGateway::deps)
  add_library(EtcdGateway::deps INTERFACE IMPORTED)
  target_link_libraries(EtcdGateway::deps INTERFACE CURL::libcurl nlohmann_json::nlohmann_json)
endif()
