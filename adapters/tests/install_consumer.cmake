# install/consumer: installs the build tree into a temporary prefix, then configures, builds and
# runs examples/consumer against it, as a service outside the source tree would.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install/consumer: failed (${rc}): ${ARGN}")
  endif()
endfunction()
step(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
step(${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/consumer" -B "${WORK_DIR}/build"
     -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}")
step(${CMAKE_COMMAND} --build "${WORK_DIR}/build" -j2)
# file:// makes every primitive: the service holds the mutex, reads under std::shared_lock and
# takes one of 3 permits, and says so.
execute_process(COMMAND "${WORK_DIR}/build/consumer" "file://${WORK_DIR}/locks" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "reading catalog: yes" OR NOT out MATCHES "holding 1 of 3 licence-server permits")
  message(FATAL_ERROR "install/consumer: consumer on file:// (rc ${rc}) did not take all three primitives:\n${out}")
endif()
step("${WORK_DIR}/build/consumer_file_only" "file://${WORK_DIR}/locks-file-only")
# Linking one backend links that backend only: another scheme is unknown there.
execute_process(COMMAND "${WORK_DIR}/build/consumer_file_only" "memory://" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "unknown scheme 'memory'")
  message(FATAL_ERROR "install/consumer: consumer_file_only opened memory:// (rc ${rc}): ${err}")
endif()
# dlock::asio from the installed package: the coroutine service example builds outside the tree.
if(WITH_ASIO)
  step(${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/async_service" -B "${WORK_DIR}/async_service"
       -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}")
  step(${CMAKE_COMMAND} --build "${WORK_DIR}/async_service" -j2)
  execute_process(COMMAND "${WORK_DIR}/async_service/async_service" RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 64 OR NOT err MATCHES "usage: async_service URI")
    message(FATAL_ERROR "install/consumer: the installed async_service did not run (rc ${rc}): ${err}")
  endif()
endif()
