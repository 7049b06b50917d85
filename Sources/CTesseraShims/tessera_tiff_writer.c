// tessera_tiff_writer.c — a tiled TIFF written with libtiff from tiles that are already JPEG
// streams: the pages of a pyramid (Outputs/TIFF/PyramidTIFFFile.swift).
//
// The tiles are encoded by Tessera's own tile encoders (the Deep Zoom writer's, on every core)
// and handed to libtiff whole with TIFFWriteRawTile: libtiff's JPEG codec is never set up, so
// it neither encodes nor writes JPEGTables; each tile is a complete JPEG stream (its own
// tables), which libtiff's decoder, libvips and OpenSlide read as they read any JPEG tile.
// The page says Photometric YCbCr with the tiles' subsampling, as libvips writes a JPEG TIFF.
//
// libtiff keeps one directory in memory (the page being written): its tag values and its tile
// offsets and byte counts, 16 bytes a tile. The bytes go through the caller's write and read
// callbacks at the offsets libtiff seeks to; this file tracks the position and the length.
// libtiff's messages go to this writer's buffer, never to stderr (libtiff's global handlers
// are silenced once per process: tessera_tiff.c does the same for the reader).
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>

#include "tessera_tiff_writer.h"

struct tessera_tiff_writer {
    TIFF *tif;
    tessera_tiff_write_at write;
    tessera_tiff_read_at read;
    void *context;
    uint64_t offset;   // where the next read or write goes
    uint64_t length;   // the file's length: the end of the furthest write
    int abandoned;     // set by abandon: libtiff's last flush goes nowhere
    char message[300];
};

static tmsize_t read_proc(thandle_t handle, void *buffer, tmsize_t size) {
    struct tessera_tiff_writer *writer = handle;
    if (writer->abandoned) return -1;
    int64_t got = writer->read(writer->context, buffer, (size_t)size, writer->offset);
    if (got < 0) return -1;
    writer->offset += (uint64_t)got;
    return (tmsize_t)got;
}

static tmsize_t write_proc(thandle_t handle, void *buffer, tmsize_t size) {
    struct tessera_tiff_writer *writer = handle;
    if (writer->abandoned) return -1;
    if (writer->write(writer->context, buffer, (size_t)size, writer->offset) != 0) return -1;
    writer->offset += (uint64_t)size;
    if (writer->offset > writer->length) writer->length = writer->offset;
    return size;
}

static toff_t seek_proc(thandle_t handle, toff_t offset, int whence) {
    struct tessera_tiff_writer *writer = handle;
    uint64_t base = whence == SEEK_CUR ? writer->offset : whence == SEEK_END ? writer->length : 0;
    writer->offset = base + offset;
    return writer->offset;
}

static int close_proc(thandle_t handle) { (void)handle; return 0; }

static toff_t size_proc(thandle_t handle) { return ((struct tessera_tiff_writer *)handle)->length; }

static int map_proc(thandle_t handle, void **base, toff_t *size) { (void)handle; (void)base; (void)size; return 0; }

static void unmap_proc(thandle_t handle, void *base, toff_t size) { (void)handle; (void)base; (void)size; }

static int on_error(TIFF *tif, void *user, const char *module, const char *format, va_list args) {
    (void)tif; (void)module;
    struct tessera_tiff_writer *writer = user;
    // The first error is the cause; later ones follow from it.
    if (writer->message[0] == 0) vsnprintf(writer->message, sizeof writer->message, format, args);
    return 1;
}

/// Warnings are dropped: nothing a person could act on comes from writing tags Tessera chose.
static int on_warning(TIFF *tif, void *user, const char *module, const char *format, va_list args) {
    (void)tif; (void)user; (void)module; (void)format; (void)args;
    return 1;
}

static pthread_once_t silenced = PTHREAD_ONCE_INIT;

static void silence_global_handlers(void) {
    TIFFSetErrorHandler(NULL);
    TIFFSetWarningHandler(NULL);
}

tessera_tiff_writer *tessera_tiff_writer_open(tessera_tiff_write_at write, tessera_tiff_read_at read, void *context,
                                              int bigtiff, char *message, size_t message_bytes) {
    pthread_once(&silenced, silence_global_handlers);
    struct tessera_tiff_writer *writer = calloc(1, sizeof *writer);
    TIFFOpenOptions *options = TIFFOpenOptionsAlloc();
    if (writer == NULL || options == NULL) {
        free(writer);
        if (options != NULL) TIFFOpenOptionsFree(options);
        snprintf(message, message_bytes, "out of memory");
        return NULL;
    }
    writer->write = write;
    writer->read = read;
    writer->context = context;
    TIFFOpenOptionsSetErrorHandlerExtR(options, on_error, writer);
    TIFFOpenOptionsSetWarningHandlerExtR(options, on_warning, writer);
    // "w": a new file (the header is written now); "8": BigTIFF; "m": no memory mapping.
    writer->tif = TIFFClientOpenExt("pyramid", bigtiff ? "w8m" : "wm", writer, read_proc, write_proc, seek_proc, close_proc,
                                    size_proc, map_proc, unmap_proc, options);
    TIFFOpenOptionsFree(options);
    if (writer->tif == NULL) {
        snprintf(message, message_bytes, "%s", writer->message[0] ? writer->message : "libtiff could not start the file");
        free(writer);
        return NULL;
    }
    return writer;
}

int tessera_tiff_writer_begin_page(tessera_tiff_writer *writer, const tessera_tiff_page *page) {
    TIFF *tif = writer->tif;
    // The reference black and white of 8-bit YCbCr with full-range chroma, as libtiff's JPEG
    // encoder writes it (the stream itself is JFIF YCbCr).
    float reference[6] = {0, 255, 128, 255, 128, 255};
    int ok = 1;
    if (page->reduced) ok &= TIFFSetField(tif, TIFFTAG_SUBFILETYPE, (uint32_t)FILETYPE_REDUCEDIMAGE);
    ok &= TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, page->width);
    ok &= TIFFSetField(tif, TIFFTAG_IMAGELENGTH, page->height);
    ok &= TIFFSetField(tif, TIFFTAG_TILEWIDTH, page->tile_width);
    ok &= TIFFSetField(tif, TIFFTAG_TILELENGTH, page->tile_height);
    ok &= TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, (uint16_t)8);
    ok &= TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, (uint16_t)3);
    ok &= TIFFSetField(tif, TIFFTAG_PLANARCONFIG, (uint16_t)PLANARCONFIG_CONTIG);
    ok &= TIFFSetField(tif, TIFFTAG_COMPRESSION, (uint16_t)COMPRESSION_JPEG);
    ok &= TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, (uint16_t)PHOTOMETRIC_YCBCR);
    ok &= TIFFSetField(tif, TIFFTAG_YCBCRSUBSAMPLING, page->subsampling_h, page->subsampling_v);
    ok &= TIFFSetField(tif, TIFFTAG_REFERENCEBLACKWHITE, reference);
    ok &= TIFFSetField(tif, TIFFTAG_ORIENTATION, (uint16_t)ORIENTATION_TOPLEFT);
    if (page->description != NULL) ok &= TIFFSetField(tif, TIFFTAG_IMAGEDESCRIPTION, page->description);
    if (page->software != NULL) ok &= TIFFSetField(tif, TIFFTAG_SOFTWARE, page->software);
    if (!ok) {
        if (writer->message[0] == 0) snprintf(writer->message, sizeof writer->message, "libtiff refused a tag of the page");
        return -1;
    }
    return 0;
}

int tessera_tiff_writer_tile(tessera_tiff_writer *writer, uint32_t tile, const uint8_t *bytes, size_t count) {
    // (libtiff takes a non-const pointer; a raw tile is copied out, never changed.)
    tmsize_t written = TIFFWriteRawTile(writer->tif, tile, (void *)bytes, (tmsize_t)count);
    if (written != (tmsize_t)count) {
        if (writer->message[0] == 0) snprintf(writer->message, sizeof writer->message, "libtiff did not take tile %u", tile);
        return -1;
    }
    return 0;
}

int tessera_tiff_writer_end_page(tessera_tiff_writer *writer) {
    if (!TIFFWriteDirectory(writer->tif)) {
        if (writer->message[0] == 0) snprintf(writer->message, sizeof writer->message, "libtiff could not write the directory");
        return -1;
    }
    return 0;
}

int tessera_tiff_writer_close(tessera_tiff_writer *writer, char *message, size_t message_bytes) {
    int ok = TIFFFlush(writer->tif);
    if (!ok) {
        snprintf(message, message_bytes, "%s", writer->message[0] ? writer->message : "libtiff could not flush the file");
    }
    TIFFCleanup(writer->tif);
    free(writer);
    return ok ? 0 : -1;
}

void tessera_tiff_writer_abandon(tessera_tiff_writer *writer) {
    // TIFFCleanup flushes a file open for writing: nothing of it may reach the caller's file.
    writer->abandoned = 1;
    TIFFCleanup(writer->tif);
    free(writer);
}

const char *tessera_tiff_writer_message(const tessera_tiff_writer *writer) { return writer->message; }
