# Servers of a test group's own, for the tests that stop, pause, partition or count a server.
#
# dlock_private_servers(<group> SERVERS <server>...)
#   Starts the launcher's SERVERS (compose/native/dlock-servers) in a state dir of the group's own
#   before the first test of the group (ctest fixture servers/<group>/up) and stops them after the
#   last (servers/<group>/down). Sets DLOCK_PRIVATE_<group>, the test properties of a test of the
#   group: it runs one at a time with the others of its group (RESOURCE_LOCK), beside every other
#   test, which never meets its faults (no RUN_SERIAL), and it sees the group's servers' variables.
# dlock_use_private_servers(TARGET <gtest executable>)
#   Runs the executable's tests through tests/support/bin/with-private-servers, which exports a
#   group's variables for the tests whose properties say so; call it before gtest_discover_tests and
#   give the group's tests PROPERTIES ${DLOCK_PRIVATE_<group>}. A test added with add_test starts its
#   COMMAND with ${DLOCK_WITH_PRIVATE_SERVERS} instead.
set(DLOCK_PRIVATE_SERVERS_ROOT ${PROJECT_BINARY_DIR}/private-servers)
set(DLOCK_WITH_PRIVATE_SERVERS ${PROJECT_SOURCE_DIR}/tests/support/bin/with-private-servers)

function(dlock_private_servers GROUP)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "SERVERS")
  set(dir ${DLOCK_PRIVATE_SERVERS_ROOT}/${GROUP})
  set(launcher ${PROJECT_SOURCE_DIR}/compose/native/dlock-servers)
  set(env "DLOCK_SERVERS_DIR=${dir};DLOCK_SERVERS_STATE=${dir}.state")
  # A state dir left by an interrupted run is stopped and removed first.
  add_test(NAME servers/${GROUP}/up
           COMMAND bash -c "\"$0\" down >/dev/null 2>&1; \"$0\" up \"$@\" >/dev/null" ${launcher} ${ARG_SERVERS})
  add_test(NAME servers/${GROUP}/down COMMAND ${launcher} down)
  set_tests_properties(servers/${GROUP}/up PROPERTIES FIXTURES_SETUP servers-${GROUP} ENVIRONMENT "${env}"
                       TIMEOUT 180 LABELS servers)
  set_tests_properties(servers/${GROUP}/down PROPERTIES FIXTURES_CLEANUP servers-${GROUP} ENVIRONMENT "${env}"
                       TIMEOUT 120 LABELS servers)
  set(DLOCK_PRIVATE_${GROUP} FIXTURES_REQUIRED servers-${GROUP} RESOURCE_LOCK servers-${GROUP}
      ENVIRONMENT DLOCK_PRIVATE_SERVERS_DIR=${dir} PARENT_SCOPE)
endfunction()

function(dlock_use_private_servers)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "TARGET" "")
  # gtest_discover_tests runs the executable through this, to list its tests and to run each.
  set_property(TARGET ${ARG_TARGET} PROPERTY CROSSCOMPILING_EMULATOR ${DLOCK_WITH_PRIVATE_SERVERS})
endfunction()
