# rosetctl_grpc_runtime: gRPC (with its TLS layer, for the mutual-TLS TCP listeners and the
# consumer's channel to a controller), protobuf and abseil, linked from Debian's static archives
# by default; OpenSSL, which the TLS layer uses, stays a shared library. Loaded as shared libraries they are
# ~50 of rosetctl's ~90, and the dynamic loader's work on them was most of a CLI run's start-up
# (bench/README.md, "CLI start-up"). -DROSETCTL_STATIC_GRPC=OFF links the shared libraries.
option(ROSETCTL_STATIC_GRPC "Link gRPC, protobuf and abseil statically" ON)

add_library(rosetctl_grpc_runtime INTERFACE)
if(NOT ROSETCTL_STATIC_GRPC)
  target_link_libraries(rosetctl_grpc_runtime INTERFACE protobuf::libprotobuf gRPC::grpc++)
  return()
endif()

set(archives)
foreach(name IN ITEMS grpc++ grpc gpr upb address_sorting cares re2 protobuf)
  find_library(ROSETCTL_ARCHIVE_${name} NAMES lib${name}.a)
  if(NOT ROSETCTL_ARCHIVE_${name})
    message(FATAL_ERROR "lib${name}.a not found: install the -dev packages scripts/install-deps.sh "
                        "lists, or configure with -DROSETCTL_STATIC_GRPC=OFF")
  endif()
  list(APPEND archives ${ROSETCTL_ARCHIVE_${name}})
endforeach()
# abseil's archives depend on each other in cycles; inside one group the linker takes only the
# members something needs.
get_filename_component(archive_dir "${ROSETCTL_ARCHIVE_gpr}" DIRECTORY)
file(GLOB absl_archives "${archive_dir}/libabsl_*.a")
find_package(ZLIB REQUIRED)
target_include_directories(rosetctl_grpc_runtime
                           INTERFACE $<TARGET_PROPERTY:gRPC::grpc++,INTERFACE_INCLUDE_DIRECTORIES>)
target_link_libraries(rosetctl_grpc_runtime INTERFACE -Wl,--start-group ${archives} ${absl_archives}
                                                      -Wl,--end-group ZLIB::ZLIB OpenSSL::SSL OpenSSL::Crypto Threads::Threads
                                                      ${CMAKE_DL_LIBS} m rt)
