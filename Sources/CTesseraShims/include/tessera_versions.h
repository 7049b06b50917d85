// tessera_versions.h — what `tessera --version` reports: the commit the binary was built from
// and the versions of the image libraries it runs with.
#ifndef TESSERA_VERSIONS_H
#define TESSERA_VERSIONS_H

/// The commit given at build time (`-Xcc -DTESSERA_COMMIT=\"...\"`, as scripts/build-release.sh
/// does), or "" for a build that was not given one.
const char *tessera_build_commit(void);

/// The libraries' versions as "MAJOR.MINOR.PATCH". libjpeg-turbo has no run-time version call:
/// its version is the headers' it was built against (the soname libjpeg.so.62 is the ABI).
/// The others are asked at run time: the library actually loaded.
const char *tessera_libjpeg_turbo_version(void);
const char *tessera_libheif_version(void);
void tessera_libwebp_version(char *out, int capacity);
const char *tessera_libspng_version(void);
void tessera_lcms2_version(char *out, int capacity);
/// giflib has no run-time call either: its headers' version.
const char *tessera_giflib_version(void);
void tessera_libtiff_version(char *out, int capacity);

#endif
