// tessera_shims.h — the setjmp-guarded calls into the C libraries Tessera uses: libjpeg,
// libspng, libwebp, libheif, giflib, libtiff and Little CMS, and Tessera's bounded EXIF reader. The decoders of Tessera's own (the DC
// decoder, the row store, the coefficient arrays) are a codec apart: CTesseraCodec.
//
// Why this target exists: libjpeg reports every error by calling error_exit, whose default
// implementation prints and calls exit(). The usual fix is setjmp/longjmp, and Swift can neither
// call setjmp safely nor be unwound through. So every libjpeg call Tessera makes sits behind a
// function here that does `if (setjmp(handle->jump)) return TESSERA_JPEG_ERROR;` right before it.
// The longjmp never leaves C. libjpeg's message is copied into the handle's own buffer, not a
// global one, because several workers decode at once.
//
// EXIF is read by Tessera's own reader (tessera_exif.c), which follows only IFD0 and the EXIF
// IFD, each once, with every offset checked.
//
// Every symbol is prefixed tessera_. Functions return TESSERA_JPEG_OK (0) or TESSERA_JPEG_ERROR
// (-1); on error, tessera_jpeg_*_message() returns the reason.
#ifndef TESSERA_SHIMS_H
#define TESSERA_SHIMS_H

#include <stddef.h>
#include <stdint.h>

#include "tessera_linux.h"
// The return codes, cancellation flags, byte sources and spill files the decoders share.
#include "tessera_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

// MARK: Decoder

typedef struct tessera_jpeg_decoder tessera_jpeg_decoder;

/// The colour model of a source file, as jpeg_read_header found it.
typedef enum {
    TESSERA_COLOR_GRAY = 1,
    TESSERA_COLOR_RGB = 2,   // YCbCr or RGB: libjpeg converts to RGB
    TESSERA_COLOR_CMYK = 3,  // CMYK or YCCK: delivered as CMYK, converted by the caller
} tessera_color_model;

/// Header facts of an opened JPEG.
typedef struct {
    uint32_t width;
    uint32_t height;
    int32_t components;       // components in the file
    int32_t color_model;      // tessera_color_model
    int32_t progressive;      // 1 when multi-scan (progressive): needs whole-image buffers
    int32_t adobe_inverted;   // 1 when an Adobe APP14 marker says CMYK is stored inverted
    int32_t exif_orientation; // 1...8 from EXIF (0 or out of range reported as read)
    int64_t date_taken;       // YYYYMMDDhhmmss from EXIF, 0 when absent
    int32_t arithmetic;       // 1 when arithmetic-coded
    int32_t stored_rgb;       // 1 when three components are stored as R, G, B (no YCbCr)
    uint64_t min_data_bytes;  // the least data a Huffman-coded file of this size can have
    uint64_t coefficient_bytes; // libjpeg's whole-image buffer for a multi-scan decode at 8/8
                                // (other scales: tessera_jpeg_decoder_coefficient_plan)
    uint64_t dc_decoder_bytes;  // the DC decoder's (tessera_dc.c) for the same file at 1/8
} tessera_jpeg_header;

/// Creates a decoder that pulls its bytes from `source` in chunks of `buffer_bytes`.
/// `max_memory_bytes` caps libjpeg's whole-image buffers (a progressive file whose header
/// claims 65,500 x 65,500 px then fails cleanly instead of allocating gigabytes). Returns NULL
/// only when malloc fails.
tessera_jpeg_decoder *tessera_jpeg_decoder_create(tessera_jpeg_source source, void *context,
                                                  size_t buffer_bytes, long max_memory_bytes);

/// jpeg_read_header, with the APP1 (EXIF) and APP14 (Adobe) markers saved; fills `header`.
int tessera_jpeg_decoder_read_header(tessera_jpeg_decoder *d, tessera_jpeg_header *header);

/// Sets DCT-domain scaling to `scale_num`/8 and returns the output size that libjpeg computes
/// (jpeg_calc_output_dimensions). Call after read_header, before start.
int tessera_jpeg_decoder_scaled_size(tessera_jpeg_decoder *d, int scale_num,
                                     uint32_t *out_width, uint32_t *out_height);

/// jpeg_start_decompress with the scale last set. Output is RGB (3 bytes a pixel), or CMYK
/// (4 bytes) for CMYK/YCCK files.
int tessera_jpeg_decoder_start(tessera_jpeg_decoder *d, uint32_t *out_width,
                               uint32_t *out_height, int32_t *out_components);

/// jpeg_read_scanlines: reads up to `max_rows` rows into `rows` (each `stride` bytes apart).
/// Returns the number of rows read (>= 0) or TESSERA_JPEG_ERROR.
int tessera_jpeg_decoder_read_rows(tessera_jpeg_decoder *d, uint8_t *rows, size_t stride,
                                   int max_rows);

/// Where a multi-scan file's coefficients go (see tessera_coefficients.c): in memory up to
/// `memory_limit` bytes; beyond that in `spill` (copied) through windows that fit the limit, or
/// an error when `spill` is NULL. Call before start.
void tessera_jpeg_decoder_set_coefficient_storage(tessera_jpeg_decoder *d, long memory_limit,
                                                  const tessera_spill *spill);

/// Makes the decode fail ("cancelled") soon after `flag` is raised (see tessera_flag_raise).
void tessera_jpeg_decoder_set_cancel_flag(tessera_jpeg_decoder *d, const int *flag);

/// With `on`, a file that ends early (or whose data stops at a marker before its last block)
/// is decoded as far as its data goes, the rest grey (baseline) or less sharp (progressive),
/// instead of failing; tessera_jpeg_decoder_ended_early then says it did. Set before the header.
void tessera_jpeg_decoder_allow_early_end(tessera_jpeg_decoder *d, int on);

/// Whether the data ended early (only with tessera_jpeg_decoder_allow_early_end).
int tessera_jpeg_decoder_ended_early(const tessera_jpeg_decoder *d);

/// Stops the decode (an error) when its scans together cover more than `blocks` blocks (each
/// component's blocks, counted once per scan that holds it); 0: no limit. See
/// tessera_work_limit_blocks.
void tessera_jpeg_decoder_set_work_limit(tessera_jpeg_decoder *d, uint64_t blocks);

/// The work limit for a file of `file_bytes`. Every block costs at least a bit in each of the
/// two DC scans, so a real photo's scans, about ten, cover at most about 20 blocks per byte of
/// the file (a flat grey 12 MP progressive photo, about as compressible as photos get, comes to
/// 11); empty AC scans repeated cover a whole image each in a few bytes. 50 a byte leaves a
/// margin of 2.5 over the bound.
static inline uint64_t tessera_work_limit_blocks(uint64_t file_bytes) { return 50 * file_bytes + (1u << 20); }

/// 1 when the last start put the coefficients in the spill file.
int tessera_jpeg_decoder_coefficients_spilled(const tessera_jpeg_decoder *d);

/// What a multi-scan file's coefficient arrays take at DCT scale `scale_num`/8 (which it sets,
/// as tessera_jpeg_decoder_scaled_size): `stored`, the blocks as kept (only the coefficients
/// the scale's inverse DCT reads, tessera_coefficients.c); `windows`, the whole-block windows
/// libjpeg decodes into, always in memory; `minimum`, the least the arrays hold when they
/// spill. Call after read_header. Returns TESSERA_JPEG_OK or TESSERA_JPEG_ERROR.
int tessera_jpeg_decoder_coefficient_plan(tessera_jpeg_decoder *d, int scale_num, uint64_t *stored,
                                          uint64_t *windows, uint64_t *minimum);

/// Whether the coefficient arrays keep only what the output scale reads (1, the default) or
/// every coefficient (0: libjpeg's own layout, which the tests compare against). Before start.
void tessera_jpeg_decoder_set_coefficient_compaction(tessera_jpeg_decoder *d, int on);

/// After start: the bytes the coefficient arrays take (stored blocks and windows), and what
/// was allocated for them in memory (less when they spill). 0 for a single-scan file.
uint64_t tessera_jpeg_decoder_coefficient_bytes(const tessera_jpeg_decoder *d);
uint64_t tessera_jpeg_decoder_coefficient_allocated_bytes(const tessera_jpeg_decoder *d);

/// 1 when the last error came from the source failing to read (not from libjpeg).
int tessera_jpeg_decoder_source_failed(const tessera_jpeg_decoder *d);

/// Number of libjpeg warnings (corrupt data it skipped over) so far.
long tessera_jpeg_decoder_warnings(const tessera_jpeg_decoder *d);

/// After the rows drawn: reads the rest of the image's data (entropy-decoded, not drawn) to its
/// end-of-image marker, so that damage libjpeg only notices there is counted as a warning. A
/// file that ends in the rows not drawn is no warning. TESSERA_JPEG_ERROR: the rest cannot be
/// decoded (the message says why).
int tessera_jpeg_decoder_finish(tessera_jpeg_decoder *d);

/// Of tessera_jpeg_decoder_warnings, those that say the image data is damaged (a bad Huffman
/// code, extraneous bytes before a marker, a missing restart marker...).
long tessera_jpeg_decoder_corrupt_warnings(const tessera_jpeg_decoder *d);

/// The message of the last error (or warning), never NULL.
const char *tessera_jpeg_decoder_message(const tessera_jpeg_decoder *d);

/// jpeg_destroy_decompress and free.
void tessera_jpeg_decoder_destroy(tessera_jpeg_decoder *d);

// MARK: Encoder

typedef struct tessera_jpeg_encoder tessera_jpeg_encoder;

/// Called by the encoder with each full output buffer (and the final partial one). Returns 0
/// on success, or nonzero to abort the encode (the write error is the caller's to report).
typedef int (*tessera_jpeg_sink)(void *context, const uint8_t *bytes, size_t count);

/// Creates a baseline encoder: quality 1...100, chroma subsampling given as the luma sampling
/// factors (2,2 for 4:2:0; 2,1 for 4:2:2; 1,1 for 4:4:4), standard Huffman tables, no
/// optimize_coding, no progression (both would buffer the whole image). Output goes to `sink`
/// in chunks of `buffer_bytes`. With `sink` NULL the output stays in memory instead: the buffer
/// starts at `buffer_bytes` and doubles as needed, and after finish
/// tessera_jpeg_encoder_memory_output gives the image. Returns NULL when malloc fails.
tessera_jpeg_encoder *tessera_jpeg_encoder_create(tessera_jpeg_sink sink, void *context,
                                                  size_t buffer_bytes);

/// Before tessera_jpeg_encoder_start: the JFIF density in dots per inch (0: none, the 1:1 aspect
/// libjpeg writes by default), and a comment (COM marker, at most 127 bytes; NULL or "": none)
/// written right after the JFIF header of every image this encoder makes.
void tessera_jpeg_encoder_set_marks(tessera_jpeg_encoder *e, unsigned int dpi, const char *comment);

/// jpeg_set_defaults, quality and sampling, then jpeg_start_compress for an RGB image.
/// `restart_interval` is the DRI interval in MCUs (0: no restart markers).
int tessera_jpeg_encoder_start(tessera_jpeg_encoder *e, uint32_t width, uint32_t height,
                               int quality, int h_sampling, int v_sampling,
                               unsigned int restart_interval);

/// Starts another image of `width` x `height` with the settings of the last
/// tessera_jpeg_encoder_start, after tessera_jpeg_encoder_finish.
int tessera_jpeg_encoder_restart(tessera_jpeg_encoder *e, uint32_t width, uint32_t height);

/// jpeg_write_scanlines for `row_count` RGB rows starting at `rows`, `stride` bytes apart.
int tessera_jpeg_encoder_write_rows(tessera_jpeg_encoder *e, const uint8_t *rows,
                                    size_t stride, uint32_t row_count);

/// jpeg_finish_compress: flushes the last buffer through the sink. The encoder may then be
/// started again for another image (libjpeg keeps the compressor object; its buffers are
/// allocated again per image).
int tessera_jpeg_encoder_finish(tessera_jpeg_encoder *e);

/// The message of the last error, never NULL.
const char *tessera_jpeg_encoder_message(const tessera_jpeg_encoder *e);

/// Memory output (created with a NULL sink): the last finished image, valid until the next start.
size_t tessera_jpeg_encoder_memory_output(const tessera_jpeg_encoder *e, const uint8_t **bytes);

/// 1 when the last error came from the sink refusing bytes (a write error) rather than libjpeg.
int tessera_jpeg_encoder_sink_failed(const tessera_jpeg_encoder *e);

void tessera_jpeg_encoder_destroy(tessera_jpeg_encoder *e);

// MARK: Deep Zoom (tessera_pyramid.c)

/// One row of the pyramid's level below from two rows of this one (RGB, `input_width` pixels):
/// each output pixel the rounded mean of a 2 x 2 block, (a + b + c + d + 2) >> 2 per channel; the
/// last column of an odd width the rounded mean of its two pixels. `top` and `bottom` may be
/// the same row. Writes (input_width + 1) / 2 pixels.
void tessera_average_rows(const uint8_t *top, const uint8_t *bottom, uint8_t *out, size_t input_width);

// MARK: EXIF

/// The EXIF Orientation tag (1...8, or whatever out-of-range value is stored) of an APP1 payload
/// (starting with "Exif\0\0"), or 0 when there is none or it cannot be read.
int tessera_exif_orientation(const uint8_t *app1, size_t length);

/// The same, and when the photo was taken (DateTimeOriginal, else DateTimeDigitized, else
/// DateTime) as the number YYYYMMDDhhmmss in `*date_taken` (0 when none is a plausible date).
int tessera_exif_read(const uint8_t *app1, size_t length, int64_t *date_taken);
/// "YYYY:MM:DD HH:MM:SS" (EXIF's form of a date) as the number YYYYMMDDhhmmss; 0 when the text
/// is not a plausible date.
int64_t tessera_exif_date_text(const uint8_t *text, size_t length);

/// The ICC profile a JPEG's APP2 markers carry (after read_header), or NULL. Valid until the
/// decoder is destroyed.
const uint8_t *tessera_jpeg_decoder_icc_profile(tessera_jpeg_decoder *d, size_t *length);

// MARK: Resampling (tessera_resample.c)

/// Each of `count` sums times `scale`, plus 0.5, clamped to 0...255 and truncated, into `out`;
/// the sums are then zeroed (AreaResampler's output row).
void tessera_resample_emit_row(float *sums, float scale, uint8_t *out, size_t count);

/// sums[i] += row[i] * weight for `count` floats.
void tessera_resample_accumulate(float *sums, const float *row, float weight, size_t count);

/// One RGB row to `output_width` pixels of float sums: output pixel x is input pixels
/// first[x] ..< first[x] + taps weighted by weights[x * taps ...]. Output pixels before
/// `vector_end` may read one byte past their last tap (none may before the row's last pixel);
/// `out` holds output_width * 3 + 1 floats.
void tessera_resample_horizontal(const uint8_t *pixels, const int32_t *first, int32_t taps, const float *weights,
                                 float *out, size_t output_width, size_t vector_end);

/// Whether the three functions above take their AVX2 loops (where the processor has AVX2):
/// `enabled` 0 keeps them to the baseline's, 1 lets them; returns whether AVX2 is now used.
/// For the tests, which check that both give the same bytes.
int tessera_resample_use_avx2(int enabled);

// MARK: Colour (tessera_color.c, Little CMS)

/// The most Little CMS may hold while it reads one profile and makes its transform (the
/// profile's copy, its parsed tables, the transform): a profile that needs more is refused.
#define TESSERA_COLOR_MAKING_BYTES (8 << 20)

/// A transform from the ICC profile `icc` to sRGB (8-bit RGB in place), or NULL: with
/// `*is_srgb` set when the profile is sRGB in all but name (nothing to convert), else with the
/// reason in `message`. Free with tessera_color_transform_free; usable from any thread.
void *tessera_color_transform_from_icc(const uint8_t *icc, size_t length, int *is_srgb, char *message,
                                       size_t message_bytes);

/// The same from H.273 colour primaries and transfer characteristics (HEIF nclx, PNG cICP).
void *tessera_color_transform_from_cicp(int primaries, int transfer, int *is_srgb, char *message, size_t message_bytes);

void tessera_color_transform_apply(void *transform, uint8_t *rgb, size_t pixels);
/// A transform from a CMYK JPEG's CMYK profile to sRGB (perceptual), for inks as libjpeg
/// delivers them: `inverted` for Adobe's (255: no ink). NULL with the reason in `message` when
/// the profile is not a CMYK one or cannot be used. Applied with tessera_color_transform_apply_cmyk.
void *tessera_color_transform_from_cmyk_icc(const uint8_t *icc, size_t length, int inverted, char *message,
                                            size_t message_bytes);
/// `pixels` CMYK pixels (4 bytes each) into `rgb` (3 bytes each).
void tessera_color_transform_apply_cmyk(void *transform, const uint8_t *cmyk, uint8_t *rgb, size_t pixels);
/// The bytes a transform keeps while it lives.
size_t tessera_color_transform_bytes(const void *transform);
void tessera_color_transform_free(void *transform);

// MARK: PNG (tessera_png.c, libspng)

typedef struct tessera_png tessera_png;

typedef struct {
    uint32_t width;
    uint32_t height;
    int32_t bit_depth;
    int32_t color_type;
    int32_t interlaced;
    int32_t has_alpha;
    int32_t exif_orientation;  // from eXIf; 0 when absent
    int64_t date_taken;        // YYYYMMDDhhmmss from eXIf, 0 when absent
    int32_t cicp_primaries;    // cICP, -1 when absent
    int32_t cicp_transfer;
    int32_t cicp_matrix;
    int32_t cicp_full_range;
    uint64_t image_data_bytes; // the IDAT chunks' data, summed (the picture's compressed bytes)
} tessera_png_info;

/// Reads the chunks before the image data of the PNG open as `fd` (read by pread from 0).
tessera_png *tessera_png_open(int fd, uint64_t file_bytes, tessera_png_info *info, char *message, size_t message_bytes);
const uint8_t *tessera_png_icc(tessera_png *png, size_t *length);
/// Starts the row-by-row decode to RGBA8.
int tessera_png_start(tessera_png *png);
/// Decodes the next row into `rgba` (a whole row's length): returns 1 with its row number and
/// Adam7 pass (0 when not interlaced), 0 at the end of the image, -1 on error.
int tessera_png_read_row(tessera_png *png, uint8_t *rgba, size_t length, uint32_t *row, int *pass);
/// After the last row: reads the chunks after the image data, which is when libspng checks the
/// last IDAT's CRC. 0, or -1 with the reason in tessera_png_message.
int tessera_png_finish(tessera_png *png);
/// How many pixels so far had a palette index past the end of the file's palette (drawn
/// black); `palette_entries` is that palette's length.
uint64_t tessera_png_bad_palette_pixels(const tessera_png *png, uint32_t *palette_entries);
const char *tessera_png_message(const tessera_png *png);
void tessera_png_close(tessera_png *png);

// MARK: WebP (tessera_webp.c, libwebp)

typedef struct tessera_webp tessera_webp;

typedef struct {
    uint32_t width;
    uint32_t height;
    int32_t has_alpha;
    int32_t lossless;          // VP8L: decoded whole (4 bytes a pixel) whatever the output size
    int32_t animated;          // the first frame is drawn
    int32_t exif_orientation;
    int64_t date_taken;        // YYYYMMDDhhmmss from EXIF, 0 when absent
    uint64_t lossless_bytes;   // what libwebp allocates for the lossless stream (the picture's, or a lossy
                               // picture's alpha plane and its stream); 0: none (tessera_vp8l_measure)
    uint32_t groups;           // that stream's prefix-code groups
    int32_t at_least;          // counting stopped past the cap: lossless_bytes is a lower bound
} tessera_webp_info;

/// Opens the WebP of `fd` and reads its header; counts what its lossless stream needs up to `cap`.
tessera_webp *tessera_webp_open(int fd, uint64_t file_bytes, uint64_t cap, tessera_webp_info *info, char *message,
                                size_t message_bytes);
const uint8_t *tessera_webp_icc(tessera_webp *webp, size_t *length);
/// Decodes the (first) picture scaled to `width` x `height`, RGBA, rows `stride` bytes apart.
int tessera_webp_decode(tessera_webp *webp, int width, int height, uint8_t *rgba, size_t stride, char *message,
                        size_t message_bytes);
void tessera_webp_close(tessera_webp *webp);

// MARK: Lossless WebP's memory (tessera_vp8l.c)

typedef struct {
    uint64_t bytes;          // what libwebp 1.2 allocates to decode the stream, its pixels included
    uint32_t groups;         // prefix-code groups libwebp builds tables for
    int32_t one_byte_alpha;  // an alpha stream libwebp decodes at one byte a pixel
    int32_t at_least;        // counting stopped past the cap: `bytes` is a lower bound
} tessera_vp8l_cost;

/// What libwebp will allocate to decode the VP8L image stream `data` (after the 5-byte header
/// of a VP8L chunk, or the 1-byte header of an ALPH chunk, `alpha` set) of `width` x `height`,
/// read from its transforms, entropy image and codes. -1 with `message` for a stream libwebp
/// refuses; counting stops past `cap`.
int tessera_vp8l_measure(const uint8_t *data, size_t size, uint32_t width, uint32_t height, int alpha, uint64_t cap,
                         tessera_vp8l_cost *cost, char *message, size_t message_bytes);

// MARK: HEIF (tessera_heif.c, libheif)

typedef struct tessera_heif tessera_heif;

/// What libheif allocates to decode an item, read from its boxes (not from 'ispe'): a grid's
/// canvas and its largest tile, or one coded picture (tile 0 x 0).
typedef struct {
    uint32_t width;
    uint32_t height;
    uint32_t tile_width;
    uint32_t tile_height;
} tessera_heif_size;

typedef struct {
    uint32_t width;            // after the file's own transforms (irot, imir, clap)
    uint32_t height;
    int32_t has_alpha;
    int32_t luma_bits;
    int32_t has_transform;     // the primary image has irot or imir
    int32_t is_grid;           // the primary image is a grid of tiles (phones: 512 x 512 each)
    int32_t exif_orientation;
    int64_t date_taken;        // YYYYMMDDhhmmss from Exif, 0 when absent
    uint32_t thumbnail_width;  // the largest embedded thumbnail; 0 when none
    uint32_t thumbnail_height;
    int32_t thumbnail_passed_over;  // a thumbnail turned otherwise than the picture, not used
    int32_t cicp_primaries;    // nclx, -1 when absent
    int32_t cicp_transfer;
    int32_t cicp_matrix;
    int32_t cicp_full_range;
    tessera_heif_size decode;  // the primary image's decode, checked against its ispe
    tessera_heif_size thumbnail_decode;
    // A grid that can be decoded a tile at a time (tessera_heif_decode_tile); 0 when it must be
    // decoded whole (not a grid, an alpha plane, a clap crop, tiles of different sizes, ...).
    int32_t tiled;
    uint32_t grid_columns;
    uint32_t grid_rows;
    uint32_t grid_tile_width;  // every tile's ispe
    uint32_t grid_tile_height;
    uint32_t canvas_width;     // the grid's output size, before irot and imir
    uint32_t canvas_height;
    int32_t grid_orientation;  // the grid's irot and imir, in libheif's order, as an EXIF orientation (1..8)
    int32_t thumbnail_bits;    // the thumbnail's bits a sample: its handle's or its stream's, the larger
    // What libheif 1.15 holds to open the file: it reads every item's data whole (the largest
    // item, and the metadata it keeps). Set also when the open is refused for it.
    uint64_t open_bytes;
} tessera_heif_info;

typedef struct {
    int32_t width;
    int32_t height;
    int32_t layout;            // 0 grey (Y only), 420, 422, 444 YCbCr, or 3 planar RGB (y, cb, cr = R, G, B)
    int32_t bits;              // 8, or more (samples are then 16-bit)
    int32_t matrix;            // H.273 matrix coefficients
    int32_t full_range;
    const uint8_t *y, *cb, *cr, *alpha;
    int32_t y_stride, cb_stride, cr_stride, alpha_stride, alpha_bits;
} tessera_heif_planes;

/// Opens the HEIF: NULL with `message` when it cannot be read, or when libheif would hold more
/// than `open_limit` bytes to open it (`info->open_bytes` then says how much).
tessera_heif *tessera_heif_open(int fd, uint64_t file_bytes, uint64_t open_limit, tessera_heif_info *info, char *message,
                                size_t message_bytes);
const uint8_t *tessera_heif_icc(tessera_heif *heif, size_t *length);
/// Decodes the primary image (or the largest thumbnail) into its own planes, valid until the
/// next decode, tessera_heif_release_image or close.
int tessera_heif_decode(tessera_heif *heif, int thumbnail, tessera_heif_planes *planes, char *message, size_t message_bytes);
void tessera_heif_release_image(tessera_heif *heif);
/// Decodes tile (`column`, `row`) of a tiled grid (info.tiled) as libheif decodes it inside a
/// whole grid (planar RGB, its own colour properties), into slot `column`: valid until that
/// slot's next decode, tessera_heif_release_tiles or close. A row of tiles is held at once.
int tessera_heif_decode_tile(tessera_heif *heif, uint32_t column, uint32_t row, tessera_heif_planes *planes, char *message,
                             size_t message_bytes);
void tessera_heif_release_tiles(tessera_heif *heif);
void tessera_heif_close(tessera_heif *heif);

#ifdef __cplusplus
}
#endif
#endif
