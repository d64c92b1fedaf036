# Rooms: one folder, one library, one direction.
#
#   tps_add_room(NAME lib DIR folder SOURCES a.cpp ... [DEPS lib ...] [PRIVATE_DEPS ...])
#
# Every header is included by its path from the project root
# ("engine/kernels/matmul.h"), but no library puts the project root on the
# include path. Each room gets a folder of its own under the build tree that
# holds one symbolic link, DIR, to its sources, and exports that folder as
# its include directory. A target therefore sees the headers of the rooms it
# links (and the rooms they link), and nothing else: an include that points
# up -- a kernel including a forward-pass header -- is "No such file" at
# compile time, and adding the arrow means adding a DEPS entry here, where a
# reviewer sees it. tests/rooms.cmake checks that this stays so.
function(tps_add_room)
  cmake_parse_arguments(R "" "NAME;DIR" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(root ${CMAKE_BINARY_DIR}/rooms/${R_NAME})
  get_filename_component(parent ${root}/${R_DIR} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${R_DIR} ${root}/${R_DIR} SYMBOLIC)
  add_library(${R_NAME} ${R_SOURCES})
  target_include_directories(${R_NAME} PUBLIC ${root})
  target_link_libraries(${R_NAME} PUBLIC ${R_DEPS} PRIVATE ${R_PRIVATE_DEPS})
endfunction()
