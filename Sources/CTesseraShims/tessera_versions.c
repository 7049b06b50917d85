// tessera_versions.c — see tessera_versions.h.
#include "tessera_versions.h"

#include <stdio.h>
#include <jpeglib.h>
#include <libheif/heif.h>
#include <webp/decode.h>
#include <spng.h>
#include <lcms2.h>
#include <gif_lib.h>
#include <string.h>
#include <tiffio.h>

#define TESSERA_STRINGIFY_(x) #x
#define TESSERA_STRINGIFY(x) TESSERA_STRINGIFY_(x)

const char *tessera_build_commit(void) {
#ifdef TESSERA_COMMIT
    return TESSERA_COMMIT;
#else
    return "";
#endif
}

const char *tessera_libjpeg_turbo_version(void) {
#ifdef LIBJPEG_TURBO_VERSION
    return TESSERA_STRINGIFY(LIBJPEG_TURBO_VERSION);
#else
    return "unknown";
#endif
}

const char *tessera_libheif_version(void) { return heif_get_version(); }

void tessera_libwebp_version(char *out, int capacity) {
    int v = WebPGetDecoderVersion();  // 0xMMmmpp
    snprintf(out, (size_t)capacity, "%d.%d.%d", (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff);
}

const char *tessera_libspng_version(void) { return spng_version_string(); }

void tessera_lcms2_version(char *out, int capacity) {
    int v = cmsGetEncodedCMMversion();  // e.g. 2140 for 2.14 (MAJOR*1000 + MINOR*10 + PATCH)
    snprintf(out, (size_t)capacity, "%d.%d", v / 1000, (v % 1000) / 10);
}

const char *tessera_giflib_version(void) {
    return TESSERA_STRINGIFY(GIFLIB_MAJOR) "." TESSERA_STRINGIFY(GIFLIB_MINOR) "." TESSERA_STRINGIFY(GIFLIB_RELEASE);
}

void tessera_libtiff_version(char *out, int capacity) {
    // A banner: "LIBTIFF, Version 4.5.0\nCopyright ...": the number after "Version ".
    const char *banner = TIFFGetVersion();
    const char *start = banner ? strstr(banner, "Version ") : NULL;
    if (start == NULL) {
        snprintf(out, (size_t)capacity, "unknown");
        return;
    }
    start += 8;
    size_t length = strcspn(start, "\n ");
    snprintf(out, (size_t)capacity, "%.*s", (int)length, start);
}
