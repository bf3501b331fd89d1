# Installs and exports the library: Foundry::foundry (core, stages, steps, runner), Foundry::testing
# (the GMock doubles and fixtures of foundry/testing/), the public headers under include/foundry/,
# FoundryConfig.cmake + FoundryConfigVersion.cmake, a pkg-config file foundry.pc, and the executable.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Headers a program that links Foundry never needs, and which no installed header includes
# (docs/embedding.md says why each is internal). Every other header under src/foundry is installed.
set(FOUNDRY_INTERNAL_HEADERS
  AtomicFile.h CoopMatProbe.h FileIdentity.h GlslScan.h Hash.h TempFiles.h
  vk/Barrier.h vk/Buffer.h vk/PipelineCache.h
  stages/FlashDecodeCommon.h stages/SdpaPrefillCommon.h stages/SplitKReduceCommon.h
  steps/KernelCatalog.h
  runner/ConfigSchema.h runner/LayerModifiers.h runner/io/Json.h
  # Built only where Open MPI is, and not installed (foundry_mpi is the repository's own).
  runner/MpiCommunicator.h)

file(GLOB_RECURSE _foundry_headers RELATIVE ${PROJECT_SOURCE_DIR}/src/foundry CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/src/foundry/*.h)
foreach(header IN LISTS _foundry_headers)
  if(header IN_LIST FOUNDRY_INTERNAL_HEADERS)
    continue()
  endif()
  get_filename_component(dir ${header} DIRECTORY)
  if(dir MATCHES "^testing" AND NOT TARGET foundry_testing)
    continue()
  endif()
  install(FILES src/foundry/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/foundry/${dir} COMPONENT foundry)
endforeach()

install(TARGETS foundry_core foundry_stages foundry_steps foundry_runner foundry_lib EXPORT FoundryTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT foundry)
install(EXPORT FoundryTargets NAMESPACE Foundry:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Foundry
        COMPONENT foundry)
if(TARGET foundry_testing)
  install(TARGETS foundry_testing EXPORT FoundryTestingTargets COMPONENT foundry)
  install(EXPORT FoundryTestingTargets NAMESPACE Foundry:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Foundry
          COMPONENT foundry)
endif()
install(TARGETS foundry RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT foundry)

configure_package_config_file(cmake/FoundryConfig.cmake.in ${PROJECT_BINARY_DIR}/FoundryConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Foundry)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/FoundryConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/FoundryConfig.cmake ${PROJECT_BINARY_DIR}/FoundryConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Foundry COMPONENT foundry)

file(RELATIVE_PATH FOUNDRY_PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" FOUNDRY_PC_TO_PREFIX "${FOUNDRY_PC_TO_PREFIX}")
configure_file(cmake/foundry.pc.in ${PROJECT_BINARY_DIR}/foundry.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/foundry.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT foundry)
