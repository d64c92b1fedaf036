# Run at build time (cmake -P): writes OUT, a header that holds IN's text as
# `inline constexpr const char* NAME`, in a raw string literal.
#   -DIN=file -DOUT=header -DNAME=kWebPage
file(READ ${IN} text)
string(FIND "${text}" ")tpsembed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string's end marker )tpsembed\"")
endif()
# The header names IN without its directory: a header that held the tree's
# path would differ in every clone, and ccache could share nothing that
# includes it.
get_filename_component(in_name ${IN} NAME)
file(WRITE ${OUT} "// Written by cmake/embed_text.cmake from ${in_name}.\n#pragma once\n\nnamespace tps {\n"
                  "inline constexpr const char* ${NAME} = R\"tpsembed(${text})tpsembed\";\n}  // namespace tps\n")
