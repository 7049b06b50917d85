// tessera_tiff.h — a TIFF's first page with libtiff (tessera_tiff.c), a strip or a row of tiles
// at a time.
#ifndef TESSERA_TIFF_H
#define TESSERA_TIFF_H

#include <stddef.h>
#include <stdint.h>

typedef struct tessera_tiff tessera_tiff;

/// The first page's tags, and what reading it holds.
typedef struct {
    uint32_t width;
    uint32_t height;
    uint16_t bits_per_sample;
    uint16_t samples_per_pixel;
    uint16_t photometric;      // PHOTOMETRIC_* (0 min-is-white, 1 min-is-black, 2 RGB, 3 palette, 5 separated, 6 YCbCr, ...)
    uint16_t planar;           // 1 contiguous, 2 separate planes
    uint16_t compression;
    uint16_t orientation;      // the Orientation tag, 1...8 (1 when absent)
    int32_t tiled;
    int32_t has_alpha;         // an extra sample that is alpha
    uint32_t chunk_rows;       // rows read at once: a strip's (or a few small strips'), or a row of tiles
    uint64_t chunk_bytes;      // what reading one chunk holds: libtiff's strip or tile buffers and the RGBA rows
    uint64_t image_bytes;      // the whole page's samples, decoded: the work a file of this size can ask for
    uint64_t tag_bytes;        // the page's tags' values, which libtiff holds while the page is open
} tessera_tiff_info;

/// Opens the TIFF on `fd` (read with pread, from byte 0) at its first page and sets up libtiff's
/// RGBA reading of it. libtiff allocates at most `max_allocation` bytes at once. NULL with the
/// reason in `message` when libtiff cannot read it, or cannot turn its page into RGBA.
/// The bytes the first page's tags hold (what libtiff loads to open it), from the file's own
/// IFD: its strips' and tiles' offsets and sizes left out (read when needed). `profile_refused`
/// (may be NULL): set to 1 when its ICC profile is larger than tessera_tiff_open takes (it then
/// refuses the page before libtiff opens it, whatever the tags hold).
uint64_t tessera_tiff_tag_bytes(int fd, uint64_t file_bytes, int *profile_refused);
/// `max_tag_bytes`: the most the page's tags may hold in all (at most 64 MiB whatever is given).
tessera_tiff *tessera_tiff_open(int fd, uint64_t file_bytes, uint64_t max_allocation, uint64_t max_tag_bytes, tessera_tiff_info *info,
                                char *message, size_t message_bytes);
/// When the picture in the TIFF-structured file on `fd` was taken, as YYYYMMDDhhmmss (0 when
/// it does not say): its EXIF IFD's DateTimeOriginal, else DateTimeDigitized, else the first
/// IFD's DateTime, read with pread (a TIFF, or a camera RAW built as one: CR2, NEF, ARW, DNG,
/// ORF, RW2).
int64_t tessera_tiff_date_taken(int fd, uint64_t file_bytes);
/// The ImageDescription tag, NULL when none; valid while the reader lives.
const char *tessera_tiff_description(tessera_tiff *tiff);
/// The ICC profile (TIFFTAG_ICCPROFILE), NULL when none; valid while the reader lives.
const uint8_t *tessera_tiff_icc(tessera_tiff *tiff, size_t *length);
/// Keeps an 8-bit contiguous CMYK page's inks as they are stored (C, M, Y, K: 0 is no ink) for a
/// CMYK profile to convert, instead of libtiff's formula; then read_rows gives 4 bytes a pixel.
/// Before tessera_tiff_start. 1 when the page is such a page, else 0; with `keep` 0 it only
/// says so.
int tessera_tiff_keep_inks(tessera_tiff *tiff, int keep);
/// Allocates the chunk's RGBA rows. 0, or -1 with the reason in tessera_tiff_message.
int tessera_tiff_start(tessera_tiff *tiff);
/// Up to `max_rows` next rows as RGB8 (`stride` bytes apart), alpha laid over the background
/// (red, green, blue); as CMYK8 after tessera_tiff_keep_inks. Returns the rows given (0 at the end), or -1 with the reason.
int tessera_tiff_read_rows(tessera_tiff *tiff, uint8_t *rgb, size_t stride, int max_rows,
                           uint8_t red, uint8_t green, uint8_t blue);
const char *tessera_tiff_message(const tessera_tiff *tiff);
/// What libtiff said was wrong with the data it decoded so far (a JPEG strip or tile smaller
/// than its place, the rest left unfilled), or NULL.
const char *tessera_tiff_problem(const tessera_tiff *tiff);
void tessera_tiff_close(tessera_tiff *tiff);

#endif
