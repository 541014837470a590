# Servers of a test group's own, for the tests that stop, pause, partition or flood a server.
#
# dlock_private_servers(<group> SERVERS <server>... [COST <seconds>])
#   Starts the launcher's SERVERS (compose/native/dlock-servers) in a state dir of the group's own
#   before the first test of the group (ctest fixture servers/<group>/up) and stops them after the
#   last (servers/<group>/down). The group's tests run one at a time (RESOURCE_LOCK) but beside
#   every other test, which never meets their faults: no RUN_SERIAL.
# dlock_use_private_servers(<group> TARGET <gtest executable>)   for gtest_discover_tests: call it
#   before gtest_discover_tests, and give the discovery PROPERTIES ${DLOCK_PRIVATE_<group>}
# dlock_use_private_servers(<group> TESTS <test>...)   for tests added with add_test: their COMMAND
#   must start with ${DLOCK_WITH_PRIVATE_<group>}
# COST: the group's tests' total seconds, so that ctest starts the long chains first.
set(DLOCK_PRIVATE_SERVERS_ROOT ${PROJECT_BINARY_DIR}/private-servers)

function(dlock_private_servers GROUP)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "SERVERS")
  set(dir ${DLOCK_PRIVATE_SERVERS_ROOT}/${GROUP})
  set(launcher ${PROJECT_SOURCE_DIR}/compose/native/dlock-servers)
  set(env ${CMAKE_COMMAND} -E env DLOCK_SERVERS_DIR=${dir} DLOCK_SERVERS_STATE=${dir}.state)
  # A state dir left by an interrupted run is stopped and removed first.
  add_test(NAME servers/${GROUP}/up
           COMMAND bash -c "\"$0\" down >/dev/null 2>&1; \"$0\" up \"$@\" >/dev/null" ${launcher} ${ARG_SERVERS})
  add_test(NAME servers/${GROUP}/down COMMAND ${launcher} down)
  set_tests_properties(servers/${GROUP}/up PROPERTIES
    FIXTURES_SETUP servers-${GROUP} ENVIRONMENT "DLOCK_SERVERS_DIR=${dir};DLOCK_SERVERS_STATE=${dir}.state"
    TIMEOUT 180 LABELS servers)
  set_tests_properties(servers/${GROUP}/down PROPERTIES
    FIXTURES_CLEANUP servers-${GROUP} ENVIRONMENT "DLOCK_SERVERS_DIR=${dir};DLOCK_SERVERS_STATE=${dir}.state"
    TIMEOUT 120 LABELS servers)
  set(DLOCK_WITH_PRIVATE_${GROUP} ${PROJECT_SOURCE_DIR}/tests/support/bin/with-private-servers ${dir} PARENT_SCOPE)
  set(DLOCK_PRIVATE_${GROUP} FIXTURES_REQUIRED servers-${GROUP} RESOURCE_LOCK servers-${GROUP} PARENT_SCOPE)
endfunction()

function(dlock_use_private_servers GROUP)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "TARGET" "TESTS")
  set(dir ${DLOCK_PRIVATE_SERVERS_ROOT}/${GROUP})
  if(ARG_TARGET)
    # gtest_discover_tests runs the executable through this, to list its tests and to run each.
    set_property(TARGET ${ARG_TARGET} PROPERTY CROSSCOMPILING_EMULATOR
                 ${PROJECT_SOURCE_DIR}/tests/support/bin/with-private-servers ${dir})
  endif()
  if(ARG_TESTS)
    set_tests_properties(${ARG_TESTS} PROPERTIES FIXTURES_REQUIRED servers-${GROUP} RESOURCE_LOCK servers-${GROUP})
  endif()
endfunction()
