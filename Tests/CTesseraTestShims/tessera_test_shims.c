// tessera_test_shims.c — see tessera_test_shims.h.
#include <stdio.h>
#include <string.h>
#include <libheif/heif.h>
#include <lcms2.h>

#include "tessera_test_shims.h"

static int failed(struct heif_error error, char *message, size_t message_bytes) {
    if (error.code == heif_error_Ok) return 0;
    snprintf(message, message_bytes, "%s", error.message);
    return -1;
}

int tessera_test_write_heic(const char *path, const uint8_t *rgb, int width, int height, int orientation,
                            int exif_orientation, int thumbnail_box, int nclx_primaries, int quality, char *message,
                            size_t message_bytes) {
    struct heif_context *context = heif_context_alloc();
    struct heif_image *image = NULL;
    struct heif_encoder *encoder = NULL;
    struct heif_image_handle *handle = NULL;
    struct heif_encoding_options *options = NULL;
    struct heif_color_profile_nclx *nclx = NULL;
    int result = -1;
    if (failed(heif_image_create(width, height, heif_colorspace_RGB, heif_chroma_interleaved_RGB, &image), message, message_bytes)) goto done;
    if (failed(heif_image_add_plane(image, heif_channel_interleaved, width, height, 8), message, message_bytes)) goto done;
    int stride = 0;
    uint8_t *plane = heif_image_get_plane(image, heif_channel_interleaved, &stride);
    for (int y = 0; y < height; y++) memcpy(plane + (size_t)y * stride, rgb + (size_t)y * width * 3, (size_t)width * 3);
    if (failed(heif_context_get_encoder_for_format(context, heif_compression_HEVC, &encoder), message, message_bytes)) goto done;
    heif_encoder_set_lossy_quality(encoder, quality);
    options = heif_encoding_options_alloc();
    options->image_orientation = (enum heif_orientation)orientation;
    if (nclx_primaries > 0) {
        nclx = heif_nclx_color_profile_alloc();
        nclx->color_primaries = (enum heif_color_primaries)nclx_primaries;
        nclx->transfer_characteristics = heif_transfer_characteristic_IEC_61966_2_1;
        nclx->matrix_coefficients = heif_matrix_coefficients_ITU_R_BT_601_6;
        nclx->full_range_flag = 1;
        heif_image_set_nclx_color_profile(image, nclx);
        options->output_nclx_profile = nclx;
        options->macOS_compatibility_workaround_no_nclx_profile = 0;
    }
    if (failed(heif_context_encode_image(context, image, encoder, options, &handle), message, message_bytes)) goto done;
    if (thumbnail_box > 0) {
        struct heif_image_handle *thumbnail = NULL;
        if (failed(heif_context_encode_thumbnail(context, image, handle, encoder, options, thumbnail_box, &thumbnail),
                   message, message_bytes)) goto done;
        if (thumbnail != NULL) heif_image_handle_release(thumbnail);
    }
    if (exif_orientation > 0) {
        // A big-endian TIFF structure with one entry: Orientation (0x0112), SHORT, 1 value.
        uint8_t tiff[26] = { 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1,
                             0, (uint8_t)exif_orientation, 0, 0, 0, 0, 0, 0 };
        if (failed(heif_context_add_exif_metadata(context, handle, tiff, sizeof tiff), message, message_bytes)) goto done;
    }
    if (failed(heif_context_write_to_file(context, path), message, message_bytes)) goto done;
    result = 0;
done:
    if (nclx != NULL) heif_nclx_color_profile_free(nclx);
    if (options != NULL) heif_encoding_options_free(options);
    if (handle != NULL) heif_image_handle_release(handle);
    if (encoder != NULL) heif_encoder_release(encoder);
    if (image != NULL) heif_image_release(image);
    heif_context_free(context);
    return result;
}

int tessera_test_write_display_p3_profile(const char *path) {
    cmsCIExyY white = { 0.3127, 0.3290, 1 };
    cmsCIExyYTRIPLE primaries = { { 0.680, 0.320, 1 }, { 0.265, 0.690, 1 }, { 0.150, 0.060, 1 } };
    double params[5] = { 2.4, 1 / 1.055, 0.055 / 1.055, 1 / 12.92, 0.04045 };
    cmsToneCurve *curve = cmsBuildParametricToneCurve(NULL, 4, params);
    cmsToneCurve *curves[3] = { curve, curve, curve };
    cmsHPROFILE profile = cmsCreateRGBProfile(&white, &primaries, curves);
    cmsFreeToneCurve(curve);
    if (profile == NULL) return -1;
    cmsMLU *description = cmsMLUalloc(NULL, 1);
    cmsMLUsetASCII(description, "en", "US", "Display P3 (Tessera tests)");
    cmsWriteTag(profile, cmsSigProfileDescriptionTag, description);
    cmsMLUfree(description);
    int ok = cmsSaveProfileToFile(profile, path);
    cmsCloseProfile(profile);
    return ok ? 0 : -1;
}

/// A CMYK printer profile of our own (no free one ships in Debian but Ghostscript's, under the
/// AGPL): Lab from a 2-point grid over the four inks, a warm paper and inks that do not reach
/// full density, far enough from the naive formula (1 - ink) x (1 - black) that a decoder which
/// ignored it would be levels off. A2B0 only: it converts CMYK to the PCS, as a CMYK photo's
/// profile is read.
int tessera_test_write_cmyk_profile(const char *path) { return tessera_test_write_cmyk_profile_chained(path, 0); }

/// The same, and when `chained` > 0 a floating-point table (D2B0) of that many 4 -> 4 lookup
/// tables and one 4 -> 3, which Little CMS would prefer and run whole at every point of a
/// transform it precomputes (a hostile profile's shape).
int tessera_test_write_cmyk_profile_chained(const char *path, int chained) {
    cmsHPROFILE srgb = cmsCreate_sRGBProfile(), lab = cmsCreateLab4Profile(NULL);
    cmsHTRANSFORM to_lab = srgb && lab ? cmsCreateTransform(srgb, TYPE_RGB_DBL, lab, TYPE_Lab_DBL, INTENT_RELATIVE_COLORIMETRIC, 0) : NULL;
    if (srgb) cmsCloseProfile(srgb);
    if (lab) cmsCloseProfile(lab);
    if (to_lab == NULL) return -1;
    cmsUInt16Number table[16 * 3];
    for (int node = 0; node < 16; node++) {
        // The first input (cyan) varies slowest.
        double c = (node >> 3) & 1, m = (node >> 2) & 1, y = (node >> 1) & 1, k = node & 1;
        double rgb[3] = { 0.96 * (1 - 0.9 * c) * (1 - 0.92 * k), 0.93 * (1 - 0.85 * m) * (1 - 0.92 * k),
                          0.84 * (1 - 0.8 * y) * (1 - 0.92 * k) };
        cmsCIELab value;
        cmsDoTransform(to_lab, rgb, &value, 1);
        cmsFloat2LabEncodedV2(&table[node * 3], &value);
    }
    cmsDeleteTransform(to_lab);
    cmsHPROFILE profile = cmsCreateProfilePlaceholder(NULL);
    cmsPipeline *pipeline = cmsPipelineAlloc(NULL, 4, 3);
    cmsStage *clut = cmsStageAllocCLut16bit(NULL, 2, 4, 3, table);
    int ok = profile != NULL && pipeline != NULL && clut != NULL;
    if (ok) {
        cmsSetProfileVersion(profile, 2.1);  // lut16Type: a CLUT alone is a whole A2B0
        cmsSetDeviceClass(profile, cmsSigOutputClass);
        cmsSetColorSpace(profile, cmsSigCmykData);
        cmsSetPCS(profile, cmsSigLabData);
        ok = cmsPipelineInsertStage(pipeline, cmsAT_BEGIN, clut) && cmsWriteTag(profile, cmsSigAToB0Tag, pipeline);
        clut = NULL;
        if (ok && chained > 0) {
            cmsPipeline *chain = cmsPipelineAlloc(NULL, 4, 3);
            cmsFloat32Number same[16 * 4], last[16 * 3];
            for (int node = 0; node < 16; node++) {
                for (int c = 0; c < 4; c++) same[node * 4 + c] = (float)((node >> (3 - c)) & 1);
                for (int c = 0; c < 3; c++) last[node * 3 + c] = 0.5f;
            }
            for (int i = 0; ok && chain != NULL && i < chained; i++) {
                ok = cmsPipelineInsertStage(chain, cmsAT_END, cmsStageAllocCLutFloat(NULL, 2, 4, 4, same));
            }
            ok = ok && chain != NULL && cmsPipelineInsertStage(chain, cmsAT_END, cmsStageAllocCLutFloat(NULL, 2, 4, 3, last))
                 && cmsWriteTag(profile, cmsSigDToB0Tag, chain);
            if (chain) cmsPipelineFree(chain);
        }
        cmsMLU *description = cmsMLUalloc(NULL, 1);
        cmsMLUsetASCII(description, "en", "US", "CMYK on warm paper (Tessera tests)");
        cmsWriteTag(profile, cmsSigProfileDescriptionTag, description);
        cmsMLUfree(description);
        ok = ok && cmsSaveProfileToFile(profile, path);
    }
    if (clut) cmsStageFree(clut);
    if (pipeline) cmsPipelineFree(pipeline);
    if (profile) cmsCloseProfile(profile);
    return ok ? 0 : -1;
}

// MARK: A grid HEIC, as phones write them

#include <stdlib.h>

typedef struct { uint8_t *bytes; size_t count, capacity; } buffer;

static void put(buffer *b, const void *data, size_t count) {
    if (b->count + count > b->capacity) {
        b->capacity = (b->count + count) * 2 + 256;
        b->bytes = realloc(b->bytes, b->capacity);
    }
    memcpy(b->bytes + b->count, data, count);
    b->count += count;
}
static void put8(buffer *b, uint32_t v) { uint8_t x = (uint8_t)v; put(b, &x, 1); }
static void put16(buffer *b, uint32_t v) { put8(b, v >> 8); put8(b, v); }
static void put32(buffer *b, uint32_t v) { put16(b, v >> 16); put16(b, v); }
static void put4cc(buffer *b, const char *type) { put(b, type, 4); }
/// Starts a box: returns where its size goes (patched by end_box).
static size_t begin_box(buffer *b, const char *type) { size_t at = b->count; put32(b, 0); put4cc(b, type); return at; }
static size_t begin_full_box(buffer *b, const char *type, int version, uint32_t flags) {
    size_t at = begin_box(b, type);
    put32(b, (uint32_t)version << 24 | flags);
    return at;
}
static void end_box(buffer *b, size_t at) {
    uint32_t size = (uint32_t)(b->count - at);
    b->bytes[at] = size >> 24; b->bytes[at + 1] = size >> 16; b->bytes[at + 2] = size >> 8; b->bytes[at + 3] = size;
}

static struct heif_error collect(struct heif_context *context, const void *data, size_t size, void *user) {
    (void)context;
    put(user, data, size);
    return (struct heif_error){ heif_error_Ok, heif_suberror_Unspecified, "" };
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint64_t rdn(const uint8_t *p, int n) { uint64_t v = 0; for (int i = 0; i < n; i++) v = v << 8 | p[i]; return v; }

/// The child box `type` of [start, end): its whole box (offset, size).
static int child(const uint8_t *d, size_t start, size_t end, const char *type, size_t *at, size_t *size) {
    for (size_t p = start; p + 8 <= end;) {
        uint32_t s = rd32(d + p);
        if (s < 8 || s > end - p) return 0;
        if (memcmp(d + p + 4, type, 4) == 0) { *at = p; *size = s; return 1; }
        p += s;
    }
    return 0;
}

typedef struct { buffer hvcc, colr, data; } coded;

/// One image through libheif's HEVC encoder, then its hvcC, colr and coded data out of the file.
static int encode_one(const uint8_t *rgb, int width, int height, int stride, int quality, coded *out, char *message, size_t message_bytes) {
    memset(out, 0, sizeof *out);
    struct heif_context *context = heif_context_alloc();
    struct heif_image *image = NULL;
    struct heif_encoder *encoder = NULL;
    buffer file = { 0 };
    int result = -1;
    if (failed(heif_image_create(width, height, heif_colorspace_RGB, heif_chroma_interleaved_RGB, &image), message, message_bytes)) goto done;
    if (failed(heif_image_add_plane(image, heif_channel_interleaved, width, height, 8), message, message_bytes)) goto done;
    int plane_stride = 0;
    uint8_t *plane = heif_image_get_plane(image, heif_channel_interleaved, &plane_stride);
    for (int y = 0; y < height; y++) memcpy(plane + (size_t)y * plane_stride, rgb + (size_t)y * stride, (size_t)width * 3);
    if (failed(heif_context_get_encoder_for_format(context, heif_compression_HEVC, &encoder), message, message_bytes)) goto done;
    heif_encoder_set_lossy_quality(encoder, quality);
    if (failed(heif_context_encode_image(context, image, encoder, NULL, NULL), message, message_bytes)) goto done;
    struct heif_writer writer = { .writer_api_version = 1, .write = collect };
    if (failed(heif_context_write(context, &writer, &file), message, message_bytes)) goto done;
    // meta > iprp > ipco > hvcC, colr; meta > iloc: the one item's one extent.
    const uint8_t *d = file.bytes;
    size_t meta, meta_size, iprp, iprp_size, ipco, ipco_size, box, box_size, iloc, iloc_size;
    if (!child(d, 0, file.count, "meta", &meta, &meta_size) ||
        !child(d, meta + 12, meta + meta_size, "iprp", &iprp, &iprp_size) ||
        !child(d, iprp + 8, iprp + iprp_size, "ipco", &ipco, &ipco_size) ||
        !child(d, ipco + 8, ipco + ipco_size, "hvcC", &box, &box_size)) { snprintf(message, message_bytes, "no hvcC"); goto done; }
    put(&out->hvcc, d + box, box_size);
    if (child(d, ipco + 8, ipco + ipco_size, "colr", &box, &box_size)) put(&out->colr, d + box, box_size);
    if (!child(d, meta + 12, meta + meta_size, "iloc", &iloc, &iloc_size)) { snprintf(message, message_bytes, "no iloc"); goto done; }
    const uint8_t *p = d + iloc + 8;
    int version = p[0];
    p += 4;
    int offset_size = p[0] >> 4, length_size = p[0] & 15, base_size = p[1] >> 4, index_size = version > 0 ? p[1] & 15 : 0;
    p += 2;
    uint32_t items = version < 2 ? (uint32_t)rdn(p, 2) : rd32(p);
    p += version < 2 ? 2 : 4;
    if (items < 1) { snprintf(message, message_bytes, "no item"); goto done; }
    p += version < 2 ? 2 : 4;      // item_ID
    if (version > 0) p += 2;       // construction_method
    p += 2;                        // data_reference_index
    uint64_t base = rdn(p, base_size);
    p += base_size;
    uint32_t extents = (uint32_t)rdn(p, 2);
    p += 2;
    for (uint32_t e = 0; e < extents; e++) {
        p += index_size;
        uint64_t offset = rdn(p, offset_size); p += offset_size;
        uint64_t length = rdn(p, length_size); p += length_size;
        if (base + offset + length > file.count) { snprintf(message, message_bytes, "bad extent"); goto done; }
        put(&out->data, d + base + offset, (size_t)length);
    }
    result = 0;
done:
    free(file.bytes);
    if (encoder != NULL) heif_encoder_release(encoder);
    if (image != NULL) heif_image_release(image);
    heif_context_free(context);
    return result;
}

int tessera_test_write_grid_heic(const char *path, const uint8_t *rgb, int width, int height, int tile, int thumbnail_box,
                                 int quality, char *message, size_t message_bytes) {
    tessera_test_heic_options none = { 0 };
    return tessera_test_write_phone_heic(path, rgb, width, height, tile, thumbnail_box, quality, &none, message, message_bytes);
}

/// The transform properties `transforms` names (tessera_test_heic_options), written into ipco;
/// how many.
static int put_transforms(buffer *out, const tessera_test_heic_options *options) {
    int count = 0;
    for (const char *t = options->transforms; t != NULL && *t; t++) {
        if (*t == 'r' && t[1] >= '0' && t[1] <= '3') {
            size_t box = begin_box(out, "irot"); put8(out, (uint32_t)(t[1] - '0')); end_box(out, box);
            t++;
        } else if (*t == 'm' && (t[1] == '0' || t[1] == '1')) {
            size_t box = begin_box(out, "imir"); put8(out, (uint32_t)(t[1] - '0')); end_box(out, box);
            t++;
        } else if (*t == 'c') {
            size_t box = begin_box(out, "clap");
            put32(out, (uint32_t)options->clap_width); put32(out, 1); put32(out, (uint32_t)options->clap_height); put32(out, 1);
            put32(out, 0); put32(out, 1); put32(out, 0); put32(out, 1);
            end_box(out, box);
        } else {
            continue;
        }
        count++;
    }
    return count;
}

struct tessera_test_heic_tiles {
    int width, height, tile, columns, rows, tiles, thumb_w, thumb_h, has_thumb;
    coded *parts;  // the tiles row by row, then the thumbnail
};

void tessera_test_free_heic_tiles(tessera_test_heic_tiles *coded_tiles) {
    if (coded_tiles == NULL) return;
    for (int t = 0; t < coded_tiles->tiles + coded_tiles->has_thumb; t++) {
        free(coded_tiles->parts[t].hvcc.bytes); free(coded_tiles->parts[t].colr.bytes); free(coded_tiles->parts[t].data.bytes);
    }
    free(coded_tiles->parts);
    free(coded_tiles);
}

tessera_test_heic_tiles *tessera_test_encode_heic_tiles(const uint8_t *rgb, int width, int height, int tile, int thumbnail_box,
                                                        int quality, char *message, size_t message_bytes) {
    int columns = (width + tile - 1) / tile, rows = (height + tile - 1) / tile, tiles = columns * rows;
    if (tiles + 16 > 127 || columns > 256 || rows > 256) { snprintf(message, message_bytes, "too many tiles"); return NULL; }
    coded *parts = calloc((size_t)tiles + 1, sizeof *parts);
    uint8_t *block = malloc((size_t)tile * tile * 3);
    int coded_parts = 0;
    tessera_test_heic_tiles *made = NULL;
    // Tiles, edge pixels repeated past the picture.
    for (int t = 0; t < tiles; t++) {
        int x0 = (t % columns) * tile, y0 = (t / columns) * tile;
        for (int y = 0; y < tile; y++) {
            int sy = y0 + y < height ? y0 + y : height - 1;
            for (int x = 0; x < tile; x++) {
                int sx = x0 + x < width ? x0 + x : width - 1;
                memcpy(block + ((size_t)y * tile + x) * 3, rgb + ((size_t)sy * width + sx) * 3, 3);
            }
        }
        if (encode_one(block, tile, tile, tile * 3, quality, &parts[t], message, message_bytes) != 0) goto done;
        coded_parts++;
    }
    // The thumbnail: every `step`-th pixel (tests only need a picture of the right shape).
    int thumb_w = 0, thumb_h = 0;
    if (thumbnail_box > 0) {
        int step = (width > height ? width : height + thumbnail_box - 1) / thumbnail_box;
        if (step < 1) step = 1;
        thumb_w = width / step; thumb_h = height / step;
        uint8_t *small = malloc((size_t)thumb_w * thumb_h * 3);
        for (int y = 0; y < thumb_h; y++)
            for (int x = 0; x < thumb_w; x++) memcpy(small + ((size_t)y * thumb_w + x) * 3, rgb + ((size_t)y * step * width + x * step) * 3, 3);
        int ok = encode_one(small, thumb_w, thumb_h, thumb_w * 3, quality, &parts[tiles], message, message_bytes);
        free(small);
        if (ok != 0) goto done;
        coded_parts++;
    }
    if (coded_parts == tiles + (thumbnail_box > 0)) {
        made = calloc(1, sizeof *made);
        *made = (tessera_test_heic_tiles){ width, height, tile, columns, rows, tiles, thumb_w, thumb_h, thumbnail_box > 0, parts };
        parts = NULL;
    }
done:
    if (parts != NULL) {
        for (int t = 0; t < coded_parts; t++) { free(parts[t].hvcc.bytes); free(parts[t].colr.bytes); free(parts[t].data.bytes); }
        free(parts);
    }
    free(block);
    return made;
}

int tessera_test_write_heic_tiles(const char *path, const tessera_test_heic_tiles *coded_tiles, const tessera_test_heic_options *options,
                                  char *message, size_t message_bytes) {
    int width = coded_tiles->width, height = coded_tiles->height, columns = coded_tiles->columns, rows = coded_tiles->rows;
    int tiles = coded_tiles->tiles, thumb_w = coded_tiles->thumb_w, thumb_h = coded_tiles->thumb_h, tile = coded_tiles->tile;
    const coded *parts = coded_tiles->parts;
    int result = -1;
    int has_thumb = coded_tiles->has_thumb && !options->omit_thumbnail;
    uint32_t grid_id = (uint32_t)tiles + 1, thumb_id = (uint32_t)tiles + 2;
    buffer out = { 0 };
    size_t box = begin_box(&out, "ftyp");
    put4cc(&out, "heic"); put32(&out, 0); put4cc(&out, "mif1"); put4cc(&out, "heic");
    end_box(&out, box);
    size_t meta = begin_full_box(&out, "meta", 0, 0);
    box = begin_full_box(&out, "hdlr", 0, 0);
    put32(&out, 0); put4cc(&out, "pict"); put32(&out, 0); put32(&out, 0); put32(&out, 0); put8(&out, 0);
    end_box(&out, box);
    box = begin_full_box(&out, "pitm", 0, 0); put16(&out, grid_id); end_box(&out, box);
    box = begin_full_box(&out, "iinf", 0, 0);
    put16(&out, (uint32_t)tiles + 1 + has_thumb);
    for (int t = 0; t <= tiles + has_thumb - (has_thumb ? 0 : 0); t++) {
        if (t == tiles && !has_thumb) break;
        uint32_t id = t < tiles ? (uint32_t)t + 1 : thumb_id;
        size_t infe = begin_full_box(&out, "infe", 2, t < tiles ? 1 : 0);
        put16(&out, id); put16(&out, 0); put4cc(&out, "hvc1"); put8(&out, 0);
        end_box(&out, infe);
    }
    size_t infe = begin_full_box(&out, "infe", 2, 0);
    put16(&out, grid_id); put16(&out, 0); put4cc(&out, "grid"); put8(&out, 0);
    end_box(&out, infe);
    end_box(&out, box);
    box = begin_full_box(&out, "iref", 0, 0);
    size_t dimg = begin_box(&out, "dimg");
    put16(&out, grid_id); put16(&out, (uint32_t)tiles);
    for (int t = 0; t < tiles; t++) put16(&out, (uint32_t)t + 1);
    end_box(&out, dimg);
    if (has_thumb) {
        size_t thmb = begin_box(&out, "thmb");
        put16(&out, thumb_id); put16(&out, 1); put16(&out, grid_id);
        end_box(&out, thmb);
    }
    end_box(&out, box);
    // Properties: 1..tiles hvcC, then tile ispe, grid ispe, colr, thumbnail hvcC and ispe.
    size_t iprp = begin_box(&out, "iprp");
    size_t ipco = begin_box(&out, "ipco");
    for (int t = 0; t < tiles; t++) put(&out, parts[t].hvcc.bytes, parts[t].hvcc.count);
    size_t ispe = begin_full_box(&out, "ispe", 0, 0); put32(&out, (uint32_t)tile); put32(&out, (uint32_t)tile); end_box(&out, ispe);
    ispe = begin_full_box(&out, "ispe", 0, 0);
    put32(&out, (uint32_t)(options->canvas_width > 0 ? options->canvas_width : width));
    put32(&out, (uint32_t)(options->canvas_height > 0 ? options->canvas_height : height));
    end_box(&out, ispe);
    int has_colr = parts[0].colr.count > 0;
    if (has_colr) put(&out, parts[0].colr.bytes, parts[0].colr.count);
    if (has_thumb) {
        put(&out, parts[tiles].hvcc.bytes, parts[tiles].hvcc.count);
        ispe = begin_full_box(&out, "ispe", 0, 0); put32(&out, (uint32_t)thumb_w); put32(&out, (uint32_t)thumb_h); end_box(&out, ispe);
    }
    int has_icc = options->icc != NULL && options->icc_bytes > 0;
    if (has_icc) {
        size_t colr_box = begin_box(&out, "colr"); put4cc(&out, "prof"); put(&out, options->icc, options->icc_bytes); end_box(&out, colr_box);
    }
    int transforms = put_transforms(&out, options);
    end_box(&out, ipco);
    int tile_ispe = tiles + 1, grid_ispe = tiles + 2, colr = tiles + 3;
    int thumb_hvcc = tiles + 3 + has_colr, thumb_ispe = thumb_hvcc + 1;
    int icc_index = tiles + 3 + has_colr + 2 * has_thumb, first_transform = icc_index + has_icc;
    size_t ipma = begin_full_box(&out, "ipma", 0, 0);
    put32(&out, (uint32_t)tiles + 1 + has_thumb);
    for (int t = 0; t < tiles; t++) {
        put16(&out, (uint32_t)t + 1); put8(&out, 2 + has_colr);
        put8(&out, 0x80 | (t + 1)); put8(&out, tile_ispe);
        if (has_colr) put8(&out, colr);
    }
    put16(&out, grid_id); put8(&out, (uint32_t)(1 + has_colr + has_icc + transforms)); put8(&out, grid_ispe);
    if (has_colr) put8(&out, colr);
    if (has_icc) put8(&out, icc_index);
    for (int t = 0; t < transforms; t++) put8(&out, 0x80 | (first_transform + t));
    if (has_thumb) {
        // The thumbnail turned the same way, as a phone writes it.
        int thumb_transforms = options->thumbnail_unturned ? 0 : transforms;
        put16(&out, thumb_id); put8(&out, (uint32_t)(2 + has_colr + has_icc + thumb_transforms)); put8(&out, 0x80 | thumb_hvcc);
        put8(&out, thumb_ispe);
        if (has_colr) put8(&out, colr);
        if (has_icc) put8(&out, icc_index);
        for (int t = 0; t < thumb_transforms; t++) put8(&out, 0x80 | (first_transform + t));
    }
    end_box(&out, ipma);
    end_box(&out, iprp);
    box = begin_box(&out, "idat");
    put8(&out, 0); put8(&out, 0); put8(&out, (uint32_t)rows - 1); put8(&out, (uint32_t)columns - 1);
    put16(&out, (uint32_t)(options->canvas_width > 0 ? options->canvas_width : width));
    put16(&out, (uint32_t)(options->canvas_height > 0 ? options->canvas_height : height));
    end_box(&out, box);
    // iloc v1, 4-byte offsets and lengths; offsets patched once the meta box's size is known.
    size_t iloc = begin_full_box(&out, "iloc", 1, 0);
    put8(&out, 0x44); put8(&out, 0x00);
    put16(&out, (uint32_t)tiles + 1 + has_thumb);
    size_t *offset_at = calloc((size_t)tiles + 1, sizeof *offset_at);
    for (int t = 0; t < tiles + has_thumb; t++) {
        put16(&out, t < tiles ? (uint32_t)t + 1 : thumb_id); put16(&out, 0); put16(&out, 0); put16(&out, 1);
        offset_at[t] = out.count;
        put32(&out, 0); put32(&out, (uint32_t)parts[t].data.count);
    }
    put16(&out, grid_id); put16(&out, 1); put16(&out, 0); put16(&out, 1); put32(&out, 0); put32(&out, 8);
    end_box(&out, iloc);
    end_box(&out, meta);
    size_t mdat = begin_box(&out, "mdat");
    for (int t = 0; t < tiles + has_thumb; t++) {
        uint32_t offset = (uint32_t)out.count;
        uint8_t *p = out.bytes + offset_at[t];
        p[0] = offset >> 24; p[1] = offset >> 16; p[2] = offset >> 8; p[3] = offset;
        size_t at = out.count;
        put(&out, parts[t].data.bytes, parts[t].data.count);
        // A damaged thumbnail: a first NAL unit of 5 bytes of 0xFF, then 0xFF to the end (the
        // next unit's length past the data).
        if (t == tiles && options->damage_thumbnail && out.count - at >= 9) {
            out.bytes[at] = 0; out.bytes[at + 1] = 0; out.bytes[at + 2] = 0; out.bytes[at + 3] = 5;
            for (size_t i = at + 4; i < out.count; i++) out.bytes[i] = 0xFF;
        }
    }
    end_box(&out, mdat);
    free(offset_at);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(out.bytes, 1, out.count, f) != out.count) { snprintf(message, message_bytes, "write failed"); }
    else result = 0;
    if (f != NULL) fclose(f);
    free(out.bytes);
    return result;
}

int tessera_test_write_phone_heic(const char *path, const uint8_t *rgb, int width, int height, int tile, int thumbnail_box,
                                  int quality, const tessera_test_heic_options *options, char *message, size_t message_bytes) {
    tessera_test_heic_tiles *coded_tiles = tessera_test_encode_heic_tiles(rgb, width, height, tile, thumbnail_box, quality, message,
                                                                          message_bytes);
    if (coded_tiles == NULL) return -1;
    int result = tessera_test_write_heic_tiles(path, coded_tiles, options, message, message_bytes);
    tessera_test_free_heic_tiles(coded_tiles);
    return result;
}

// MARK: HEICs whose ispe lies

int tessera_test_write_lying_heic(const char *path, int picture_width, int picture_height, int columns, int rows,
                                  uint32_t ispe_width, uint32_t ispe_height, char *message, size_t message_bytes) {
    // One picture: a gradient, coded by libheif's encoder.
    uint8_t *rgb = malloc((size_t)picture_width * picture_height * 3);
    if (rgb == NULL) { snprintf(message, message_bytes, "out of memory"); return -1; }
    for (int y = 0; y < picture_height; y++)
        for (int x = 0; x < picture_width; x++) {
            uint8_t *p = rgb + ((size_t)y * picture_width + x) * 3;
            p[0] = (uint8_t)(x * 255 / picture_width); p[1] = (uint8_t)(y * 255 / picture_height); p[2] = 128;
        }
    coded picture;
    int ok = encode_one(rgb, picture_width, picture_height, picture_width * 3, 50, &picture, message, message_bytes);
    free(rgb);
    if (ok != 0) return -1;
    int grid = columns > 0 && rows > 0;
    uint32_t tile_id = 1, grid_id = 2, primary = grid ? grid_id : tile_id;
    buffer out = { 0 };
    size_t box = begin_box(&out, "ftyp");
    put4cc(&out, "heic"); put32(&out, 0); put4cc(&out, "mif1"); put4cc(&out, "heic");
    end_box(&out, box);
    size_t meta = begin_full_box(&out, "meta", 0, 0);
    box = begin_full_box(&out, "hdlr", 0, 0);
    put32(&out, 0); put4cc(&out, "pict"); put32(&out, 0); put32(&out, 0); put32(&out, 0); put8(&out, 0);
    end_box(&out, box);
    box = begin_full_box(&out, "pitm", 0, 0); put16(&out, primary); end_box(&out, box);
    box = begin_full_box(&out, "iinf", 0, 0);
    put16(&out, grid ? 2 : 1);
    size_t infe = begin_full_box(&out, "infe", 2, grid ? 1 : 0);
    put16(&out, tile_id); put16(&out, 0); put4cc(&out, "hvc1"); put8(&out, 0);
    end_box(&out, infe);
    if (grid) {
        infe = begin_full_box(&out, "infe", 2, 0);
        put16(&out, grid_id); put16(&out, 0); put4cc(&out, "grid"); put8(&out, 0);
        end_box(&out, infe);
    }
    end_box(&out, box);
    if (grid) {
        // Every cell of the grid is the same tile item.
        box = begin_full_box(&out, "iref", 0, 0);
        size_t dimg = begin_box(&out, "dimg");
        put16(&out, grid_id); put16(&out, (uint32_t)(columns * rows));
        for (int t = 0; t < columns * rows; t++) put16(&out, tile_id);
        end_box(&out, dimg);
        end_box(&out, box);
    }
    // Properties: 1 hvcC, 2 the tile's ispe (grid: its true size; else the lie), 3 the grid's.
    size_t iprp = begin_box(&out, "iprp");
    size_t ipco = begin_box(&out, "ipco");
    put(&out, picture.hvcc.bytes, picture.hvcc.count);
    size_t ispe = begin_full_box(&out, "ispe", 0, 0);
    put32(&out, grid ? (uint32_t)picture_width : ispe_width); put32(&out, grid ? (uint32_t)picture_height : ispe_height);
    end_box(&out, ispe);
    if (grid) { ispe = begin_full_box(&out, "ispe", 0, 0); put32(&out, ispe_width); put32(&out, ispe_height); end_box(&out, ispe); }
    end_box(&out, ipco);
    size_t ipma = begin_full_box(&out, "ipma", 0, 0);
    put32(&out, grid ? 2 : 1);
    put16(&out, tile_id); put8(&out, 2); put8(&out, 0x81); put8(&out, 2);
    if (grid) { put16(&out, grid_id); put8(&out, 1); put8(&out, 3); }
    end_box(&out, ipma);
    end_box(&out, iprp);
    if (grid) {
        box = begin_box(&out, "idat");
        uint32_t width = (uint32_t)(columns * picture_width), height = (uint32_t)(rows * picture_height);
        put8(&out, 0); put8(&out, 1); put8(&out, (uint32_t)rows - 1); put8(&out, (uint32_t)columns - 1);
        put32(&out, width); put32(&out, height);
        end_box(&out, box);
    }
    size_t iloc = begin_full_box(&out, "iloc", 1, 0);
    put8(&out, 0x44); put8(&out, 0x00);
    put16(&out, grid ? 2 : 1);
    put16(&out, tile_id); put16(&out, 0); put16(&out, 0); put16(&out, 1);
    size_t offset_at = out.count;
    put32(&out, 0); put32(&out, (uint32_t)picture.data.count);
    if (grid) { put16(&out, grid_id); put16(&out, 1); put16(&out, 0); put16(&out, 1); put32(&out, 0); put32(&out, 12); }
    end_box(&out, iloc);
    end_box(&out, meta);
    size_t mdat = begin_box(&out, "mdat");
    uint32_t offset = (uint32_t)out.count;
    out.bytes[offset_at] = offset >> 24; out.bytes[offset_at + 1] = offset >> 16;
    out.bytes[offset_at + 2] = offset >> 8; out.bytes[offset_at + 3] = offset;
    put(&out, picture.data.bytes, picture.data.count);
    end_box(&out, mdat);
    int result = -1;
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(out.bytes, 1, out.count, f) != out.count) snprintf(message, message_bytes, "write failed");
    else result = 0;
    if (f != NULL) fclose(f);
    free(out.bytes);
    free(picture.hvcc.bytes); free(picture.colr.bytes); free(picture.data.bytes);
    return result;
}

// Distinct JPEG libraries (tessera_test_write_distinct_jpegs). One compressor is reused for every
// file (jpeg_mem_dest into a buffer libjpeg grows, then one write(2)): creating the files is the
// cost, about 20 microseconds a photo.

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jpeglib.h>

struct jpeg_failure {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
};

static void jpeg_failed(j_common_ptr info) {
    struct jpeg_failure *failure = (struct jpeg_failure *)info->err;
    longjmp(failure->jump, 1);
}

static const uint8_t grey_levels[4] = { 40, 100, 160, 220 };

/// The picture of photo `index` into `rgb` (width x height x 3).
static void draw_distinct(uint8_t *rgb, int width, int height, int index, int noise, uint32_t *seed) {
    int side = width < height ? width : height;
    int left = (width - side) / 2, top = (height - side) / 2;
    for (int y = 0; y < height; y++) {
        int row = (y - top) * 3 / side;
        if (y < top) row = 0;
        if (row > 2) row = 2;
        for (int x = 0; x < width; x++) {
            int column = (x - left) * 3 / side;
            if (x < left) column = 0;
            if (column > 2) column = 2;
            int block = row * 3 + column;
            int level = grey_levels[(index >> (2 * block)) & 3];
            uint8_t *pixel = rgb + ((size_t)y * width + x) * 3;
            for (int channel = 0; channel < 3; channel++) {
                // A tint of -15...15 per block and channel, fixed by the photo's number: the
                // features spread (and get colour) as a real library's do, while two photos'
                // differing block stays at least 60 - 30 = 30 apart in every channel.
                uint32_t hash = (uint32_t)index * 2654435761u ^ (uint32_t)(block * 3 + channel) * 40503u;
                hash ^= hash >> 15; hash *= 2246822519u; hash ^= hash >> 13;
                int value = level + (int)(hash % 31) - 15;
                if (noise > 0) {
                    *seed = *seed * 1664525u + 1013904223u;
                    value += (int)((*seed >> 16) % (uint32_t)(2 * noise + 1)) - noise;
                }
                pixel[channel] = (uint8_t)(value < 0 ? 0 : value > 255 ? 255 : value);
            }
        }
    }
}

int tessera_test_write_distinct_jpegs(const char *folder, int count, int per_folder, int width, int height, int noise,
                                      int quality, char *message, size_t message_bytes) {
    if (count < 0 || per_folder < 0 || width < 3 || height < 3 || width > 8192 || height > 8192) {
        snprintf(message, message_bytes, "bad arguments");
        return -1;
    }
    uint8_t *rgb = malloc((size_t)width * height * 3);
    if (rgb == NULL) {
        snprintf(message, message_bytes, "out of memory");
        return -1;
    }
    struct jpeg_compress_struct info;
    struct jpeg_failure failure;
    info.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = jpeg_failed;
    unsigned char *volatile buffer = NULL;
    volatile unsigned long buffer_bytes = 0;
    volatile int result = -1;
    if (setjmp(failure.jump)) {
        char reason[JMSG_LENGTH_MAX];
        (*info.err->format_message)((j_common_ptr)&info, reason);
        snprintf(message, message_bytes, "libjpeg: %s", reason);
        goto done;
    }
    jpeg_create_compress(&info);
    info.image_width = (JDIMENSION)width;
    info.image_height = (JDIMENSION)height;
    info.input_components = 3;
    info.in_color_space = JCS_RGB;
    jpeg_set_defaults(&info);
    jpeg_set_quality(&info, quality, TRUE);
    uint32_t seed = 12345;
    char path[4096];
    for (int index = 0; index < count; index++) {
        if (per_folder > 0) {
            int written = snprintf(path, sizeof path, "%s/album-%05d", folder, index / per_folder);
            if (written < 0 || (size_t)written >= sizeof path) { snprintf(message, message_bytes, "path too long"); goto done; }
            if (index % per_folder == 0 && mkdir(path, 0755) != 0 && errno != EEXIST) {
                snprintf(message, message_bytes, "mkdir %s: %s", path, strerror(errno));
                goto done;
            }
            written = snprintf(path, sizeof path, "%s/album-%05d/photo-%06d.jpg", folder, index / per_folder, index);
            if (written < 0 || (size_t)written >= sizeof path) { snprintf(message, message_bytes, "path too long"); goto done; }
        } else {
            int written = snprintf(path, sizeof path, "%s/photo-%06d.jpg", folder, index);
            if (written < 0 || (size_t)written >= sizeof path) { snprintf(message, message_bytes, "path too long"); goto done; }
        }
        draw_distinct(rgb, width, height, index, noise, &seed);
        // (jpeg_mem_dest reuses the buffer while it is big enough and grows it when not.)
        unsigned long size = buffer_bytes;
        unsigned char *out = buffer;
        jpeg_mem_dest(&info, &out, &size);
        jpeg_start_compress(&info, TRUE);
        while (info.next_scanline < info.image_height) {
            JSAMPROW row = rgb + (size_t)info.next_scanline * width * 3;
            jpeg_write_scanlines(&info, &row, 1);
        }
        jpeg_finish_compress(&info);
        if (out != buffer) { free(buffer); buffer = out; buffer_bytes = size; }
        // `size` is now the bytes written; the buffer's capacity stays at least that.
        if (size > buffer_bytes) buffer_bytes = size;
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { snprintf(message, message_bytes, "open %s: %s", path, strerror(errno)); goto done; }
        ssize_t put = write(fd, out, size);
        close(fd);
        if (put != (ssize_t)size) { snprintf(message, message_bytes, "write %s failed", path); goto done; }
    }
    result = 0;
done:
    jpeg_destroy_compress(&info);
    free(buffer);
    free(rgb);
    return result;
}
