// tessera_codec.h — Tessera's own JPEG decoding pieces, apart from the library shims: the DC
// decoder (multi-scan JPEGs at 1/8 from their DC coefficients, tessera_dc.c), and what it and
// the libjpeg shim share: return codes, cancellation flags, byte sources and spill files.
// The row store and libjpeg's replacement coefficient arrays (tessera_coefficients.c) are
// declared in tessera_codec_internal.h, for C only.
//
// Every symbol is prefixed tessera_.
#ifndef TESSERA_CODEC_H
#define TESSERA_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define TESSERA_JPEG_OK 0
#define TESSERA_JPEG_ERROR (-1)
/// Returned by the DC decoder for a file it does not handle (arithmetic coding, 12-bit, CMYK,
/// or data it finds corrupt): the caller decodes it with libjpeg instead.
#define TESSERA_JPEG_UNSUPPORTED (-2)
/// More scans than this and a file is refused (libjpeg-turbo's tools stop at 500 too; a
/// progressive photo has about 10).
#define TESSERA_JPEG_MAX_SCANS 500

#ifdef __cplusplus
extern "C" {
#endif

// MARK: Cancellation

/// A flag another thread raises to stop a decode: the decoders read it between scans and rows
/// and then fail with the message "cancelled". Atomic, relaxed: a decode sees it a little late
/// at worst.
static inline void tessera_flag_raise(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_RELAXED); }
static inline int tessera_flag_is_raised(const int *flag) { return flag != NULL && __atomic_load_n(flag, __ATOMIC_RELAXED) != 0; }

/// Where a decoder puts whole-image buffers that do not fit its memory allowance: an unnamed
/// temporary file that the caller opens on first use. Each callback returns 0, or -1 on
/// failure (the caller keeps the error). Reads are only of bytes written before.
typedef struct {
    void *context;
    int (*read_at)(void *context, uint8_t *buffer, size_t count, uint64_t offset);
    int (*write_at)(void *context, const uint8_t *buffer, size_t count, uint64_t offset);
} tessera_spill;

/// Supplies compressed bytes to a decoder: fills up to `capacity` bytes of `buffer` and returns
/// how many it wrote, 0 at end of file, or -1 on a read error (the caller keeps the errno).
typedef long (*tessera_jpeg_source)(void *context, uint8_t *buffer, size_t capacity);

// MARK: DC decoder

/// A decoder of its own for multi-scan (progressive, or sequential with separate component
/// scans) Huffman-coded 8-bit JPEGs drawn at 1/8 scale, where each 8 x 8 block is one pixel and
/// only its DC coefficient matters (and, for 4:2:0 chroma, three more: see tessera_dc.c). It
/// reads the DC scans (first and refinement), skips the luma AC scans by their end marker, and
/// keeps 2 bytes a block (18 for 4:2:0 chroma) instead of libjpeg's 128.
typedef struct tessera_dc_decoder tessera_dc_decoder;

/// A decoder reading from `source` (the file from its first byte), keeping its DC planes in
/// memory up to `memory_limit` bytes and beyond that in `spill` (may be NULL: then an error).
/// `stored_rgb`: three components are R, G, B rather than YCbCr. NULL when malloc fails.
tessera_dc_decoder *tessera_dc_create(tessera_jpeg_source source, void *context, size_t buffer_bytes,
                                      long memory_limit, const tessera_spill *spill, int stored_rgb);

/// As tessera_jpeg_decoder_set_work_limit, counting the scans this decoder decodes (DC scans,
/// and the AC scans of 4:2:0 chroma; skipped AC scans cost only their bytes).
void tessera_dc_set_work_limit(tessera_dc_decoder *d, uint64_t blocks);

/// As tessera_jpeg_decoder_set_cancel_flag.
void tessera_dc_set_cancel_flag(tessera_dc_decoder *d, const int *flag);

/// Reads the whole file. TESSERA_JPEG_OK; TESSERA_JPEG_UNSUPPORTED for a file to hand to
/// libjpeg instead; TESSERA_JPEG_ERROR for one that cannot be drawn (truncated, too many scans,
/// read or spill error: see tessera_dc_message and tessera_dc_source_failed).
int tessera_dc_decode(tessera_dc_decoder *d);

/// The output size after decode: ceil(width / 8) x ceil(height / 8), as libjpeg's at 1/8.
void tessera_dc_output_size(const tessera_dc_decoder *d, uint32_t *width, uint32_t *height);

/// The DC planes' bytes that the file's frame header asks for (after decode or a failure).
uint64_t tessera_dc_plane_bytes(const tessera_dc_decoder *d);

/// The next up to `max_rows` RGB rows (3 bytes a pixel), `stride` bytes apart.
/// Returns the rows written, or TESSERA_JPEG_ERROR.
int tessera_dc_read_rows(tessera_dc_decoder *d, uint8_t *rows, size_t stride, int max_rows);

const char *tessera_dc_message(const tessera_dc_decoder *d);
int tessera_dc_source_failed(const tessera_dc_decoder *d);

/// Whether the file ended before the picture did: 0 no; 1 drawn as far as its data goes, as
/// libjpeg draws it; 2 the same, cut before libjpeg would have its AC scans (it smooths the DC
/// values there; this does not). After a successful tessera_dc_decode.
int tessera_dc_ended_early(const tessera_dc_decoder *d);
void tessera_dc_destroy(tessera_dc_decoder *d);

#ifdef __cplusplus
}
#endif

#endif
