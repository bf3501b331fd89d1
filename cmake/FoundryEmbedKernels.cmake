# Embeds every kernels/**/*.glsl into a generated C++ source, so the binary needs no files beside it.
# FOUNDRY_KERNEL_DIR reads them from disk at run time instead.
function(foundry_embed_kernels target kernel_dir)
  file(GLOB_RECURSE glsl_files CONFIGURE_DEPENDS RELATIVE ${kernel_dir} ${kernel_dir}/*.glsl)
  list(SORT glsl_files)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/embedded_kernels.cpp)
  set(deps)
  foreach(f IN LISTS glsl_files)
    list(APPEND deps ${kernel_dir}/${f})
  endforeach()
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DKERNEL_DIR=${kernel_dir} -DOUT=${out} "-DFILES=${glsl_files}"
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/FoundryEmbedKernelsScript.cmake
    DEPENDS ${deps} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/FoundryEmbedKernelsScript.cmake
    COMMENT "Embedding ${kernel_dir}/*.glsl"
    VERBATIM)
  add_library(${target} OBJECT ${out})
endfunction()
