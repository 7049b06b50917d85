// tessera_png.c — PNG rows with libspng, read from a file descriptor through pread.
//
// Every bit depth and colour type comes out as RGBA8 (16-bit samples scaled, palettes and tRNS
// expanded); an Adam7-interlaced image comes out pass by pass, each row holding only that
// pass's pixels at their columns (spng_get_row_info says which row and pass). The chunks before
// the image data are walked here too, for cICP, which libspng 0.7 does not read.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <spng.h>

#include "tessera_shims.h"

int tessera_exif_orientation(const uint8_t *app1, size_t length);

struct tessera_png {
    spng_ctx *ctx;
    int fd;
    uint64_t offset;
    uint64_t file_bytes;
    int read_errno;
    char message[200];
    struct spng_iccp iccp;
    int has_iccp;
    struct spng_row_info row;
};

static int read_fn(spng_ctx *ctx, void *user, void *dest, size_t length) {
    (void)ctx;
    struct tessera_png *png = user;
    uint8_t *out = dest;
    while (length > 0) {
        ssize_t n = pread(png->fd, out, length, (off_t)png->offset);
        if (n < 0) {
            if (errno == EINTR) continue;
            png->read_errno = errno;
            return SPNG_IO_ERROR;
        }
        if (n == 0) return SPNG_IO_EOF;
        png->offset += (uint64_t)n;
        out += n;
        length -= (size_t)n;
    }
    return 0;
}

static void fail(struct tessera_png *png, int status) {
    if (png->read_errno != 0) {
        snprintf(png->message, sizeof png->message, "read: %s", strerror(png->read_errno));
    } else if (status == SPNG_IO_EOF) {
        snprintf(png->message, sizeof png->message, "the file ends early (truncated PNG)");
    } else {
        snprintf(png->message, sizeof png->message, "%s", spng_strerror(status));
    }
}

/// cICP before IDAT: walks the chunk list by pread (lengths and types only).
static void read_cicp(struct tessera_png *png, tessera_png_info *info) {
    uint64_t at = 8;
    for (int chunks = 0; chunks < 10000 && at + 8 <= png->file_bytes; chunks++) {
        uint8_t head[12];
        if (pread(png->fd, head, 8, (off_t)at) != 8) return;
        uint32_t length = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
        if (memcmp(head + 4, "IDAT", 4) == 0 || memcmp(head + 4, "IEND", 4) == 0) return;
        if (memcmp(head + 4, "cICP", 4) == 0 && length == 4) {
            if (pread(png->fd, head, 4, (off_t)(at + 8)) != 4) return;
            info->cicp_primaries = head[0];
            info->cicp_transfer = head[1];
            info->cicp_matrix = head[2];
            info->cicp_full_range = head[3];
            return;
        }
        at += 12 + (uint64_t)length;
    }
}

tessera_png *tessera_png_open(int fd, uint64_t file_bytes, tessera_png_info *info, char *message, size_t message_bytes) {
    struct tessera_png *png = calloc(1, sizeof *png);
    if (png == NULL) { snprintf(message, message_bytes, "out of memory"); return NULL; }
    png->fd = fd;
    png->file_bytes = file_bytes;
    png->ctx = spng_ctx_new(0);
    if (png->ctx == NULL) { free(png); snprintf(message, message_bytes, "out of memory"); return NULL; }
    // Hostile files: no row wider or image taller than this, no chunk (an ICC profile, text)
    // above 16 MiB, and at most 64 MiB of chunks kept.
    spng_set_image_limits(png->ctx, 1u << 20, 1u << 20);
    spng_set_chunk_limits(png->ctx, 16u << 20, 64u << 20);
    spng_set_png_stream(png->ctx, read_fn, png);
    struct spng_ihdr ihdr;
    int status = spng_get_ihdr(png->ctx, &ihdr);
    if (status != 0) {
        fail(png, status);
        snprintf(message, message_bytes, "%s", png->message);
        tessera_png_close(png);
        return NULL;
    }
    memset(info, 0, sizeof *info);
    info->width = ihdr.width;
    info->height = ihdr.height;
    info->bit_depth = ihdr.bit_depth;
    info->color_type = ihdr.color_type;
    info->interlaced = ihdr.interlace_method != 0;
    struct spng_trns trns;
    info->has_alpha = ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA || ihdr.color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ||
                      spng_get_trns(png->ctx, &trns) == 0;
    info->cicp_primaries = info->cicp_transfer = info->cicp_matrix = info->cicp_full_range = -1;
    if (spng_get_iccp(png->ctx, &png->iccp) == 0 && png->iccp.profile_len > 0) png->has_iccp = 1;
    struct spng_exif exif;
    if (spng_get_exif(png->ctx, &exif) == 0 && exif.length > 0 && exif.length < (1u << 20)) {
        // libexif wants the JPEG APP1 form: "Exif\0\0" then the TIFF structure.
        uint8_t *app1 = malloc(exif.length + 6);
        if (app1 != NULL) {
            memcpy(app1, "Exif\0\0", 6);
            memcpy(app1 + 6, exif.data, exif.length);
            info->exif_orientation = tessera_exif_orientation(app1, exif.length + 6);
            free(app1);
        }
    }
    read_cicp(png, info);
    return png;
}

const uint8_t *tessera_png_icc(tessera_png *png, size_t *length) {
    if (!png->has_iccp) { *length = 0; return NULL; }
    *length = png->iccp.profile_len;
    return (const uint8_t *)png->iccp.profile;
}

int tessera_png_start(tessera_png *png) {
    int status = spng_decode_image(png->ctx, NULL, 0, SPNG_FMT_RGBA8, SPNG_DECODE_TRNS | SPNG_DECODE_PROGRESSIVE);
    if (status != 0) { fail(png, status); return -1; }
    return 0;
}

int tessera_png_read_row(tessera_png *png, uint8_t *rgba, size_t length, uint32_t *row, int *pass) {
    int status = spng_get_row_info(png->ctx, &png->row);
    if (status == SPNG_EOI) return 0;
    if (status != 0) { fail(png, status); return -1; }
    *row = png->row.row_num;
    *pass = png->row.pass;
    status = spng_decode_row(png->ctx, rgba, length);
    if (status != 0 && status != SPNG_EOI) { fail(png, status); return -1; }
    return 1;
}

const char *tessera_png_message(const tessera_png *png) { return png->message; }

void tessera_png_close(tessera_png *png) {
    if (png == NULL) return;
    spng_ctx_free(png->ctx);
    free(png);
}
