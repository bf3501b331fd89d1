# Every dependency comes from Debian's packages.
find_package(Vulkan REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

# Debian 12 ships shaderc_combined.a without glslang and SPIRV-Tools inside, so the static link needs
# glslang's own archives beside it. Linked statically, the binary needs only libvulkan.so.1 at run time.
find_library(FOUNDRY_SHADERC_COMBINED NAMES libshaderc_combined.a REQUIRED)
find_path(FOUNDRY_SHADERC_INCLUDE shaderc/shaderc.hpp REQUIRED)
set(_foundry_glslang_libs glslang MachineIndependent OSDependent GenericCodeGen OGLCompiler SPIRV
    SPIRV-Tools-opt SPIRV-Tools HLSL glslang-default-resource-limits)
set(_foundry_glslang_paths)
foreach(lib IN LISTS _foundry_glslang_libs)
  find_library(FOUNDRY_LIB_${lib} NAMES lib${lib}.a REQUIRED)
  list(APPEND _foundry_glslang_paths ${FOUNDRY_LIB_${lib}})
endforeach()
add_library(foundry_shaderc INTERFACE)
target_include_directories(foundry_shaderc SYSTEM INTERFACE ${FOUNDRY_SHADERC_INCLUDE})
target_link_libraries(foundry_shaderc INTERFACE ${FOUNDRY_SHADERC_COMBINED} ${_foundry_glslang_paths}
                      Threads::Threads)

# The compilers' versions go into every kernel cache key (foundry/ShaderCompiler.cpp).
pkg_check_modules(FOUNDRY_SHADERC_PC REQUIRED shaderc)
pkg_check_modules(FOUNDRY_SPIRV_TOOLS_PC REQUIRED SPIRV-Tools)
target_compile_definitions(foundry_shaderc INTERFACE FOUNDRY_SHADERC_VERSION="${FOUNDRY_SHADERC_PC_VERSION}"
                           FOUNDRY_SPIRV_TOOLS_VERSION="${FOUNDRY_SPIRV_TOOLS_PC_VERSION}")
