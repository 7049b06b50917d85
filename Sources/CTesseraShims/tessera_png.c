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
int tessera_exif_read(const uint8_t *app1, size_t length, int64_t *date_taken);

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
    uint32_t text_chunks;           // tEXt, zTXt, iTXt before IDAT (counted by read_cicp)
    // An indexed image whose palette is shorter than its bit depth allows: indices past its end
    // are given `sentinel` (a colour the palette does not have) and counted as they come.
    int check_palette;
    uint8_t sentinel[4];
    uint32_t palette_entries;
    uint64_t bad_palette_pixels;
};

/// Tessera's limit on the metadata chunks libspng keeps (text, and unknown ones kept): each is
/// held in memory, so a file of a few MB with hundreds of thousands of them is refused.
static const uint32_t chunk_count_limit = 10000;

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

/// libspng's error said for a person (its own words name internal states: "non-recoverable
/// state", "reached chunk/cache limits").
static const char *readable(const struct tessera_png *png, int status) {
    switch (status) {
    case SPNG_IO_EOF: case SPNG_EIDAT_TOO_SHORT: return "the file ends early (truncated PNG)";
    case SPNG_ECHUNK_CRC: return "a chunk's CRC checksum is wrong: the file is corrupt";
    case SPNG_ECHUNK_LIMITS:
    case SPNG_EBADSTATE:
        // (EBADSTATE: libspng stopped at an earlier error that a getter swallowed, the chunk
        // limits almost always.) The limits set in tessera_png_open, in words.
        return png->text_chunks > chunk_count_limit ? "too many text chunks (more than 10000)"
                                                    : "metadata chunks (text, an ICC profile, EXIF) larger than Tessera "
                                                      "holds beside a photo (8 MiB a chunk, 12 MiB in all, as stored or "
                                                      "unpacked)";
    case SPNG_EIDAT_STREAM: case SPNG_EZLIB: return "its compressed image data is corrupt";
    case SPNG_EFILTER: return "a row has an unknown filter type: the image data is corrupt";
    case SPNG_EUSER_WIDTH: return "wider than the 1,048,576 px Tessera reads";
    case SPNG_EUSER_HEIGHT: return "taller than the 1,048,576 px Tessera reads";
    case SPNG_EMEM: return "out of memory";
    case SPNG_ESIGNATURE: return "not a PNG (bad signature)";
    case SPNG_ENOPLTE: return "an indexed image without a palette (PLTE)";
    default: return spng_strerror(status);
    }
}

/// Keeps the first failure: after one, libspng answers every call with "non-recoverable state".
static void fail(struct tessera_png *png, int status) {
    if (png->message[0] != 0) return;
    if (png->read_errno != 0) {
        snprintf(png->message, sizeof png->message, "read: %s", strerror(png->read_errno));
    } else {
        snprintf(png->message, sizeof png->message, "%s", readable(png, status));
    }
}

/// The bytes of the IDAT chunks (consecutive, as the format requires), by pread of the chunk
/// heads: the picture's compressed size, which bytes after IEND or in other chunks do not
/// make larger (a 583 KB bomb padded with 19 MB of zeros passed for a 20 MB photo). At most
/// 200,000 chunks are walked; the sum so far counts past that.
static void measure_image_data(struct tessera_png *png, tessera_png_info *info) {
    uint64_t at = 8, total = 0;
    int in_image = 0;
    for (uint32_t chunks = 0; chunks < 200000 && at + 8 <= png->file_bytes; chunks++) {
        uint8_t head[8];
        if (pread(png->fd, head, 8, (off_t)at) != 8) break;
        uint32_t length = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
        if (memcmp(head + 4, "IDAT", 4) == 0) {
            in_image = 1;
            total += length;
        } else if (in_image || memcmp(head + 4, "IEND", 4) == 0) {
            break;
        }
        at += 12 + (uint64_t)length;
    }
    info->image_data_bytes = total < png->file_bytes ? total : png->file_bytes;
}

/// cICP before IDAT: walks the chunk list by pread (lengths and types only).
static void read_cicp(struct tessera_png *png, tessera_png_info *info) {
    uint64_t at = 8;
    for (uint32_t chunks = 0; chunks <= chunk_count_limit + 1 && at + 8 <= png->file_bytes; chunks++) {
        uint8_t head[12];
        if (pread(png->fd, head, 8, (off_t)at) != 8) return;
        uint32_t length = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
        if (memcmp(head + 4, "IDAT", 4) == 0 || memcmp(head + 4, "IEND", 4) == 0) return;
        if (memcmp(head + 4, "tEXt", 4) == 0 || memcmp(head + 4, "zTXt", 4) == 0 || memcmp(head + 4, "iTXt", 4) == 0) png->text_chunks++;
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
    // above 8 MiB (what a profile may take to convert, TESSERA_COLOR_MAKING_BYTES), and at most
    // 12 MiB of chunks kept: they are held beside the decode, outside its budget.
    spng_set_image_limits(png->ctx, 1u << 20, 1u << 20);
    spng_set_chunk_limits(png->ctx, TESSERA_COLOR_MAKING_BYTES, 12u << 20);
    spng_set_option(png->ctx, SPNG_CHUNK_COUNT_LIMIT, (int)chunk_count_limit);
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
        // The EXIF reader takes the JPEG APP1 form: "Exif\0\0" then the TIFF structure.
        uint8_t *app1 = malloc(exif.length + 6);
        if (app1 != NULL) {
            memcpy(app1, "Exif\0\0", 6);
            memcpy(app1 + 6, exif.data, exif.length);
            info->exif_orientation = tessera_exif_read(app1, exif.length + 6, &info->date_taken);
            free(app1);
        }
    }
    read_cicp(png, info);
    measure_image_data(png, info);
    return png;
}

const uint8_t *tessera_png_icc(tessera_png *png, size_t *length) {
    if (!png->has_iccp) { *length = 0; return NULL; }
    *length = png->iccp.profile_len;
    return (const uint8_t *)png->iccp.profile;
}

/// For an indexed image with fewer palette entries than its bit depth allows: the palette given
/// to libspng is filled to the end with a colour none of its entries has, so the pixels whose
/// index is past the file's palette (libspng 0.7 draws them black, silently) can be counted.
static int fill_palette(struct tessera_png *png) {
    struct spng_ihdr ihdr;
    struct spng_plte plte;
    if (spng_get_ihdr(png->ctx, &ihdr) != 0 || ihdr.color_type != SPNG_COLOR_TYPE_INDEXED) return 0;
    int status = spng_get_plte(png->ctx, &plte);
    if (status != 0) return status;
    uint32_t capacity = 1u << ihdr.bit_depth;
    if (plte.n_entries >= capacity) return 0;
    uint8_t colour[3] = { 1, 2, 3 };
    for (int taken = 1; taken;) {
        taken = 0;
        for (uint32_t i = 0; i < plte.n_entries; i++) {
            if (plte.entries[i].red == colour[0] && plte.entries[i].green == colour[1] && plte.entries[i].blue == colour[2]) taken = 1;
        }
        if (taken && ++colour[0] == 0) colour[1]++;
    }
    png->palette_entries = plte.n_entries;
    for (uint32_t i = plte.n_entries; i < capacity; i++) {
        plte.entries[i].red = colour[0];
        plte.entries[i].green = colour[1];
        plte.entries[i].blue = colour[2];
        plte.entries[i].alpha = 255;
    }
    plte.n_entries = capacity;
    status = spng_set_plte(png->ctx, &plte);
    if (status != 0) return status;
    memcpy(png->sentinel, colour, 3);
    png->sentinel[3] = 255;
    png->check_palette = 1;
    return 0;
}

int tessera_png_start(tessera_png *png) {
    int status = fill_palette(png);
    if (status != 0) { fail(png, status); return -1; }
    status = spng_decode_image(png->ctx, NULL, 0, SPNG_FMT_RGBA8, SPNG_DECODE_TRNS | SPNG_DECODE_PROGRESSIVE);
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
    if (png->check_palette) {
        // This pass's columns only: the others hold what an earlier row left.
        static const int first[7] = { 0, 4, 0, 2, 0, 1, 0 }, step[7] = { 8, 8, 4, 4, 2, 2, 1 };
        struct spng_ihdr ihdr;
        spng_get_ihdr(png->ctx, &ihdr);
        int p = ihdr.interlace_method != 0 && *pass >= 0 && *pass < 7 ? *pass : 6;
        for (size_t x = (size_t)first[p]; x * 4 + 4 <= length; x += (size_t)step[p]) {
            uint8_t *pixel = rgba + x * 4;
            if (memcmp(pixel, png->sentinel, 4) == 0) {
                pixel[0] = pixel[1] = pixel[2] = 0;  // black, as libspng draws them
                png->bad_palette_pixels++;
            }
        }
    }
    return 1;
}

int tessera_png_finish(tessera_png *png) {
    uint32_t count = 0;
    int status = spng_get_text(png->ctx, NULL, &count);
    if (status == 0 || status == SPNG_ECHUNKAVAIL) return 0;
    fail(png, status);
    return -1;
}

uint64_t tessera_png_bad_palette_pixels(const tessera_png *png, uint32_t *palette_entries) {
    *palette_entries = png->palette_entries;
    return png->bad_palette_pixels;
}

const char *tessera_png_message(const tessera_png *png) { return png->message; }

void tessera_png_close(tessera_png *png) {
    if (png == NULL) return;
    spng_ctx_free(png->ctx);
    free(png);
}
