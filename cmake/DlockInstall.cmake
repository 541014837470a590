# `cmake --install` exports the package a service finds with find_package(dlock) and links as
# dlock::all. Static backends carry their client libraries as link dependencies, so the config
# re-finds those with the same Find modules the build used (each backend folder's cmake/, recorded
# by dlock_backend_option for the backends built).
include(CMakePackageConfigHelpers)

get_property(backends GLOBAL PROPERTY DLOCK_BACKENDS)
list(TRANSFORM backends PREPEND "dlock_" OUTPUT_VARIABLE backend_targets)
get_property(modules GLOBAL PROPERTY DLOCK_BACKEND_MODULES)
get_property(module_indexes GLOBAL PROPERTY DLOCK_BACKEND_MODULE_INDEXES)
get_property(find_modules GLOBAL PROPERTY DLOCK_BACKEND_FIND_MODULES)
get_property(DLOCK_BACKEND_PACKAGES GLOBAL PROPERTY DLOCK_BACKEND_PACKAGES)
if(DLOCK_BACKEND_PACKAGES)
  list(REMOVE_DUPLICATES DLOCK_BACKEND_PACKAGES)
endif()

set(async_targets "")  # and the other optional adapter targets
if(TARGET dlock_asio)
  set(async_targets dlock_asio dlock_boost_asio)
endif()
if(TARGET dlock_prometheus)
  list(APPEND async_targets dlock_prometheus)
endif()
install(TARGETS dlock_core dlock_adapters dlock_builtin dlock_all ${backend_targets} ${async_targets}
  EXPORT dlockTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(modules)
  install(TARGETS ${modules} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/dlock/plugins)
  install(FILES ${module_indexes} DESTINATION ${CMAKE_INSTALL_LIBDIR}/dlock/plugins)
endif()
install(DIRECTORY core/include/dlock adapters/include/dlock DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT dlockTargets NAMESPACE dlock:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)

configure_package_config_file(cmake/dlockConfig.cmake.in "${PROJECT_BINARY_DIR}/dlockConfig.cmake"
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake" COMPATIBILITY SameMinorVersion)
if(find_modules)
  list(REMOVE_DUPLICATES find_modules)
endif()
# DlockFindLibrary.cmake: the steps those Find modules share.
install(FILES "${PROJECT_BINARY_DIR}/dlockConfig.cmake" "${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake" ${find_modules}
  cmake/DlockFindLibrary.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
