# The programs' command-line files, those that include CLI11, at -O1.
#
# CLI11 (Debian's 2.1) is header-only: each file that includes it compiles
# the whole parser, 10-16 s at -O2 for a file that only reads a command line
# (tools/solve/chronolink_solve.cc: 21 s, most of it CLI11's templates).
# At -O1 they compile in 70 % of that; CI builds them on every run. The work
# these programs do is in their libraries, which stay -O2.
#
# Call it once, after every add_subdirectory: a source file's property is
# set in each directory that may compile the file.
function(chronolink_command_line_files_at_o1)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS
    ${PROJECT_SOURCE_DIR}/agent/*.cc ${PROJECT_SOURCE_DIR}/collector/*.cc
    ${PROJECT_SOURCE_DIR}/tools/*.cc ${PROJECT_SOURCE_DIR}/bench/*.cc)
  set(command_line_files)
  foreach(source ${sources})
    file(STRINGS ${source} cli11 REGEX "^#include <CLI/" LIMIT_COUNT 1)
    if(cli11)
      list(APPEND command_line_files ${source})
    endif()
  endforeach()
  set(directories ${PROJECT_SOURCE_DIR})
  set(pending ${PROJECT_SOURCE_DIR})
  while(pending)
    list(POP_FRONT pending dir)
    get_directory_property(subdirs DIRECTORY ${dir} SUBDIRECTORIES)
    list(APPEND directories ${subdirs})
    list(APPEND pending ${subdirs})
  endwhile()
  set_source_files_properties(${command_line_files} DIRECTORY ${directories}
    PROPERTIES COMPILE_OPTIONS "$<$<CONFIG:RelWithDebInfo,Release>:-O1>")
  list(LENGTH command_line_files n)
  message(STATUS "chronolink: ${n} command-line files (CLI11) at -O1")
endfunction()
