# The rooms' direction holds (cmake/TpsRooms.cmake): a source compiled with
# one room's include path cannot include the header of a room above it or
# beside it, and can include the rooms below it. Each probe is built on
# demand by its test, never by `all`; they share a lock so they never run
# the build tool at once.
#   probe                      compiled as part of   must fail on (- : must compile)
set(tps_room_probes
  "kernels_includes_step        tps_kernels           engine/step/forward.h"
  "kernels_includes_gguf        tps_kernels           -"
  "cache_includes_sched         tps_cache             engine/sched/scheduler.h"
  "step_includes_cache          tps_step              -"
  "serve_http_includes_api      tps_serve_http        serve/api/job.h"
  "serve_api_includes_chat      tps_serve_api         serve/chat/chat_request.h"
  "serve_chat_includes_responses tps_serve_chat       serve/responses/response_store.h"
  "serve_responses_includes_chat tps_serve_responses  serve/chat/chat_text.h"
  "serve_messages_includes_responses tps_serve_messages serve/responses/response_store.h"
  "serve_chat_includes_api      tps_serve_chat        -")
foreach(line IN LISTS tps_room_probes)
  string(REGEX REPLACE " +" ";" fields "${line}")
  list(GET fields 0 probe)
  list(GET fields 1 room)
  list(GET fields 2 refused)
  add_library(${probe} OBJECT EXCLUDE_FROM_ALL ${CMAKE_CURRENT_SOURCE_DIR}/rooms/${probe}.cpp)
  target_link_libraries(${probe} PRIVATE ${room})
  add_test(NAME rooms.${probe}
           COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target ${probe})
  set_tests_properties(rooms.${probe} PROPERTIES LABELS "unit;fast" RESOURCE_LOCK build_tree)
  if(NOT refused STREQUAL "-")
    set_tests_properties(rooms.${probe} PROPERTIES PASS_REGULAR_EXPRESSION "${refused}: No such file or directory")
  endif()
  tps_sanitizers(TESTS rooms.${probe} NOT_SANITIZED "a compile-time check")
endforeach()
