# Runs the command given after the script (cmake -DEXPECT_EXIT=N -P ExpectExit.cmake COMMAND ARGS...),
# prints its output and "exit code <rc>", and fails unless the command exited with EXPECT_EXIT. For
# tests whose PASS_REGULAR_EXPRESSION must see both the message and the exit code.
set(command "")
set(take FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(take)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} MATCHES "ExpectExit\\.cmake$")
    set(take TRUE)
  endif()
endforeach()
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
message("exit code ${rc}")
if(NOT rc EQUAL EXPECT_EXIT)
  message(FATAL_ERROR "expected exit code ${EXPECT_EXIT}, got ${rc}")
endif()
