// tessera_tiff.c — a TIFF's first page with libtiff, read from a file descriptor with pread.
//
// libtiff's RGBA interface (TIFFRGBAImage) turns every layout it knows into RGBA8: 8 and 16
// bits, grey, RGB, palette, CMYK, YCbCr, with or without alpha, contiguous or planar, strips or
// tiles. It is asked for one chunk of rows at a time: a strip (a few strips when they are a
// row or two each), or a row of tiles, so each strip or tile is decoded once and only one
// chunk is held. Its own flips for the Orientation tag are turned off (the rows come as
// stored): Tessera turns the cell, as it does for every format. libtiff's messages go to this
// reader, never to stderr.
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <tiffio.h>

#include "tessera_tiff.h"
#include "tessera_shims.h"

struct tessera_tiff {
    TIFF *tif;
    int fd;
    uint64_t offset;
    uint64_t file_bytes;
    tessera_tiff_info info;
    TIFFRGBAImage image;
    int image_begun;
    uint32_t *raster;      // chunk_rows rows of RGBA
    uint32_t chunk_first;  // the first row held in the raster
    uint32_t chunk_count;  // rows held (0: none yet)
    uint32_t next_row;
    int inks;              // the raster holds C, M, Y, K bytes (tessera_tiff_keep_inks), not RGBA
    char message[300];
    char problem[300];     // a warning about the data (tessera_tiff_problem)
};

static tmsize_t read_proc(thandle_t handle, void *buffer, tmsize_t size) {
    struct tessera_tiff *tiff = handle;
    tmsize_t done = 0;
    while (done < size) {
        ssize_t n = pread(tiff->fd, (uint8_t *)buffer + done, (size_t)(size - done), (off_t)tiff->offset);
        if (n < 0) {
            if (errno == EINTR) continue;
            return done > 0 ? done : -1;
        }
        if (n == 0) break;
        tiff->offset += (uint64_t)n;
        done += n;
    }
    return done;
}

static tmsize_t write_proc(thandle_t handle, void *buffer, tmsize_t size) {
    (void)handle; (void)buffer; (void)size;
    return -1;
}

static toff_t seek_proc(thandle_t handle, toff_t offset, int whence) {
    struct tessera_tiff *tiff = handle;
    uint64_t base = whence == SEEK_CUR ? tiff->offset : whence == SEEK_END ? tiff->file_bytes : 0;
    tiff->offset = base + offset;
    return tiff->offset;
}

static int close_proc(thandle_t handle) { (void)handle; return 0; }

static toff_t size_proc(thandle_t handle) { return ((struct tessera_tiff *)handle)->file_bytes; }

static int map_proc(thandle_t handle, void **base, toff_t *size) { (void)handle; (void)base; (void)size; return 0; }

static void unmap_proc(thandle_t handle, void *base, toff_t size) { (void)handle; (void)base; (void)size; }

static int on_error(TIFF *tif, void *user, const char *module, const char *format, va_list args) {
    (void)tif; (void)module;
    struct tessera_tiff *tiff = user;
    // The first error is the cause; later ones follow from it.
    if (tiff->message[0] == 0) vsnprintf(tiff->message, sizeof tiff->message, format, args);
    return 1;
}

/// libtiff's warnings are dropped: most say a tag is unknown (every camera and scanner writes
/// private ones), nothing a person can act on; what goes wrong with the data is an error. But
/// one: a JPEG strip or tile smaller than its place, whose rest libtiff leaves unfilled (the
/// cell was drawn mostly black without a word: a helper's finding), is kept as the page's
/// problem, and the photo counts as drawn in part.
static int on_warning(TIFF *tif, void *user, const char *module, const char *format, va_list args) {
    (void)tif; (void)module;
    struct tessera_tiff *tiff = user;
    if (tiff->problem[0] == 0 && strstr(format, "Improper JPEG strip/tile size") != NULL) {
        vsnprintf(tiff->problem, sizeof tiff->problem, format, args);
    }
    return 1;
}

const char *tessera_tiff_problem(const tessera_tiff *tiff) { return tiff->problem[0] ? tiff->problem : NULL; }

static pthread_once_t silenced = PTHREAD_ONCE_INIT;

/// libtiff's process-wide handlers print to stderr; a library never prints. Every reader has
/// handlers of its own, so the global ones get only what comes before a TIFF is open.
static void silence_global_handlers(void) {
    TIFFSetErrorHandler(NULL);
    TIFFSetWarningHandler(NULL);
}

static void fill_info(struct tessera_tiff *tiff) {
    TIFF *tif = tiff->tif;
    tessera_tiff_info *info = &tiff->info;
    uint16_t extra_count = 0, *extra = NULL;
    TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &info->width);
    TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &info->height);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &info->bits_per_sample);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &info->samples_per_pixel);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &info->planar);
    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &info->compression);
    if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &info->photometric)) info->photometric = 0xFFFF;
    if (!TIFFGetField(tif, TIFFTAG_ORIENTATION, &info->orientation) || info->orientation < 1 || info->orientation > 8)
        info->orientation = 1;
    if (TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &extra_count, &extra) && extra_count > 0 && extra != NULL)
        info->has_alpha = extra[0] == EXTRASAMPLE_ASSOCALPHA || extra[0] == EXTRASAMPLE_UNASSALPHA;
    info->tiled = TIFFIsTiled(tif);
    uint64_t planes = info->planar == PLANARCONFIG_SEPARATE ? info->samples_per_pixel : 1;
    uint64_t buffer;
    if (info->tiled) {
        uint32_t tile_height = 0;
        TIFFGetField(tif, TIFFTAG_TILELENGTH, &tile_height);
        info->chunk_rows = tile_height;
        buffer = TIFFTileSize64(tif) * planes;
    } else {
        uint32_t rows = 0;
        TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rows);
        if (rows == 0 || rows > info->height) rows = info->height;
        buffer = TIFFStripSize64(tif) * planes;
        // Strips of a row or two: a few at once, so a chunk is not a call per row.
        info->chunk_rows = rows < 16 ? (16 / rows) * rows : rows;
    }
    if (info->chunk_rows == 0 || info->chunk_rows > info->height) info->chunk_rows = info->height;
    // libtiff's decoded buffer, and the raw bytes it reads a compressed strip or tile into
    // (about as large, at most), and the RGBA rows.
    info->chunk_bytes = 2 * buffer + (uint64_t)info->width * info->chunk_rows * 4;
    info->image_bytes = TIFFScanlineSize64(tif) * planes * info->height;
}

/// The bytes of the first page's ICC profile tag (34675), and of all its tags' values but the
/// strips' and tiles' offsets and sizes (which "O" mode reads as needed, checked below), read
/// from the file's first IFD (classic or BigTIFF) before libtiff opens it; 0 and 0 when they
/// cannot be read. libtiff reads every tag of the page, known or not, into memory when it
/// opens it, outside any budget: a 40 MB profile tag took 97 MB at --max-memory 64M and was
/// OOM-killed in a 64 MiB cgroup, though the profile is then refused (over 8 MiB); 2,000
/// private tags pointing at the same 1 MiB of a 1 MB file took 1.9 GB (a helper's finding).
/// The most a page's tags may hold in all (tessera_tiff_open).
#define TESSERA_TIFF_TAG_BYTES (64 << 20)

static uint64_t icc_tag_bytes(int fd, uint64_t file_bytes, uint64_t *all_tags) {
    *all_tags = 0;
    uint8_t head[16];
    if (file_bytes < 16 || pread(fd, head, 16, 0) != 16) return 0;
    int little = head[0] == 'I' && head[1] == 'I';
    if (!little && !(head[0] == 'M' && head[1] == 'M')) return 0;
    #define TESSERA_READ(bytes, n) ({ uint64_t v = 0; for (int k = 0; k < (n); k++) \
        v |= (uint64_t)(bytes)[little ? k : (n) - 1 - k] << (8 * k); v; })
    uint64_t magic = TESSERA_READ(head + 2, 2);
    int big = magic == 43;
    if (magic != 42 && !big) return 0;
    uint64_t ifd = big ? TESSERA_READ(head + 8, 8) : TESSERA_READ(head + 4, 4);
    uint8_t counted[8];
    if (ifd >= file_bytes || pread(fd, counted, big ? 8 : 2, (off_t)ifd) != (big ? 8 : 2)) return 0;
    uint64_t count = big ? TESSERA_READ(counted, 8) : TESSERA_READ(counted, 2);
    size_t entry = big ? 20 : 12;
    if (count > 4096) count = 4096;
    uint8_t *entries = malloc(count * entry + 1);
    if (entries == NULL) return 0;
    uint64_t found = 0;
    ssize_t got = pread(fd, entries, count * entry, (off_t)(ifd + (big ? 8 : 2)));
    for (uint64_t i = 0; got > 0 && i < (uint64_t)got / entry; i++) {
        const uint8_t *e = entries + i * entry;
        uint64_t tag = TESSERA_READ(e, 2);
        uint64_t type = TESSERA_READ(e + 2, 2), n = big ? TESSERA_READ(e + 4, 8) : TESSERA_READ(e + 4, 4);
        uint64_t size = (type == 3 || type == 8) ? 2 : (type == 4 || type == 9 || type == 11 || type == 13) ? 4
                      : (type == 5 || type == 10 || type == 12 || type >= 16) ? 8 : 1;
        uint64_t bytes = n > UINT64_MAX / 8 ? UINT64_MAX : n * size;
        if (tag == 34675 && found == 0) found = bytes;
        if (tag == 273 || tag == 279 || tag == 324 || tag == 325) continue;  // offsets and sizes
        // A value the file cannot hold is one libtiff ignores (its sanity check on the size),
        // holding nothing: a fuzzed tag of 4.9 TiB in a file of a few KB was refused as
        // wanting a 6.5 TiB budget. What the file holds libtiff may read, once a tag.
        if (bytes > file_bytes) bytes = file_bytes;
        *all_tags = bytes > UINT64_MAX - *all_tags ? UINT64_MAX : *all_tags + bytes;
    }
    #undef TESSERA_READ
    free(entries);
    return found;
}

// MARK: The date taken, from the file's own IFDs

typedef struct {
    int fd;
    uint64_t file_bytes;
    int little;
    int big;  // BigTIFF: 8-byte counts and offsets, 20-byte entries
} ifd_file;

static uint64_t ifd_number(const ifd_file *file, const uint8_t *bytes, int count) {
    uint64_t value = 0;
    for (int k = 0; k < count; k++) value |= (uint64_t)bytes[file->little ? k : count - 1 - k] << (8 * k);
    return value;
}

/// The entry of `tag` in the IFD at `ifd` (its 12 or 20 bytes in `entry`), 1 when found.
static int ifd_entry(const ifd_file *file, uint64_t ifd, uint16_t tag, uint8_t entry[20]) {
    uint8_t counted[8];
    int count_bytes = file->big ? 8 : 2;
    if (ifd < 8 || ifd >= file->file_bytes || pread(file->fd, counted, (size_t)count_bytes, (off_t)ifd) != count_bytes) return 0;
    uint64_t count = ifd_number(file, counted, count_bytes);
    size_t size = file->big ? 20 : 12;
    if (count > 4096) count = 4096;
    uint8_t entries[64 * 20];
    for (uint64_t first = 0; first < count; first += 64) {
        uint64_t batch = count - first < 64 ? count - first : 64;
        ssize_t got = pread(file->fd, entries, batch * size, (off_t)(ifd + (uint64_t)count_bytes + first * size));
        if (got <= 0) return 0;
        for (uint64_t i = 0; i < (uint64_t)got / size; i++) {
            if (ifd_number(file, entries + i * size, 2) != tag) continue;
            memcpy(entry, entries + i * size, size);
            return 1;
        }
        if ((uint64_t)got < batch * size) return 0;
    }
    return 0;
}

/// The date in the ASCII entry of `tag` in the IFD at `ifd`; 0 when none is plausible.
static int64_t ifd_date(const ifd_file *file, uint64_t ifd, uint16_t tag) {
    uint8_t entry[20], text[20];
    if (!ifd_entry(file, ifd, tag, entry) || ifd_number(file, entry + 2, 2) != 2) return 0;
    uint64_t count = file->big ? ifd_number(file, entry + 4, 8) : ifd_number(file, entry + 4, 4);
    if (count < 19) return 0;  // and so never inline: the entry holds its offset
    uint64_t at = file->big ? ifd_number(file, entry + 12, 8) : ifd_number(file, entry + 8, 4);
    if (at >= file->file_bytes || pread(file->fd, text, 19, (off_t)at) != 19) return 0;
    return tessera_exif_date_text(text, 19);
}

int64_t tessera_tiff_date_taken(int fd, uint64_t file_bytes) {
    uint8_t head[16];
    if (file_bytes < 16 || pread(fd, head, 16, 0) != 16) return 0;
    ifd_file file = { .fd = fd, .file_bytes = file_bytes, .little = head[0] == 'I' && head[1] == 'I' };
    if (!file.little && !(head[0] == 'M' && head[1] == 'M')) return 0;
    uint64_t magic = ifd_number(&file, head + 2, 2);
    file.big = magic == 43;
    // TIFF 42, BigTIFF 43, and the camera RAWs built as TIFFs under another number: Olympus's
    // ORF ("RO", "RS") and Panasonic's RW2 (0x55).
    if (magic != 42 && !file.big && magic != 0x4f52 && magic != 0x5352 && magic != 0x55) return 0;
    uint64_t ifd0 = file.big ? ifd_number(&file, head + 8, 8) : ifd_number(&file, head + 4, 4);
    uint8_t entry[20];
    if (ifd_entry(&file, ifd0, 34665, entry)) {  // the EXIF IFD
        uint64_t exif = file.big ? ifd_number(&file, entry + 12, 8) : ifd_number(&file, entry + 8, 4);
        int64_t date = ifd_date(&file, exif, 36867);     // DateTimeOriginal
        if (date == 0) date = ifd_date(&file, exif, 36868);  // DateTimeDigitized
        if (date != 0) return date;
    }
    return ifd_date(&file, ifd0, 306);  // DateTime
}

// MARK: What the codecs inside libtiff would allocate

/// Whether libtiff's decoder for `compression` allocates no more than the strip or tile it
/// decodes (libtiff checks the decoded size against it): none, the CCITT and fax codings, LZW,
/// Deflate, PackBits, NeXT, ThunderScan, PixarLog, SGI Log, LZMA, ZSTD and LERC (each tried
/// with a dictionary or a count far past its strip: stopped at the strip). JPEG and WebP are
/// checked strip by strip below. Any other is refused: JBIG's decoder (jbig-kit) allocates the
/// size its own header declares before libtiff sees it, so a 168-byte 64 x 64 page whose JBIG
/// data says 120,000 x 120,000 took 1.8 GB (a helper's finding), and a codec not known here
/// is not known to be bounded.
static int bounded_codec(uint16_t compression) {
    switch (compression) {
    case COMPRESSION_NONE: case COMPRESSION_CCITTRLE: case COMPRESSION_CCITTFAX3: case COMPRESSION_CCITTFAX4:
    case COMPRESSION_LZW: case COMPRESSION_OJPEG: case COMPRESSION_ADOBE_DEFLATE: case COMPRESSION_DEFLATE:
    case COMPRESSION_NEXT: case COMPRESSION_CCITTRLEW: case COMPRESSION_PACKBITS: case COMPRESSION_THUNDERSCAN:
    case COMPRESSION_PIXARLOG: case COMPRESSION_SGILOG: case COMPRESSION_SGILOG24: case COMPRESSION_LZMA:
    case COMPRESSION_ZSTD: case COMPRESSION_LERC:
        return 1;
    default:
        return 0;
    }
}

/// How much of a JPEG strip's or tile's start is read for its frame header: a real one's SOF
/// comes within a few hundred bytes (tables, at most, before it).
#define TESSERA_STRILE_HEAD_BYTES (64 << 10)

/// The frame of the JPEG stream in `head` (the first bytes of a JPEG-compressed strip or
/// tile): its width and height from its SOF, found by walking its markers as libjpeg does
/// (bytes that are not a marker skipped, fill bytes, markers without a length: RSTn, TEM).
/// 0 when there is none before the scan or the end of `head`: the strip is then refused,
/// since libjpeg may find one where this walk stopped (a helper hid it behind one stray byte,
/// a restart marker, or 4,097 comments: 476 MiB).
static int strile_jpeg_frame(const uint8_t *head, size_t length, uint32_t *width, uint32_t *height) {
    if (length < 4 || head[0] != 0xFF || head[1] != 0xD8) return 0;
    size_t pos = 2;
    while (pos + 2 <= length) {
        if (head[pos] != 0xFF) { pos++; continue; }  // not a marker: libjpeg skips it too
        uint8_t marker = head[pos + 1];
        if (marker == 0xFF || marker == 0x00) { pos++; continue; }
        if ((marker >= 0xD0 && marker <= 0xD7) || marker == 0x01 || marker == 0xD8) { pos += 2; continue; }
        if (marker == 0xDA || marker == 0xD9 || pos + 4 > length) return 0;
        size_t segment = ((size_t)head[pos + 2] << 8) | head[pos + 3];
        if (marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
            if (pos + 9 > length) return 0;
            *height = ((uint32_t)head[pos + 5] << 8) | head[pos + 6];
            *width = ((uint32_t)head[pos + 7] << 8) | head[pos + 8];
            return 1;
        }
        pos += 2 + segment;
    }
    return 0;
}

/// Every strip or tile of a JPEG- or WebP-compressed page checked before libtiff decodes one:
/// its own JPEG frame no larger than the strip or tile, and a lossless WebP's tables within
/// `cap`. libtiff takes a last strip taller than the page says (a warning), and libjpeg then
/// holds every coefficient of a progressive one: a 939 KB file of 4000 x 8 px whose last strip
/// is a 4000 x 60,000 progressive JPEG took 489 MB (a helper's finding). And libtiff hands a
/// WebP strip to libwebp itself, past the measure of a lossless stream that a .webp gets
/// (tessera_vp8l.c): the test suite's 65,536-group stream as a strip took 391 MB.
static int check_striles(struct tessera_tiff *tiff, uint64_t cap, char *message, size_t message_bytes) {
    TIFF *tif = tiff->tif;
    uint16_t compression = tiff->info.compression;
    if (!bounded_codec(compression) && compression != COMPRESSION_JPEG && compression != COMPRESSION_WEBP) {
        snprintf(message, message_bytes, "its page is compressed with %s (TIFF compression %u), whose decoder Tessera does "
                 "not let libtiff run: it allocates what its own data declares, unchecked",
                 compression == COMPRESSION_JBIG ? "JBIG" : "a codec Tessera does not know", compression);
        return 0;
    }
    if (bounded_codec(compression)) return 1;
    int tiled = TIFFIsTiled(tif);
    uint32_t strile_width = tiff->info.width, strile_rows = tiff->info.chunk_rows;
    if (tiled) {
        TIFFGetField(tif, TIFFTAG_TILEWIDTH, &strile_width);
        TIFFGetField(tif, TIFFTAG_TILELENGTH, &strile_rows);
    } else {
        uint32_t rows = 0;
        TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rows);
        strile_rows = rows == 0 || rows > tiff->info.height ? tiff->info.height : rows;
    }
    uint32_t count = tiled ? TIFFNumberOfTiles(tif) : TIFFNumberOfStrips(tif);
    // Strips lie apart in a real file, so their heads together are at most the file: more
    // means strips that share their bytes, each walked again (100,000 strips on one 16 KB
    // strip of comments ran for minutes: a helper's finding).
    uint64_t read_in_all = 0, last_at = UINT64_MAX;
    uint8_t *head = compression == COMPRESSION_JPEG ? malloc(TESSERA_STRILE_HEAD_BYTES) : NULL;
    if (compression == COMPRESSION_JPEG && head == NULL) {
        snprintf(message, message_bytes, "out of memory");
        return 0;
    }
    for (uint32_t i = 0; i < count; i++) {
        int failed = 0;
        uint64_t at = TIFFGetStrileOffsetWithErr(tif, i, &failed), length = TIFFGetStrileByteCountWithErr(tif, i, &failed);
        if (failed || length == 0 || at >= tiff->file_bytes) continue;  // libtiff fails it when it comes to it
        if (length > tiff->file_bytes - at) length = tiff->file_bytes - at;
        if (compression == COMPRESSION_JPEG) {
            if (at == last_at) continue;  // the same bytes as the strip before: checked
            last_at = at;
            size_t want = length < TESSERA_STRILE_HEAD_BYTES ? (size_t)length : TESSERA_STRILE_HEAD_BYTES;
            read_in_all += want;
            if (read_in_all > tiff->file_bytes + TESSERA_STRILE_HEAD_BYTES) {
                snprintf(message, message_bytes, "its %ss share their bytes (their JPEG heads come to more than the file): "
                         "each would be decoded again", tiled ? "tile" : "strip");
                free(head);
                return 0;
            }
            ssize_t got = pread(tiff->fd, head, want, (off_t)at);
            uint32_t width = 0, height = 0;
            if (got <= 0 || !strile_jpeg_frame(head, (size_t)got, &width, &height)) {
                snprintf(message, message_bytes, "its %s %u holds no JPEG frame header in its first %d KiB that Tessera can "
                         "check against its size", tiled ? "tile" : "strip", i, TESSERA_STRILE_HEAD_BYTES >> 10);
                free(head);
                return 0;
            }
            if (width > strile_width || height > strile_rows) {
                snprintf(message, message_bytes, "its %s %u holds a JPEG of %u x %u px where the page has room for %u x %u: "
                         "libjpeg would hold all of it", tiled ? "tile" : "strip", i, width, height, strile_width, strile_rows);
                free(head);
                return 0;
            }
            continue;
        }
        // WebP: libtiff writes a RIFF whose one chunk is VP8 (lossy) or VP8L (lossless); a VP8L
        // is measured. Any other layout (VP8X, with its ALPH and VP8L chunks anywhere) is
        // refused: libwebp would decode it unmeasured (381 MiB for the 65,536 groups as VP8X).
        uint8_t riff[25];
        if (length < 25 || pread(tiff->fd, riff, 25, (off_t)at) != 25) continue;
        if (memcmp(riff, "RIFF", 4) != 0 || memcmp(riff + 8, "WEBP", 4) != 0
            || (memcmp(riff + 12, "VP8 ", 4) != 0 && memcmp(riff + 12, "VP8L", 4) != 0)) {
            snprintf(message, message_bytes, "its %s %u is not a WebP of the one layout libtiff writes (a VP8 or VP8L "
                     "chunk alone): libwebp would decode it unmeasured", tiled ? "tile" : "strip", i);
            return 0;
        }
        if (memcmp(riff + 12, "VP8L", 4) != 0) continue;
        if (length > cap) {
            snprintf(message, message_bytes, "its %s %u is a lossless WebP of %llu bytes, more than its memory budget allows",
                     tiled ? "tile" : "strip", i, (unsigned long long)length);
            return 0;
        }
        uint8_t *data = malloc((size_t)length);
        if (data == NULL || pread(tiff->fd, data, (size_t)length, (off_t)at) != (ssize_t)length) {
            free(data);
            continue;
        }
        uint32_t bits = (uint32_t)data[21] | ((uint32_t)data[22] << 8) | ((uint32_t)data[23] << 16) | ((uint32_t)data[24] << 24);
        uint32_t width = (bits & 0x3FFF) + 1, height = ((bits >> 14) & 0x3FFF) + 1;
        tessera_vp8l_cost cost = {0};
        char why[200] = {0};
        int measured = data[20] == 0x2F ? tessera_vp8l_measure(data + 25, (size_t)length - 25, width, height, 0, cap, &cost,
                                                               why, sizeof why) : 0;
        free(data);
        if (measured < 0 || cost.bytes > cap) {
            snprintf(message, message_bytes, "its %s %u is a lossless WebP %s", tiled ? "tile" : "strip", i,
                     measured < 0 ? why : "that libwebp would need more memory to decode than its budget allows");
            return 0;
        }
    }
    free(head);
    return 1;
}

uint64_t tessera_tiff_tag_bytes(int fd, uint64_t file_bytes, int *profile_refused) {
    uint64_t all_tags = 0, profile = icc_tag_bytes(fd, file_bytes, &all_tags);
    if (profile_refused != NULL) *profile_refused = profile > TESSERA_COLOR_MAKING_BYTES;
    return all_tags;
}

tessera_tiff *tessera_tiff_open(int fd, uint64_t file_bytes, uint64_t max_allocation, uint64_t max_tag_bytes, tessera_tiff_info *info,
                                char *message, size_t message_bytes) {
    pthread_once(&silenced, silence_global_handlers);
    uint64_t all_tags = 0, profile = icc_tag_bytes(fd, file_bytes, &all_tags);
    if (profile > TESSERA_COLOR_MAKING_BYTES) {
        snprintf(message, message_bytes, "its ICC profile of %llu bytes is larger than a profile may be (%d MiB), and libtiff "
                 "would hold it whole to open the page", (unsigned long long)profile, TESSERA_COLOR_MAKING_BYTES >> 20);
        return NULL;
    }
    // The tags in all may hold what one of them may (libtiff's cap on one allocation, at the
    // scan's 64 MiB): the same for the scan and the render whatever the budget, so a photo the
    // scan takes is drawn, and a layered Photoshop TIFF of tens of MB still is, as before.
    // (The scan gives less under a small budget: TIFFFormat.scan.)
    uint64_t tag_cap = max_tag_bytes < TESSERA_TIFF_TAG_BYTES ? max_tag_bytes : TESSERA_TIFF_TAG_BYTES;
    if (all_tags > tag_cap) {
        snprintf(message, message_bytes, "its tags hold %.1f MiB, which libtiff would hold in memory to open the page: more "
                 "than the %.1f MiB Tessera lets it", all_tags / 1048576.0, tag_cap / 1048576.0);
        return NULL;
    }
    struct tessera_tiff *tiff = calloc(1, sizeof *tiff);
    if (tiff == NULL) {
        snprintf(message, message_bytes, "out of memory");
        return NULL;
    }
    tiff->fd = fd;
    tiff->file_bytes = file_bytes;
    TIFFOpenOptions *options = TIFFOpenOptionsAlloc();
    if (options == NULL) {
        free(tiff);
        snprintf(message, message_bytes, "out of memory");
        return NULL;
    }
    TIFFOpenOptionsSetMaxSingleMemAlloc(options, (tmsize_t)(max_allocation > (uint64_t)INT64_MAX ? INT64_MAX : max_allocation));
    TIFFOpenOptionsSetErrorHandlerExtR(options, on_error, tiff);
    TIFFOpenOptionsSetWarningHandlerExtR(options, on_warning, tiff);
    // "m": no memory mapping (every read is a pread through read_proc). "O": each strip's or
    // tile's offset and size read from the file when it is needed, not every one into two
    // arrays at open (libtiff still fills its arrays as the strips are read: see below).
    tiff->tif = TIFFClientOpenExt("photo", "rmO", tiff, read_proc, write_proc, seek_proc, close_proc, size_proc,
                                  map_proc, unmap_proc, options);
    TIFFOpenOptionsFree(options);
    if (tiff->tif == NULL) {
        snprintf(message, message_bytes, "%s", tiff->message[0] ? tiff->message : "not a TIFF libtiff reads");
        free(tiff);
        return NULL;
    }
    fill_info(tiff);
    tiff->info.tag_bytes = all_tags;
    // A strip's or tile's offset and size take 16 bytes in libtiff's two arrays, each array
    // under the allocation cap, together over it: a 46 MB file of 5.8 million one-row strips
    // grew the process by 92 MB (a helper's finding). A quarter of the cap is far more than any
    // photo needs (a 150,000 px square in 256 px tiles has 343,000: 5.5 MB).
    uint64_t striles = TIFFIsTiled(tiff->tif) ? TIFFNumberOfTiles(tiff->tif) : TIFFNumberOfStrips(tiff->tif);
    if (striles * 16 > max_allocation / 4) {
        snprintf(message, message_bytes, "its %llu %s need %llu MiB of offsets, more than its memory budget allows",
                 (unsigned long long)striles, TIFFIsTiled(tiff->tif) ? "tiles" : "strips",
                 (unsigned long long)((striles * 16) >> 20));
        tessera_tiff_close(tiff);
        return NULL;
    }
    if (!check_striles(tiff, max_allocation, message, message_bytes)) {
        tessera_tiff_close(tiff);
        return NULL;
    }
    // Begun here, not when drawing: a layout libtiff's RGBA interface accepts but cannot set up
    // (16-bit CMYK) is then known to the scan, not a placeholder in the render.
    char reason[1024] = {0};
    if (!TIFFRGBAImageOK(tiff->tif, reason) || !TIFFRGBAImageBegin(&tiff->image, tiff->tif, 1, reason)) {
        snprintf(message, message_bytes, "%s", reason[0] ? reason : "a layout libtiff cannot turn into RGB");
        tessera_tiff_close(tiff);
        return NULL;
    }
    tiff->image_begun = 1;
    // The rows as stored, top to bottom: the caller turns the cell for the Orientation tag.
    tiff->image.req_orientation = ORIENTATION_TOPLEFT;
    tiff->image.orientation = ORIENTATION_TOPLEFT;
    *info = tiff->info;
    return tiff;
}

const char *tessera_tiff_description(tessera_tiff *tiff) {
    const char *text = NULL;
    return TIFFGetField(tiff->tif, TIFFTAG_IMAGEDESCRIPTION, &text) ? text : NULL;
}

const uint8_t *tessera_tiff_icc(tessera_tiff *tiff, size_t *length) {
    uint32_t count = 0;
    void *data = NULL;
    if (!TIFFGetField(tiff->tif, TIFFTAG_ICCPROFILE, &count, &data) || data == NULL || count == 0) {
        *length = 0;
        return NULL;
    }
    *length = count;
    return data;
}

/// libtiff's put routine for 8-bit contiguous CMYK with its formula taken out: each pixel's four
/// ink bytes go to the raster as they are stored (the raster's uint32 is four bytes in memory
/// order), with the same skews as libtiff's own routine for the layout.
static void put_inks(TIFFRGBAImage *img, uint32_t *cp, uint32_t x, uint32_t y, uint32_t w, uint32_t h,
                     int32_t fromskew, int32_t toskew, unsigned char *pp) {
    (void)x; (void)y;
    int samples = img->samplesperpixel;
    fromskew *= samples;
    for (; h > 0; --h) {
        for (uint32_t i = 0; i < w; i++) {
            memcpy(cp++, pp, 4);
            pp += samples;
        }
        cp += toskew;
        pp += fromskew;
    }
}

int tessera_tiff_keep_inks(tessera_tiff *tiff, int keep) {
    uint16_t inkset = INKSET_CMYK;
    TIFFGetFieldDefaulted(tiff->tif, TIFFTAG_INKSET, &inkset);
    const tessera_tiff_info *info = &tiff->info;
    // The layout libtiff's RGBA interface draws with its 8-bit contiguous CMYK routine (a
    // transfer map, which it builds for other bit depths, has no part in it).
    if (info->photometric != PHOTOMETRIC_SEPARATED || inkset != INKSET_CMYK || info->bits_per_sample != 8
        || info->samples_per_pixel < 4 || info->planar != PLANARCONFIG_CONTIG || tiff->image.isContig == 0
        || tiff->image.Map != NULL || tiff->raster != NULL)
        return 0;
    if (keep) {
        tiff->image.put.contig = put_inks;
        tiff->inks = 1;
    }
    return 1;
}

int tessera_tiff_start(tessera_tiff *tiff) {
    size_t pixels = (size_t)tiff->info.width * tiff->info.chunk_rows;
    tiff->raster = malloc(pixels * sizeof(uint32_t));
    if (tiff->raster == NULL) {
        snprintf(tiff->message, sizeof tiff->message, "out of memory for %u rows of %u px", tiff->info.chunk_rows, tiff->info.width);
        return -1;
    }
    return 0;
}

/// Reads the chunk holding `row` (chunks start at multiples of chunk_rows).
static int fill_chunk(struct tessera_tiff *tiff, uint32_t row) {
    uint32_t first = row / tiff->info.chunk_rows * tiff->info.chunk_rows;
    uint32_t count = tiff->info.height - first < tiff->info.chunk_rows ? tiff->info.height - first : tiff->info.chunk_rows;
    tiff->image.row_offset = (int)first;
    tiff->image.col_offset = 0;
    if (!TIFFRGBAImageGet(&tiff->image, tiff->raster, tiff->info.width, count)) {
        if (tiff->message[0] == 0) snprintf(tiff->message, sizeof tiff->message, "reading rows %u to %u failed", first, first + count);
        return -1;
    }
    tiff->chunk_first = first;
    tiff->chunk_count = count;
    return 0;
}

int tessera_tiff_read_rows(tessera_tiff *tiff, uint8_t *rgb, size_t stride, int max_rows,
                           uint8_t red, uint8_t green, uint8_t blue) {
    int rows = 0;
    uint32_t width = tiff->info.width;
    while (rows < max_rows && tiff->next_row < tiff->info.height) {
        uint32_t row = tiff->next_row;
        if (tiff->chunk_count == 0 || row < tiff->chunk_first || row >= tiff->chunk_first + tiff->chunk_count) {
            if (fill_chunk(tiff, row) != 0) return -1;
        }
        const uint32_t *in = tiff->raster + (size_t)(row - tiff->chunk_first) * width;
        uint8_t *out = rgb + (size_t)rows * stride;
        if (tiff->inks) {
            memcpy(out, in, (size_t)width * 4);
            tiff->next_row++;
            rows++;
            continue;
        }
        // libtiff's RGBA is premultiplied (it multiplies unassociated alpha itself): the
        // background is added in what alpha leaves.
        for (uint32_t x = 0; x < width; x++) {
            uint32_t p = in[x];
            unsigned a = TIFFGetA(p), left = 255 - a;
            out[x * 3] = (uint8_t)(TIFFGetR(p) + (red * left + 127) / 255);
            out[x * 3 + 1] = (uint8_t)(TIFFGetG(p) + (green * left + 127) / 255);
            out[x * 3 + 2] = (uint8_t)(TIFFGetB(p) + (blue * left + 127) / 255);
        }
        tiff->next_row++;
        rows++;
    }
    return rows;
}

const char *tessera_tiff_message(const tessera_tiff *tiff) { return tiff->message; }

void tessera_tiff_close(tessera_tiff *tiff) {
    if (tiff == NULL) return;
    if (tiff->image_begun) TIFFRGBAImageEnd(&tiff->image);
    if (tiff->tif != NULL) TIFFClose(tiff->tif);
    free(tiff->raster);
    free(tiff);
}
