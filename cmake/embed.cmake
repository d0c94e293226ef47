# Embeds a file in the program as a NUL-terminated C array, at build time,
# so the repository keeps one source of truth (docs/openapi.json, and the
# web page's files later) and no generated C is committed.
#   cmake -DINPUT=file -DOUTPUT=out.c -DSYMBOL=name -DINCLUDE=header.h -P embed.cmake
file(READ "${INPUT}" bytes HEX)
string(LENGTH "${bytes}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," array "${bytes}")
# About 16 bytes a line, so compilers and diffs of the output stay readable.
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n    " array "${array}")
file(WRITE "${OUTPUT}.tmp"
  "/* ${INPUT}, embedded at build time by cmake/embed.cmake. */\n"
  "#include \"${INCLUDE}\"\n\n"
  "const char ${SYMBOL}[] = {\n    ${array}0x00};\n"
  "const unsigned long ${SYMBOL}_size = ${size};\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
