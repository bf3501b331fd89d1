# `foundry run` over three ranks where one rank's process differs (cmake -P, for the mpi.* tests):
#   MODE=faulty_rank: rank 1 reads a copy of kernels/ whose merge of partial results is wrong (each
#     part's weight halved), which only that rank's ring prefill uses; the check on rank 0 must fail
#     (exit 1). A check that sampled only the sequence's first, middle and last positions passed it:
#     with three ranks, rank 1's rows lie between them.
#   MODE=other_flags: rank 1 is given another --prompt-len; every rank must refuse the run (exit 2)
#     naming the field, before anything is exchanged (it hung, or wrote past a buffer).
# Variables: MODE, SOURCE (the source tree), WORK (a scratch directory), MPIEXEC, FOUNDRY, CONFIG.
# Prints the output and "exit code <rc>" for the test's PASS_REGULAR_EXPRESSION.
set(args run ${CONFIG} --check --prompt-len 100 --decode-tokens 2 --layers 1)
set(rank1 ${FOUNDRY} ${args})
if(MODE STREQUAL "faulty_rank")
  file(REMOVE_RECURSE "${WORK}")
  file(COPY "${SOURCE}/kernels" DESTINATION "${WORK}")
  set(common "${WORK}/kernels/flashattention/common.glsl")
  file(READ "${common}" text)
  string(REPLACE "vec2(m, 1.0)" "vec2(m * 0.5, 1.0)" faulty "${text}")
  if(faulty STREQUAL text)
    message(FATAL_ERROR "the state of a part's LSE (vec2(m, 1.0)) is no longer in ${common}")
  endif()
  file(WRITE "${common}" "${faulty}")
  set(rank1 env FOUNDRY_KERNEL_DIR=${WORK}/kernels ${FOUNDRY} ${args})
elseif(MODE STREQUAL "other_flags")
  set(rank1 ${FOUNDRY} run ${CONFIG} --check --prompt-len 99 --decode-tokens 2 --layers 1)
else()
  message(FATAL_ERROR "MODE: '${MODE}'; accepted: faulty_rank, other_flags")
endif()
execute_process(COMMAND ${MPIEXEC} --oversubscribe --allow-run-as-root -np 1 ${FOUNDRY} ${args} : -np 1 ${rank1} :
                        -np 1 ${FOUNDRY} ${args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
message("exit code ${rc}")
