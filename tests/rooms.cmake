# The rooms' direction holds (cmake/TpsRooms.cmake): a source with the
# kernels' include path cannot include a forward-step header, and can include
# the rooms below it. Each probe is built on demand by its test, never by
# `all`; the two share a lock so they never run the build tool at once.
foreach(probe kernels_includes_step kernels_includes_gguf)
  add_library(${probe} OBJECT EXCLUDE_FROM_ALL ${CMAKE_CURRENT_SOURCE_DIR}/rooms/${probe}.cpp)
  target_link_libraries(${probe} PRIVATE tps_kernels)
  add_test(NAME rooms.${probe}
           COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target ${probe})
  set_tests_properties(rooms.${probe} PROPERTIES LABELS "unit;fast" RESOURCE_LOCK build_tree)
  tps_sanitizers(TESTS rooms.${probe} NOT_SANITIZED "a compile-time check")
endforeach()
set_tests_properties(rooms.kernels_includes_step PROPERTIES
  PASS_REGULAR_EXPRESSION "engine/step/forward.h: No such file or directory")
