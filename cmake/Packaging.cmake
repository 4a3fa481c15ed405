# `cmake --install` and the Debian package (issue 41): the three binaries, a man page for each
# made from its --help at build time, the systemd units of deploy/debian/ and their
# /etc/default files. In the Release tree:
#     cmake --build build --target deb      # only what the package holds, then cpack -G DEB
# writes build/pagoda_VERSION_amd64.deb (docs/install.md). `cmake --build build --target
# package` does the same after building everything.
include(GNUInstallDirs)

# Man pages: deploy/debian/help_to_man.sh runs each binary's --help (no model, no network) and
# writes it as roff, gzipped as Debian ships them.
set(pagoda_man_pages)
foreach(program pagoda-router pagoda-worker pagoda)
  if(program STREQUAL "pagoda-router")
    set(summary "serve a language model over gRPC and an OpenAI-compatible HTTP API")
  elseif(program STREQUAL "pagoda-worker")
    set(summary "hold a model's weights and KV cache and run the steps a pagoda-router sends")
  else()
    set(summary "serve a model in one command, generate, benchmark and run offline")
  endif()
  set(page ${CMAKE_BINARY_DIR}/man/${program}.1.gz)
  add_custom_command(OUTPUT ${page}
    COMMAND sh ${PROJECT_SOURCE_DIR}/deploy/debian/help_to_man.sh $<TARGET_FILE:${program}>
      ${program} ${summary} ${page}
    DEPENDS ${program} ${PROJECT_SOURCE_DIR}/deploy/debian/help_to_man.sh
    VERBATIM)
  list(APPEND pagoda_man_pages ${page})
endforeach()
add_custom_target(pagoda_man_pages ALL DEPENDS ${pagoda_man_pages})

install(TARGETS pagoda-router pagoda-worker pagoda RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${pagoda_man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# System paths whatever the prefix: where Debian keeps a package's units and its defaults.
install(FILES deploy/debian/pagoda-router.service deploy/debian/pagoda-worker.service
  DESTINATION /lib/systemd/system)
install(FILES deploy/debian/pagoda-router.default DESTINATION /etc/default
  RENAME pagoda-router)
install(FILES deploy/debian/pagoda-worker.default DESTINATION /etc/default
  RENAME pagoda-worker)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME pagoda)
set(CPACK_PACKAGE_VENDOR "Pagoda")
# The package's Maintainer field; a distributor building their own sets theirs.
set(PAGODA_DEB_MAINTAINER "Pagoda maintainers <maintainers@users.noreply.a-seed-4accff15.example>"
  CACHE STRING "the Debian package's Maintainer")
set(CPACK_PACKAGE_CONTACT "${PAGODA_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "CPU LLM serving: a router and workers over gRPC")
# The control file's extended description (CPack indents it and writes the blank line as " .").
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
  "pagoda-router serves a language model (GGUF, Hugging Face safetensors or a
llama2.c checkpoint) over gRPC and an OpenAI-compatible HTTP API, with paged
KV caches, prefix caching and continuous batching on pagoda-worker processes,
local or on other machines. The pagoda command serves a model in one step,
generates, benchmarks and runs offline.

systemd units for a router and a worker are installed but not enabled: set
the flags in /etc/default/pagoda-router or /etc/default/pagoda-worker first.")
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # pagoda_VERSION_amd64.deb, Debian's own naming
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
# The libraries' packages, as dpkg-shlibdeps finds them (Debian 12's names on Debian 12), and
# adduser for the postinst.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS adduser)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles
  ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
  ${PROJECT_SOURCE_DIR}/deploy/debian/prerm
  ${PROJECT_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR})
include(CPack)

add_custom_target(deb
  COMMAND ${CMAKE_CPACK_COMMAND} -G DEB --config ${CMAKE_BINARY_DIR}/CPackConfig.cmake
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR}
  COMMENT "cpack -G DEB: ${CMAKE_BINARY_DIR}/pagoda_${PROJECT_VERSION}_amd64.deb"
  VERBATIM)
add_dependencies(deb pagoda-router pagoda-worker pagoda pagoda_man_pages)
