# What `cmake --install` puts where, and the .deb CPack makes of it (docs/guides/operating.md).
# Completions go where bash-completion, zsh and fish look for vendor scripts.
include(GNUInstallDirs)

install(TARGETS rosetctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# rosetctl(1), generated from the command tree of the binary just built (scripts/gen-manpage.py).
find_program(ROSETCTL_PYTHON /usr/bin/python3 NO_DEFAULT_PATH REQUIRED)
set(man_page ${CMAKE_CURRENT_BINARY_DIR}/rosetctl.1)
add_custom_command(
  OUTPUT ${man_page}.gz
  COMMAND ${ROSETCTL_PYTHON} ${PROJECT_SOURCE_DIR}/scripts/gen-manpage.py $<TARGET_FILE:rosetctl> ${man_page}
  COMMAND gzip -9nf ${man_page}
  DEPENDS rosetctl ${PROJECT_SOURCE_DIR}/scripts/gen-manpage.py
  COMMENT "Generating rosetctl(1) from the command tree")
add_custom_target(man_page ALL DEPENDS ${man_page}.gz)
install(FILES ${man_page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

install(FILES completions/rosetctl.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME rosetctl)
install(FILES completions/rosetctl.zsh DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions
        RENAME _rosetctl)
install(FILES completions/rosetctl.fish DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d
        RENAME rosetctl.fish)

# The units, under PREFIX/lib/systemd/system (systemd reads /usr/lib/... and /usr/local/lib/...),
# naming the rosetctl of the same prefix: the prefix is known only at install time
# (`cmake --install --prefix`, or /usr when CPack packages), hence install(CODE).
foreach(unit rosetctl-controller.service rosetctl-node.service)
  install(CODE "
    file(READ \"${PROJECT_SOURCE_DIR}/deploy/systemd/${unit}\" text)
    string(REPLACE \"/usr/bin/rosetctl\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/rosetctl\" text \"\${text}\")
    set(dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\")
    message(STATUS \"Installing: \${dir}/${unit}\")
    file(WRITE \"\${dir}/${unit}\" \"\${text}\")")
endforeach()

install(FILES deploy/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
# A native package (no Debian revision): its changelog is changelog.gz.
set(changelog ${CMAKE_CURRENT_BINARY_DIR}/changelog.gz)
add_custom_command(
  OUTPUT ${changelog}
  COMMAND gzip -9nc ${PROJECT_SOURCE_DIR}/deploy/debian/changelog > ${changelog}
  DEPENDS ${PROJECT_SOURCE_DIR}/deploy/debian/changelog)
add_custom_target(debian_changelog ALL DEPENDS ${changelog})
install(FILES ${changelog} DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES deploy/debian/lintian-overrides DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
        RENAME rosetctl)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rosetctl)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# The maintainer, with no e-mail address made up for it (issue 34): dpkg takes a Maintainer field
# without one, lintian's complaint about it is overridden (deploy/debian/lintian-overrides says why).
set(CPACK_PACKAGE_CONTACT "rosetctl maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "volumes, attachments and snapshots, and a CSI plugin")
set(CPACK_PACKAGE_DESCRIPTION
    "rosetctl provisions storage volumes, attaches them to hosts and serves them to\nKubernetes as a CSI v1.10 plugin, from one executable: a CLI, rosetctl serve\n(with systemd units for a controller and a node) and the Ansible collection's\nbackend.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)  # the build's debug info stays in the build tree
# Linked libraries through dpkg-shlibdeps; what serve runs or dlopens is named here (not
# util-linux: it is Essential).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libcpp-httplib0.11: the metrics endpoint's module, which the binary carries and dlopens
# (src/metrics_http/metrics_http.h), so dpkg-shlibdeps does not see it.
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "mount, e2fsprogs, xfsprogs, libcurl4, libcpp-httplib0.11")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "fuse3")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "open-iscsi, tgt")
include(CPack)
