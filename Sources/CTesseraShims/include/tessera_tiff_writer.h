// tessera_tiff_writer.h — a tiled TIFF written page by page with libtiff from tiles that are
// already JPEG streams (tessera_tiff_writer.c).
//
// Why this shim exists: libtiff's write path is a set of varargs tag setters and a directory
// that must be complete before it is written; Swift cannot call the varargs setters, and the
// messages libtiff reports must reach the output's error, not stderr. The file's bytes go
// through the caller's positioned reads and writes (Tessera's one syscall layer), never
// through a descriptor here. Every symbol is prefixed tessera_tiff_writer_.
#ifndef TESSERA_TIFF_WRITER_H
#define TESSERA_TIFF_WRITER_H

#include <stddef.h>
#include <stdint.h>

typedef struct tessera_tiff_writer tessera_tiff_writer;

/// Writes `count` bytes at `offset` of the caller's file. 0, or -1 on failure (the caller
/// keeps its reason; libtiff then reports a write error).
typedef int (*tessera_tiff_write_at)(void *context, const void *bytes, size_t count, uint64_t offset);
/// Reads up to `count` bytes at `offset` (libtiff reads back a directory's link when it
/// chains the next one). The bytes read, or -1.
typedef int64_t (*tessera_tiff_read_at)(void *context, void *bytes, size_t count, uint64_t offset);

/// One page (image file directory): a tiled, JPEG-compressed YCbCr image.
typedef struct {
    uint32_t width;
    uint32_t height;
    uint32_t tile_width;       // a multiple of 16 (TIFF 6.0, section 15)
    uint32_t tile_height;
    uint16_t subsampling_h;    // YCbCrSubsampling: the tiles' JPEG luma sampling factors
    uint16_t subsampling_v;    // (2,2 for 4:2:0; 2,1 for 4:2:2; 1,1 for 4:4:4)
    int32_t reduced;           // 1: NewSubfileType says reduced-resolution (a pyramid level)
    const char *description;   // ImageDescription, or NULL
    const char *software;      // Software, or NULL
} tessera_tiff_page;

/// Starts a TIFF (BigTIFF when `bigtiff` is nonzero) written through `write` and `read`, with
/// `context` passed to both. NULL, with the reason in `message`, when libtiff refuses.
tessera_tiff_writer *tessera_tiff_writer_open(tessera_tiff_write_at write, tessera_tiff_read_at read, void *context,
                                              int bigtiff, char *message, size_t message_bytes);
/// Sets the next page's tags (TIFFSetField). 0, or -1 with the reason in the message.
int tessera_tiff_writer_begin_page(tessera_tiff_writer *writer, const tessera_tiff_page *page);
/// Appends tile number `tile` (row * columns + column) of the current page: `count` bytes of a
/// complete JPEG stream (TIFFWriteRawTile). Tiles may come in any order, each once.
int tessera_tiff_writer_tile(tessera_tiff_writer *writer, uint32_t tile, const uint8_t *bytes, size_t count);
/// Writes the current page's directory after its tiles (TIFFWriteDirectory) and links it to
/// the one before. 0, or -1.
int tessera_tiff_writer_end_page(tessera_tiff_writer *writer);
/// Flushes what libtiff holds (TIFFFlush) and frees the writer whatever the result. 0, or -1
/// with the reason copied to `message`.
int tessera_tiff_writer_close(tessera_tiff_writer *writer, char *message, size_t message_bytes);
/// Frees the writer without flushing (the file is being abandoned).
void tessera_tiff_writer_abandon(tessera_tiff_writer *writer);
/// libtiff's first error message since the writer opened ("" when none).
const char *tessera_tiff_writer_message(const tessera_tiff_writer *writer);

#endif
