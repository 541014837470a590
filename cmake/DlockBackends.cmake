# dlock_backend_option(NAME PACKAGE <find_package name> TARGET <imported target>)
#   Called by a backend folder's CMakeLists.txt, before anything else: finds the folder's client
#   library. Defines the cache variable DLOCK_<NAME> = ON | OFF | AUTO | DEFAULT and sets
#   DLOCK_HAVE_<NAME> in the folder (backends/CMakeLists.txt hands it on to the top level).
#   ON: the library is required (configure fails loudly without it). OFF: not built.
#   AUTO: built if and only if the library is found. DEFAULT (the default): whatever
#   DLOCK_BACKENDS_DEFAULT says. The choice is printed either way.
#   A Find<PACKAGE>.cmake module lives in the folder's cmake/ (added to CMAKE_MODULE_PATH here);
#   the install copies it next to dlockConfig.cmake, which re-finds the library for a consumer.
#   CMAKE_FIND_PACKAGE_TARGETS_GLOBAL (top level) makes the imported target visible everywhere.
function(dlock_backend_option NAME)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "PACKAGE;TARGET" "")
  set(DLOCK_${NAME} DEFAULT CACHE STRING
      "Build the ${NAME} backends: ON, OFF, AUTO, or DEFAULT (= DLOCK_BACKENDS_DEFAULT)")
  set_property(CACHE DLOCK_${NAME} PROPERTY STRINGS DEFAULT ON OFF AUTO)
  string(TOUPPER "${DLOCK_${NAME}}" mode)
  if(mode STREQUAL "DEFAULT" OR mode STREQUAL "")
    string(TOUPPER "${DLOCK_BACKENDS_DEFAULT}" mode)
    set(origin "DLOCK_BACKENDS_DEFAULT=${mode}")
  else()
    set(origin "DLOCK_${NAME}=${mode}")
  endif()
  if(NOT mode MATCHES "^(ON|OFF|AUTO)$")
    message(FATAL_ERROR "${origin}: expected ON, OFF, AUTO, or DEFAULT for DLOCK_${NAME}")
  endif()
  set(module_dir "${CMAKE_CURRENT_SOURCE_DIR}/cmake")
  if(IS_DIRECTORY "${module_dir}")
    list(PREPEND CMAKE_MODULE_PATH "${module_dir}")
    set(CMAKE_MODULE_PATH "${CMAKE_MODULE_PATH}" PARENT_SCOPE)
  endif()
  set(enabled OFF)
  if(mode STREQUAL "ON")
    find_package(${ARG_PACKAGE} REQUIRED)
  elseif(mode STREQUAL "AUTO")
    find_package(${ARG_PACKAGE} QUIET)
  endif()
  if(NOT mode STREQUAL "OFF" AND TARGET ${ARG_TARGET})
    set(enabled ON)
  elseif(mode STREQUAL "ON")
    message(FATAL_ERROR "${origin} but find_package(${ARG_PACKAGE}) defined no ${ARG_TARGET}")
  endif()
  if(enabled)
    message(STATUS "dlock: ${NAME} backends: ON (${origin})")
    # What the installed package's config must find again for a consumer (cmake/DlockInstall.cmake).
    set_property(GLOBAL APPEND PROPERTY DLOCK_BACKEND_PACKAGES ${ARG_PACKAGE})
    if(EXISTS "${module_dir}/Find${ARG_PACKAGE}.cmake")
      set_property(GLOBAL APPEND PROPERTY DLOCK_BACKEND_FIND_MODULES "${module_dir}/Find${ARG_PACKAGE}.cmake")
    endif()
  else()
    if(mode STREQUAL "OFF")
      message(STATUS "dlock: ${NAME} backends: OFF (${origin})")
    else()
      message(STATUS "dlock: ${NAME} backends: OFF (${origin}; ${ARG_PACKAGE} not found)")
    endif()
  endif()
  set(DLOCK_HAVE_${NAME} ${enabled} PARENT_SCOPE)
  set_property(GLOBAL APPEND PROPERTY DLOCK_BACKEND_OPTIONS "${NAME}=${enabled}")
endfunction()

# dlock_backend_library(<folder>)
#   A backend that links a shared library folder of backends/ (one without src/register.cpp, such
#   as sql_common) adds it with this, after its dlock_backend_option: the library is then built
#   once, before its first user, and only when a backend that needs it is built.
function(dlock_backend_library FOLDER)
  get_property(added GLOBAL PROPERTY DLOCK_BACKEND_LIBRARIES)
  if(FOLDER IN_LIST added)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY DLOCK_BACKEND_LIBRARIES ${FOLDER})
  add_subdirectory("${PROJECT_SOURCE_DIR}/backends/${FOLDER}" "${PROJECT_BINARY_DIR}/backends/${FOLDER}")
endfunction()

# dlock_add_backend(<name> SCHEMES <scheme>... SOURCES ... [LINK ...] [PACKAGE <find_package name>])
#   <name> is a C identifier (the folder's name). Creates the static library dlock_<name>
#   (alias dlock::<name>), whose src/register.cpp defines `void dlock::register_<name>(registry&)`
#   registering exactly SCHEMES, with a generated entry that puts it in the list
#   dlock::default_registry() walks, so linking dlock::<name> alone (or dlock::all) registers it.
#   With DLOCK_BUILD_MODULES it also builds libdlock_<name>.so, a module registry::open loads by
#   scheme from DLOCK_PLUGIN_PATH, and beside it libdlock_<name>.schemes, the index (one scheme a
#   line) that lets open() find the module of any of its schemes without loading other modules.
#   PACKAGE is accepted for older folders; the package to re-find is recorded by dlock_backend_option.
function(dlock_add_backend NAME)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "PACKAGE" "SOURCES;LINK;SCHEMES")
  if(NOT ARG_SCHEMES)
    message(FATAL_ERROR "dlock_add_backend(${NAME}): list the schemes its register_${NAME} registers (SCHEMES ...)")
  endif()
  # The backend's entry in the link-time list default_registry() walks; the --undefined makes
  # every program linking this target pull the entry (and so the backend) out of the archive.
  set(builtin_entry "${CMAKE_CURRENT_BINARY_DIR}/backend_entry_${NAME}.cpp")
  configure_file("${PROJECT_SOURCE_DIR}/cmake/backend_entry.cpp.in" "${builtin_entry}" @ONLY)
  add_library(dlock_${NAME} STATIC ${ARG_SOURCES} "${builtin_entry}")
  add_library(dlock::${NAME} ALIAS dlock_${NAME})
  set_target_properties(dlock_${NAME} PROPERTIES EXPORT_NAME ${NAME})
  target_include_directories(dlock_${NAME} PRIVATE src)
  target_link_libraries(dlock_${NAME} PUBLIC dlock::core dlock_builtin PRIVATE ${ARG_LINK})
  target_link_options(dlock_${NAME} INTERFACE "LINKER:--undefined=dlock_backend_entry_${NAME}")
  set_property(GLOBAL APPEND PROPERTY DLOCK_BACKENDS ${NAME})
  set_property(GLOBAL APPEND PROPERTY DLOCK_BACKEND_SCHEMES ${ARG_SCHEMES})
  if(ARG_PACKAGE)
    set_property(GLOBAL APPEND PROPERTY DLOCK_BACKEND_PACKAGES ${ARG_PACKAGE})
  endif()
  if(DLOCK_BUILD_MODULES)
    set(entry "${CMAKE_CURRENT_BINARY_DIR}/plugin_entry_${NAME}.cpp")
    configure_file("${PROJECT_SOURCE_DIR}/cmake/plugin_entry.cpp.in" "${entry}" @ONLY)
    add_library(dlock_${NAME}_module MODULE ${entry})
    set_target_properties(dlock_${NAME}_module PROPERTIES
      OUTPUT_NAME dlock_${NAME} PREFIX lib
      LIBRARY_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/plugins")
    # The whole archive: the module must carry every object of the backend, not only those the
    # entry point happens to reference.
    target_link_libraries(dlock_${NAME}_module PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,dlock_${NAME}>" dlock::core)
    set_property(GLOBAL APPEND PROPERTY DLOCK_BACKEND_MODULES dlock_${NAME}_module)
    dlock_write_module_index(dlock_${NAME}_module ${ARG_SCHEMES})
    set_property(GLOBAL APPEND PROPERTY DLOCK_BACKEND_MODULE_INDEXES "${PROJECT_BINARY_DIR}/plugins/libdlock_${NAME}.schemes")
  endif()
endfunction()

# GoogleTest's functions, for every folder: dlock_backend_test and the folders' own
# gtest_discover_tests calls. At this scope, not in a function: the module keeps the path of its
# discovery script in a variable, which a function's scope would lose.
include(GoogleTest)

# dlock_backend_test(<target> SOURCES <file>... LINK <target>... [INCLUDE <dir>...]
#                    [DEFINITIONS <definition>...] [MODULE_OF <backend>] [PRIVATE_SERVERS] [DISCOVER <argument>...])
#   A GoogleTest executable of the calling backend folder (in its if(DLOCK_BUILD_TESTS)): SOURCES,
#   linked PRIVATE with LINK as given (GTest::gtest_main there unless the test has a main of its own).
#   INCLUDE: PRIVATE include directories (src: the folder's internal headers). DEFINITIONS: PRIVATE
#   compile definitions. MODULE_OF: it loads that backend's run-time module (DLOCK_BUILD_MODULES),
#   built first, from the folder DLOCK_TEST_PLUGIN_DIR names.
#   PRIVATE_SERVERS: its tests run through with-private-servers (dlock_use_private_servers), for
#   those of a dlock_private_servers group. Its tests join ctest as <folder>/<suite>.<test>, listed
#   when ctest runs (DISCOVERY_MODE PRE_TEST: building needs no server); DISCOVER adds arguments
#   of gtest_discover_tests (TEST_FILTER, PROPERTIES ${DLOCK_PRIVATE_<group>}).
function(dlock_backend_test TARGET)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "PRIVATE_SERVERS" "MODULE_OF" "SOURCES;LINK;INCLUDE;DEFINITIONS;DISCOVER")
  if(NOT TARGET GTest::gtest_main)
    find_package(GTest REQUIRED)
  endif()
  add_executable(${TARGET} ${ARG_SOURCES})
  if(ARG_INCLUDE)
    target_include_directories(${TARGET} PRIVATE ${ARG_INCLUDE})
  endif()
  if(ARG_DEFINITIONS)
    target_compile_definitions(${TARGET} PRIVATE ${ARG_DEFINITIONS})
  endif()
  if(ARG_MODULE_OF)
    target_compile_definitions(${TARGET} PRIVATE
      DLOCK_TEST_PLUGIN_DIR="$<TARGET_FILE_DIR:dlock_${ARG_MODULE_OF}_module>")
    add_dependencies(${TARGET} dlock_${ARG_MODULE_OF}_module)
  endif()
  target_link_libraries(${TARGET} PRIVATE ${ARG_LINK})
  if(ARG_PRIVATE_SERVERS)
    dlock_use_private_servers(TARGET ${TARGET})
  endif()
  cmake_path(GET CMAKE_CURRENT_SOURCE_DIR FILENAME folder)
  gtest_discover_tests(${TARGET} TEST_PREFIX "${folder}/" DISCOVERY_MODE PRE_TEST ${ARG_DISCOVER})
endfunction()

# dlock_backend_bench(<target> SOURCES <file>... LINK <target>... [INCLUDE <dir>...])
#   A Google Benchmark executable of the calling backend folder, built only with
#   DLOCK_BUILD_BENCHMARKS and when the benchmark package is found (it is optional: none
#   otherwise). SOURCES, linked PRIVATE with LINK and benchmark::benchmark; INCLUDE: PRIVATE
#   include directories (src: the folder's internal headers).
function(dlock_backend_bench TARGET)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "SOURCES;LINK;INCLUDE")
  if(NOT DLOCK_BUILD_BENCHMARKS)
    return()
  endif()
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    return()
  endif()
  add_executable(${TARGET} ${ARG_SOURCES})
  if(ARG_INCLUDE)
    target_include_directories(${TARGET} PRIVATE ${ARG_INCLUDE})
  endif()
  target_link_libraries(${TARGET} PRIVATE ${ARG_LINK} benchmark::benchmark)
endfunction()

# dlock_write_module_index(<module target> <scheme>...)
#   Writes lib<output name>.schemes next to the module (DlockInstall installs it with it): the
#   schemes the module registers, one a line, which registry::open reads to load the one module
#   that has the scheme it is asked for.
function(dlock_write_module_index TARGET)
  set(index "$<TARGET_FILE_DIR:${TARGET}>/$<TARGET_FILE_PREFIX:${TARGET}>$<TARGET_FILE_BASE_NAME:${TARGET}>.schemes")
  file(GENERATE OUTPUT "${index}" CONTENT "$<JOIN:${ARGN},\n>\n")
endfunction()

# dlock_join_conformance(<label> (URI <uri> | URI_ENV <variable>) [QUERY <key=value&...>]
#                        [SCHEME <scheme>] [HOOK_SOURCES <files>...] [HOOK_LINK <targets>...])
#   Runs the whole conformance suite (tests/conformance) against one backend URI. <label> names the
#   instantiation in ctest (conformance/redis_reentrant.*). URI_ENV names the environment variable
#   that holds the server's URI at test time (the native launcher exports it); QUERY is appended.
#   A backend whose variable is unset or whose server does not answer FAILS, unless the run
#   excludes it with DLOCK_TEST_EXCLUDE=<label>[,<label>...] (and the run prints what it excluded).
#   SCHEME replaces the scheme of the URI (DLOCK_MYSQL_URI is mysql://..., the backend is
#   mysql+getlock://...); it is the entry's 5th '|'-separated field, empty when not given.
#   HOOK_SOURCES register the backend's saboteur and server probe (tests/support/.../hooks.hpp);
#   they are compiled into the conformance executable, linked with HOOK_LINK.
function(dlock_join_conformance LABEL)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "URI;URI_ENV;QUERY;SCHEME" "HOOK_SOURCES;HOOK_LINK")
  if(NOT ARG_URI AND NOT ARG_URI_ENV)
    message(FATAL_ERROR "dlock_join_conformance(${LABEL}): give URI or URI_ENV")
  endif()
  set_property(GLOBAL APPEND PROPERTY DLOCK_CONFORMANCE_ENTRIES "${LABEL}|${ARG_URI}|${ARG_URI_ENV}|${ARG_QUERY}|${ARG_SCHEME}")
  foreach(src IN LISTS ARG_HOOK_SOURCES)
    cmake_path(ABSOLUTE_PATH src BASE_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}")
    set_property(GLOBAL APPEND PROPERTY DLOCK_CONFORMANCE_HOOK_SOURCES "${src}")
  endforeach()
  set_property(GLOBAL APPEND PROPERTY DLOCK_CONFORMANCE_HOOK_LINK ${ARG_HOOK_LINK})
endfunction()

# dlock_compare_families(<name> SOURCE <file>... [TEST_VARIABLE <variable> TEST_PROCESS <process>
#                        TEST_RUNS "<schemes> <faults>"...])
#   What `dlock compare` needs of this backend's schemes: SOURCE (conventionally
#   compare/families.cpp) defines dlock::compare_spi::families_<name>() (the families of
#   core/compare_spi/include/dlock/compare_spi/family.hpp: a server's variable, process, port, how a
#   connection is ended on it, its quorum faults; or, without a server, the URI a run opens). It is
#   built here into the static library dlock_compare_<name>, against dlock::compare_spi only;
#   tools/compare links every such library and lists their families, so the harness uses the
#   backends and no backend knows the harness. TEST_RUNS add the test cli/compare_server_<name>:
#   one `dlock compare --backends <schemes> --faults <faults>` per run on the launcher's server
#   (TEST_VARIABLE holds its URI, TEST_PROCESS is its process), asserting what each scheme declares.
function(dlock_compare_families NAME)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "TEST_VARIABLE;TEST_PROCESS" "SOURCE;TEST_RUNS")
  add_library(dlock_compare_${NAME} STATIC ${ARG_SOURCE})
  target_link_libraries(dlock_compare_${NAME} PUBLIC dlock::compare_spi)
  set_property(GLOBAL APPEND PROPERTY DLOCK_COMPARE_FAMILY_NAMES "${NAME}")
  if(DLOCK_BUILD_TESTS AND ARG_TEST_RUNS)
    add_test(NAME cli/compare_server_${NAME}
             COMMAND bash ${PROJECT_SOURCE_DIR}/adapters/tests/cli_compare_server_test.sh $<TARGET_FILE:dlock_cli>
                     ${ARG_TEST_VARIABLE} ${ARG_TEST_PROCESS} ${ARG_TEST_RUNS})
    # RUN_SERIAL: it asserts when the holder is told and the next client granted, to a 1 s ttl, which
    # a loaded machine delays past (measured: on servers of its own beside the rest of the suite at
    # -j6, every cli/compare_server_* failed, the holders told 0.5 s after their successors' grants).
    set_tests_properties(cli/compare_server_${NAME} PROPERTIES TIMEOUT 240 RUN_SERIAL TRUE LABELS compare-long)
  endif()
endfunction()
