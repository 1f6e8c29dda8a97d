# Turns a file into a C++ include: `inline constexpr unsigned char NAME[] = {...};` plus
# NAME_size. Runs at build time (cmake -DIN=file -DOUT=file.inc -DNAME=ident -P embed.cmake), so
# the page stays a readable file in the repository and needs no tool beyond CMake.
if(NOT DEFINED IN OR NOT DEFINED OUT OR NOT DEFINED NAME)
  message(FATAL_ERROR "embed.cmake: pass -DIN=<file> -DOUT=<file.inc> -DNAME=<identifier>")
endif()
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR size "${n} / 2")
if(size EQUAL 0)
  message(FATAL_ERROR "embed.cmake: ${IN} is empty")
endif()
# 0xNN, per byte; a line break every 32 bytes keeps the generated file readable by editors.
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){32})" "\\1\n" bytes "${bytes}")
get_filename_component(src "${IN}" NAME)  # no absolute path: ccache hashes clones alike
file(WRITE "${OUT}.tmp"
  "// Generated from ${src} by embed.cmake; do not edit.\n"
  "inline constexpr unsigned char ${NAME}[] = {\n${bytes}\n};\n"
  "inline constexpr unsigned long long ${NAME}_size = ${size};\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
