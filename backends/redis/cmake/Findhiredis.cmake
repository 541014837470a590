# Findhiredis: the hiredis C client, ending in the IMPORTED target hiredis::hiredis.
#
# Debian 12's hiredis 0.14.1 ships a HiredisConfig.cmake that only sets variables (no target) and
# a hiredis.pc, so: pkg-config first, then a plain header/library search. Either way the result
# is one imported target. Newer hiredis (1.x) installs hiredis::hiredis itself; that is used as is.
#
# Result variables: hiredis_FOUND, hiredis_VERSION, hiredis_INCLUDE_DIR, hiredis_LIBRARY.
if(TARGET hiredis::hiredis)
  set(hiredis_FOUND TRUE)
  return()
endif()

find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_hiredis QUIET hiredis)
endif()

find_path(hiredis_INCLUDE_DIR NAMES hiredis/hiredis.h HINTS ${PC_hiredis_INCLUDEDIR} ${PC_hiredis_INCLUDE_DIRS})
find_library(hiredis_LIBRARY NAMES hiredis HINTS ${PC_hiredis_LIBDIR} ${PC_hiredis_LIBRARY_DIRS})

if(PC_hiredis_VERSION)
  set(hiredis_VERSION ${PC_hiredis_VERSION})
elseif(hiredis_INCLUDE_DIR AND EXISTS "${hiredis_INCLUDE_DIR}/hiredis/hiredis.h")
  file(STRINGS "${hiredis_INCLUDE_DIR}/hiredis/hiredis.h" _hiredis_version_lines
       REGEX "^#define HIREDIS_(MAJOR|MINOR|PATCH) [0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "HIREDIS_${_part} ([0-9]+)" _m "${_hiredis_version_lines}")
    set(_hiredis_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(hiredis_VERSION "${_hiredis_MAJOR}.${_hiredis_MINOR}.${_hiredis_PATCH}")
endif()

include(DlockFindLibrary)
dlock_find_library_target(hiredis TARGET hiredis::hiredis)
