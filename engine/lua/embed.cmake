# engine/lua/embed.cmake — turns prelude.lua into a C++ header holding its text (line numbers preserved).
file(READ ${IN} content)
set(delim "NSLUA")
file(WRITE ${OUT} "// generated from prelude.lua by embed.cmake — do not edit\n#pragma once\nnamespace ns { inline constexpr const char* prelude_lua = R\"${delim}(${content})${delim}\"; }\n")
