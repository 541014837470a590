# dlock_warnings: the warning flags of every target this project compiles. The top level applies
# it to every target of every folder once all are defined (dlock_apply_warnings), so a new test,
# benchmark or tool gets the flags without anyone remembering to link them.
option(DLOCK_WARNINGS_AS_ERRORS "Fail the build on any compiler warning (-Werror); the ci preset turns it on" OFF)

add_library(dlock_warnings INTERFACE)
target_compile_options(dlock_warnings INTERFACE -Wall -Wextra -Wpedantic
                       $<$<BOOL:${DLOCK_WARNINGS_AS_ERRORS}>:-Werror>)

# dlock_apply_warnings(<source dir>): links dlock_warnings into every compiled target defined in
# that folder and the folders below it. $<BUILD_INTERFACE:...>: the installed package's targets
# carry no trace of it (a consumer's own flags are its business).
function(dlock_apply_warnings DIR)
  get_property(targets DIRECTORY "${DIR}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$")
      target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:dlock_warnings>)
    endif()
  endforeach()
  get_property(folders DIRECTORY "${DIR}" PROPERTY SUBDIRECTORIES)
  foreach(folder IN LISTS folders)
    dlock_apply_warnings("${folder}")
  endforeach()
endfunction()
