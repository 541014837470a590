# The steps the backends' Find modules (backends/*/cmake/Find*.cmake) share for a client library
# found as one header folder and one library file. Installed beside them (cmake/DlockInstall.cmake),
# since a consumer's find_package(dlock) runs them again.
include_guard(GLOBAL)
include(FindPackageHandleStandardArgs)

# dlock_find_library_target(<package> TARGET <imported target> [INTERFACE_DEFINITIONS <definition>...])
#   Once the module has searched <package>_INCLUDE_DIR and <package>_LIBRARY (and read
#   <package>_VERSION where it could): find_package_handle_standard_args on the two, and, found,
#   TARGET as an UNKNOWN IMPORTED library of that file and folder with INTERFACE_DEFINITIONS.
#   Sets <package>_TARGET_CREATED when it made the target here, for what the module adds to it.
#   A macro: the results are the calling module's variables, as a Find module's are.
macro(dlock_find_library_target _dlock_package)
  cmake_parse_arguments(_dlock_find "" "TARGET" "INTERFACE_DEFINITIONS" ${ARGN})
  find_package_handle_standard_args(${_dlock_package}
    REQUIRED_VARS ${_dlock_package}_LIBRARY ${_dlock_package}_INCLUDE_DIR
    VERSION_VAR ${_dlock_package}_VERSION)
  set(${_dlock_package}_TARGET_CREATED FALSE)
  if(${_dlock_package}_FOUND AND NOT TARGET ${_dlock_find_TARGET})
    add_library(${_dlock_find_TARGET} UNKNOWN IMPORTED)
    set_target_properties(${_dlock_find_TARGET} PROPERTIES
      IMPORTED_LOCATION "${${_dlock_package}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${${_dlock_package}_INCLUDE_DIR}")
    if(_dlock_find_INTERFACE_DEFINITIONS)
      set_target_properties(${_dlock_find_TARGET} PROPERTIES
        INTERFACE_COMPILE_DEFINITIONS "${_dlock_find_INTERFACE_DEFINITIONS}")
    endif()
    set(${_dlock_package}_TARGET_CREATED TRUE)
  endif()
  mark_as_advanced(${_dlock_package}_INCLUDE_DIR ${_dlock_package}_LIBRARY)
endmacro()
