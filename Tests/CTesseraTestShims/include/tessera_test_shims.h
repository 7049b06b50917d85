// tessera_test_shims.h — what the tests make with libheif, Little CMS and libjpeg that Debian's
// tools cannot (or not fast enough): HEIF files whose rotation is in irot/imir boxes (heif-enc
// 1.15 leaves it in EXIF), a Display P3 ICC profile (Debian ships none), and libraries of
// 100,000 distinct JPEGs written in seconds.
#ifndef TESSERA_TEST_SHIMS_H
#define TESSERA_TEST_SHIMS_H

#include <stddef.h>
#include <stdint.h>

/// Writes `rgb` (`width` x `height`, 3 bytes a pixel, stored frame) as a HEIC at `path`:
/// `orientation` (1-8, EXIF meaning) as irot/imir boxes, an EXIF block saying
/// `exif_orientation` (0: none), a thumbnail fitting `thumbnail_box` px (0: none), and an nclx
/// colour box with `nclx_primaries` and the sRGB transfer curve (0: none). Returns 0, or -1
/// with the reason in `message`.
int tessera_test_write_heic(const char *path, const uint8_t *rgb, int width, int height, int orientation,
                            int exif_orientation, int thumbnail_box, int nclx_primaries, int quality, char *message,
                            size_t message_bytes);

/// Writes `rgb` as a HEIC the way phones do: a 'grid' item of `tile` x `tile` HEVC tiles (each
/// its own hidden item, edge pixels repeated past the picture), and a thumbnail fitting
/// `thumbnail_box` px (0: none). libheif 1.15 cannot write grids; the boxes are written here
/// around tiles libheif encodes. Returns 0, or -1 with the reason in `message`.
int tessera_test_write_grid_heic(const char *path, const uint8_t *rgb, int width, int height, int tile, int thumbnail_box,
                                 int quality, char *message, size_t message_bytes);

/// How tessera_test_write_phone_heic differs from a plain grid (all zero: none of it).
typedef struct {
    /// The grid's (and thumbnail's) transform properties, in order: "r1" an irot of one quarter
    /// turn counter-clockwise (r0-r3), "m0" / "m1" an imir of that axis, "c" a clap keeping the
    /// centre `clap_width` x `clap_height`. NULL: none.
    const char *transforms;
    int clap_width, clap_height;
    /// An ICC profile as a second colr box ('prof') beside the nclx one.
    const uint8_t *icc;
    size_t icc_bytes;
    /// Leaves the encoded thumbnail out.
    int omit_thumbnail;
    /// Gives the thumbnail none of the grid's transforms (an editor that turned the picture and
    /// kept its thumbnail as it was).
    int thumbnail_unturned;
    /// Writes the thumbnail's coded data as a 5-byte NAL unit of 0xFF bytes and 0xFF bytes to
    /// its end (a thumbnail no decoder reads, beside a whole picture).
    int damage_thumbnail;
    /// The canvas the grid data and its ispe declare, when not 0 (a hostile file: tiles that do
    /// not cover it).
    int canvas_width, canvas_height;
} tessera_test_heic_options;

/// tessera_test_write_grid_heic with the phone's other boxes: irot, imir or clap on the grid,
/// an ICC profile. Returns 0, or -1 with the reason in `message`.
int tessera_test_write_phone_heic(const char *path, const uint8_t *rgb, int width, int height, int tile, int thumbnail_box,
                                  int quality, const tessera_test_heic_options *options, char *message, size_t message_bytes);

/// A grid's tiles (and thumbnail) encoded once, to be written with different boxes by
/// tessera_test_write_heic_tiles (encoding is the slow part). NULL with `message` on failure.
typedef struct tessera_test_heic_tiles tessera_test_heic_tiles;
tessera_test_heic_tiles *tessera_test_encode_heic_tiles(const uint8_t *rgb, int width, int height, int tile, int thumbnail_box,
                                                        int quality, char *message, size_t message_bytes);
int tessera_test_write_heic_tiles(const char *path, const tessera_test_heic_tiles *tiles, const tessera_test_heic_options *options,
                                  char *message, size_t message_bytes);
void tessera_test_free_heic_tiles(tessera_test_heic_tiles *tiles);

/// Writes a HEIC whose 'ispe' says `ispe_width` x `ispe_height` whatever its pictures are: one
/// `picture_width` x `picture_height` HEVC picture, or (`columns` and `rows` > 0) a grid of
/// `columns` x `rows` references to that one picture as its tile, whose canvas is the tiles'.
/// Returns 0, or -1 with the reason in `message`.
int tessera_test_write_lying_heic(const char *path, int picture_width, int picture_height, int columns, int rows,
                                  uint32_t ispe_width, uint32_t ispe_height, char *message, size_t message_bytes);

/// A Display P3 profile (P3 primaries, D65, the sRGB curve) written to `path`. 0 or -1.
int tessera_test_write_display_p3_profile(const char *path);
/// A CMYK printer profile (A2B0 only, on a warm paper) to `path`: 0, or -1 on failure.
int tessera_test_write_cmyk_profile(const char *path);
/// The same with a floating-point table (D2B0) chaining `chained` lookup tables (0: none).
int tessera_test_write_cmyk_profile_chained(const char *path, int chained);

/// Writes `count` JPEGs of `width` x `height` px into `folder` (which must exist), each showing
/// a different picture: the centred square of side min(width, height) is cut into 3 x 3 blocks,
/// and block b of photo i is the grey level (base-4 digit b of i) of 40, 100, 160 or 220, tinted
/// by up to 15 per channel (a hash of i and b), the edge blocks continued to the picture's edges.
/// Any two photos differ in some block by at least 30 in every channel (about 0.08 in Oklab L),
/// past DuplicatePictures' tolerance, in any square cell's 3 x 3 sub-cells; photos 262,144 apart
/// show the same blocks differently tinted. `noise` > 0 adds a pseudo-random +-noise to
/// every pixel (larger files, slower decodes; the block means stay apart).
/// `per_folder` 0: all in `folder` as photo-NNNNNN.jpg; else in subfolders of `per_folder`
/// photos each, `folder`/album-NNNNN/photo-NNNNNN.jpg. Returns 0, or -1 with the reason in
/// `message`.
int tessera_test_write_distinct_jpegs(const char *folder, int count, int per_folder, int width, int height, int noise,
                                      int quality, char *message, size_t message_bytes);

#endif
