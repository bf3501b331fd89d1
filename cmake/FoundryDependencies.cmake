# Every dependency comes from Debian's packages.
find_package(Vulkan REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

# shaderc through its own pkg-config files, linked statically so the binary needs only libvulkan.so.1 at
# run time. Debian 12's shaderc_combined.pc names only -lshaderc_combined, whose archive does not hold
# glslang and SPIRV-Tools (upstream's does); spirv.pc (glslang's SPIRV library) requires glslang.pc
# and SPIRV-Tools.pc, which name the rest, in link order. (glslang's CMake package cannot stand in: its
# targets file checks for /usr/bin/glslangValidator, which glslang-dev does not ship.)
# FoundryConfig.cmake makes the same imported target for projects that link the installed library.
pkg_check_modules(FOUNDRY_SHADERC REQUIRED IMPORTED_TARGET shaderc_combined spirv)
# The compilers' versions go into every kernel cache key (src/foundry/ShaderCompiler.cpp).
pkg_check_modules(FOUNDRY_SPIRV_TOOLS_PC REQUIRED SPIRV-Tools)
set(FOUNDRY_SHADERC_VERSION "${FOUNDRY_SHADERC_shaderc_combined_VERSION}")
set(FOUNDRY_SPIRV_TOOLS_VERSION "${FOUNDRY_SPIRV_TOOLS_PC_VERSION}")
