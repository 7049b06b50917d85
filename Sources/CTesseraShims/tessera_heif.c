// tessera_heif.c — HEIF/HEIC with libheif 1.15, read through pread on a file descriptor.
//
// libheif 1.15 decodes whole images only, so a decode is of the primary image (or of an
// embedded thumbnail, when the caller finds it large enough) in its own YCbCr planes: no RGB
// copy of a 12-megapixel photo. libheif applies the item's irot/imir/clap transforms itself.
// Whether the primary image has irot or imir is read here from the item properties (libheif
// 1.15 does not say), because a file without them may carry its rotation in EXIF instead.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libheif/heif.h>

#include "tessera_shims.h"

int tessera_exif_orientation(const uint8_t *app1, size_t length);

struct tessera_heif {
    int fd;
    int64_t position;
    int64_t file_bytes;
    struct heif_context *context;
    struct heif_image_handle *primary;
    struct heif_image_handle *thumbnail;
    struct heif_image *image;
    uint8_t *icc;
    size_t icc_bytes;
    int is_grid;
};

// MARK: Reader over pread

static int64_t get_position(void *user) { return ((struct tessera_heif *)user)->position; }

static int read_bytes(void *data, size_t size, void *user) {
    struct tessera_heif *heif = user;
    uint8_t *out = data;
    while (size > 0) {
        ssize_t n = pread(heif->fd, out, size, (off_t)heif->position);
        if (n <= 0) return -1;
        heif->position += n;
        out += n;
        size -= (size_t)n;
    }
    return 0;
}

static int seek_to(int64_t position, void *user) {
    struct tessera_heif *heif = user;
    if (position < 0 || position > heif->file_bytes) return -1;
    heif->position = position;
    return 0;
}

static enum heif_reader_grow_status wait_for_size(int64_t size, void *user) {
    struct tessera_heif *heif = user;
    return size > heif->file_bytes ? heif_reader_grow_status_size_beyond_eof : heif_reader_grow_status_size_reached;
}

static const struct heif_reader reader = {
    .reader_api_version = 1,
    .get_position = get_position,
    .read = read_bytes,
    .seek = seek_to,
    .wait_for_file_size = wait_for_size,
};

// MARK: Item properties

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

/// Finds the child box `type` in [start, end): its payload offset and size.
static int find_box(const uint8_t *data, size_t start, size_t end, const char *type, size_t *payload, size_t *size) {
    size_t at = start;
    while (at + 8 <= end) {
        uint64_t length = be32(data + at);
        size_t header = 8;
        if (length == 1 && at + 16 <= end) {
            length = (uint64_t)be32(data + at + 8) << 32 | be32(data + at + 12);
            header = 16;
        } else if (length == 0) {
            length = end - at;
        }
        if (length < header || length > end - at) return 0;
        if (memcmp(data + at + 4, type, 4) == 0) {
            *payload = at + header;
            *size = (size_t)length - header;
            return 1;
        }
        at += (size_t)length;
    }
    return 0;
}

/// Whether the primary item of the 'meta' box has an irot or imir property, and whether it is
/// a grid of tiles (`*grid`: its item type in 'iinf' is "grid").
static int primary_has_transform(struct tessera_heif *heif, int *grid) {
    *grid = 0;
    // The top-level boxes up to 'meta', which a HEIF file puts first (after 'ftyp').
    int64_t at = 0;
    for (int boxes = 0; boxes < 64 && at + 8 <= heif->file_bytes; boxes++) {
        uint8_t head[16];
        if (pread(heif->fd, head, 16, at) < 8) return 0;
        uint64_t length = be32(head);
        if (length == 1) length = (uint64_t)be32(head + 8) << 32 | be32(head + 12);
        if (length < 8) return 0;
        if (memcmp(head + 4, "meta", 4) == 0) {
            if (length > (16u << 20)) return 0;
            uint8_t *meta = malloc((size_t)length);
            if (meta == NULL || pread(heif->fd, meta, (size_t)length, at) != (ssize_t)length) { free(meta); return 0; }
            int found = 0;
            size_t end = (size_t)length, pitm, pitm_size, iprp, iprp_size, ipco, ipco_size, ipma, ipma_size;
            // 'meta' is a full box: 8 bytes of header, 4 of version and flags.
            if (end >= 12 && find_box(meta, 12, end, "pitm", &pitm, &pitm_size) && pitm_size >= 6 &&
                find_box(meta, 12, end, "iprp", &iprp, &iprp_size) &&
                find_box(meta, iprp, iprp + iprp_size, "ipco", &ipco, &ipco_size) &&
                find_box(meta, iprp, iprp + iprp_size, "ipma", &ipma, &ipma_size) && ipma_size >= 8) {
                uint32_t primary = meta[pitm] == 0 ? be16(meta + pitm + 4) : (pitm_size >= 8 ? be32(meta + pitm + 4) : 0);
                // The primary item's type, from its 'infe' (version 2 or 3) in 'iinf'.
                size_t iinf, iinf_size;
                if (find_box(meta, 12, end, "iinf", &iinf, &iinf_size) && iinf_size >= 6) {
                    size_t q = iinf + (meta[iinf] == 0 ? 6 : 8), iinf_end = iinf + iinf_size;
                    while (q + 8 <= iinf_end) {
                        uint32_t size = be32(meta + q);
                        if (size < 8 || size > iinf_end - q) break;
                        if (memcmp(meta + q + 4, "infe", 4) == 0 && size >= 20 && meta[q + 8] >= 2) {
                            int wide = meta[q + 8] == 3;
                            uint32_t id = wide ? be32(meta + q + 12) : be16(meta + q + 12);
                            const uint8_t *type = meta + q + 12 + (wide ? 4 : 2) + 2;
                            if (id == primary && type + 4 <= meta + q + size && memcmp(type, "grid", 4) == 0) *grid = 1;
                        }
                        q += size;
                    }
                }
                // The property types, in order (1-based in ipma).
                char types[256][4];
                int count = 0;
                size_t p = ipco;
                while (p + 8 <= ipco + ipco_size && count < 256) {
                    uint32_t size = be32(meta + p);
                    if (size < 8 || size > ipco + ipco_size - p) break;
                    memcpy(types[count++], meta + p + 4, 4);
                    p += size;
                }
                int version = meta[ipma], flags = meta[ipma + 3];
                uint32_t entries = be32(meta + ipma + 4);
                size_t q = ipma + 8, ipma_end = ipma + ipma_size;
                for (uint32_t e = 0; e < entries && q < ipma_end; e++) {
                    uint32_t item;
                    if (version < 1) { if (q + 2 > ipma_end) break; item = be16(meta + q); q += 2; }
                    else { if (q + 4 > ipma_end) break; item = be32(meta + q); q += 4; }
                    if (q + 1 > ipma_end) break;
                    int associations = meta[q++];
                    for (int a = 0; a < associations; a++) {
                        int index;
                        if (flags & 1) { if (q + 2 > ipma_end) break; index = be16(meta + q) & 0x7FFF; q += 2; }
                        else { if (q + 1 > ipma_end) break; index = meta[q] & 0x7F; q += 1; }
                        if (item == primary && index >= 1 && index <= count &&
                            (memcmp(types[index - 1], "irot", 4) == 0 || memcmp(types[index - 1], "imir", 4) == 0)) {
                            found = 1;
                        }
                    }
                }
            }
            free(meta);
            return found;
        }
        at += (int64_t)length;
    }
    return 0;
}

// MARK: Open, decode

static void error_text(struct heif_error error, char *message, size_t message_bytes) {
    snprintf(message, message_bytes, "%s", error.message != NULL && error.message[0] ? error.message : "libheif error");
}

tessera_heif *tessera_heif_open(int fd, uint64_t file_bytes, tessera_heif_info *info, char *message, size_t message_bytes) {
    struct tessera_heif *heif = calloc(1, sizeof *heif);
    if (heif == NULL) { snprintf(message, message_bytes, "out of memory"); return NULL; }
    heif->fd = fd;
    heif->file_bytes = (int64_t)file_bytes;
    heif->context = heif_context_alloc();
    if (heif->context == NULL) { free(heif); snprintf(message, message_bytes, "out of memory"); return NULL; }
    // One decoding thread: the render's workers are the parallelism, and each thread of
    // libheif's own would hold a decoder of its own.
    heif_context_set_max_decoding_threads(heif->context, 0);
    // No image wider or taller than this (a hostile header); the caller budgets the rest.
    heif_context_set_maximum_image_size_limit(heif->context, 1 << 15);
    struct heif_error error = heif_context_read_from_reader(heif->context, &reader, heif, NULL);
    if (error.code != heif_error_Ok) { error_text(error, message, message_bytes); tessera_heif_close(heif); return NULL; }
    error = heif_context_get_primary_image_handle(heif->context, &heif->primary);
    if (error.code != heif_error_Ok) { error_text(error, message, message_bytes); tessera_heif_close(heif); return NULL; }
    memset(info, 0, sizeof *info);
    info->width = (uint32_t)heif_image_handle_get_width(heif->primary);
    info->height = (uint32_t)heif_image_handle_get_height(heif->primary);
    info->has_alpha = heif_image_handle_has_alpha_channel(heif->primary);
    info->luma_bits = heif_image_handle_get_luma_bits_per_pixel(heif->primary);
    int grid = 0;
    info->has_transform = primary_has_transform(heif, &grid);
    info->is_grid = grid;
    heif->is_grid = grid;
    info->cicp_primaries = info->cicp_transfer = info->cicp_matrix = info->cicp_full_range = -1;
    struct heif_color_profile_nclx *nclx = NULL;
    if (heif_image_handle_get_nclx_color_profile(heif->primary, &nclx).code == heif_error_Ok && nclx != NULL) {
        info->cicp_primaries = nclx->color_primaries;
        info->cicp_transfer = nclx->transfer_characteristics;
        info->cicp_matrix = nclx->matrix_coefficients;
        info->cicp_full_range = nclx->full_range_flag;
        heif_nclx_color_profile_free(nclx);
    }
    size_t icc_bytes = heif_image_handle_get_raw_color_profile_size(heif->primary);
    if (icc_bytes > 0 && icc_bytes < (16u << 20)) {
        heif->icc = malloc(icc_bytes);
        if (heif->icc != NULL && heif_image_handle_get_raw_color_profile(heif->primary, heif->icc).code == heif_error_Ok) {
            heif->icc_bytes = icc_bytes;
        }
    }
    // The largest thumbnail.
    heif_item_id ids[8];
    int thumbnails = heif_image_handle_get_list_of_thumbnail_IDs(heif->primary, ids, 8);
    for (int i = 0; i < thumbnails; i++) {
        struct heif_image_handle *thumbnail = NULL;
        if (heif_image_handle_get_thumbnail(heif->primary, ids[i], &thumbnail).code != heif_error_Ok) continue;
        int w = heif_image_handle_get_width(thumbnail), h = heif_image_handle_get_height(thumbnail);
        if ((uint64_t)w * (uint64_t)h > (uint64_t)info->thumbnail_width * info->thumbnail_height) {
            if (heif->thumbnail != NULL) heif_image_handle_release(heif->thumbnail);
            heif->thumbnail = thumbnail;
            info->thumbnail_width = (uint32_t)w;
            info->thumbnail_height = (uint32_t)h;
        } else {
            heif_image_handle_release(thumbnail);
        }
    }
    // EXIF: 4 bytes giving the offset of the TIFF header, then (usually "Exif\0\0" and) TIFF.
    heif_item_id exif_id;
    if (heif_image_handle_get_list_of_metadata_block_IDs(heif->primary, "Exif", &exif_id, 1) == 1) {
        size_t size = heif_image_handle_get_metadata_size(heif->primary, exif_id);
        if (size > 4 && size < (1u << 20)) {
            uint8_t *exif = malloc(size + 6);
            if (exif != NULL && heif_image_handle_get_metadata(heif->primary, exif_id, exif + 6).code == heif_error_Ok) {
                size_t skip = 4 + be32(exif + 6);
                if (skip < size) {
                    uint8_t *tiff = exif + 6 + skip;
                    size_t tiff_bytes = size - skip;
                    if (tiff_bytes >= 6 && memcmp(tiff, "Exif\0\0", 6) == 0) {
                        info->exif_orientation = tessera_exif_orientation(tiff, tiff_bytes);
                    } else {
                        memmove(exif + 6, tiff, tiff_bytes);
                        memcpy(exif, "Exif\0\0", 6);
                        info->exif_orientation = tessera_exif_orientation(exif, tiff_bytes + 6);
                    }
                }
            }
            free(exif);
        }
    }
    return heif;
}

const uint8_t *tessera_heif_icc(tessera_heif *heif, size_t *length) {
    *length = heif->icc_bytes;
    return heif->icc;
}

int tessera_heif_decode(tessera_heif *heif, int thumbnail, tessera_heif_planes *planes, char *message, size_t message_bytes) {
    struct heif_image_handle *handle = thumbnail && heif->thumbnail != NULL ? heif->thumbnail : heif->primary;
    struct heif_decoding_options *options = heif_decoding_options_alloc();
    if (options == NULL) { snprintf(message, message_bytes, "out of memory"); return -1; }
    options->convert_hdr_to_8bit = 1;
    if (heif->image != NULL) { heif_image_release(heif->image); heif->image = NULL; }
    // One HEVC picture: YCbCr 4:2:0, the codec's own planes (1.5 bytes a pixel; "undefined"
    // would make libheif 1.15 convert them to planar RGB). A grid: libheif 1.15 assembles its
    // tiles in planar RGB whatever is asked (3 bytes a pixel), so that is asked for: asking for
    // YCbCr would add a converted copy. (A 4:4:4 or grey single picture is converted to 4:2:0 by
    // libheif, which costs a copy; they are rare.)
    int grid_image = !thumbnail && heif->is_grid;
    struct heif_error error = heif_decode_image(handle, &heif->image, grid_image ? heif_colorspace_undefined : heif_colorspace_YCbCr,
                                                grid_image ? heif_chroma_undefined : heif_chroma_420, options);
    heif_decoding_options_free(options);
    if (error.code != heif_error_Ok) { error_text(error, message, message_bytes); return -1; }
    memset(planes, 0, sizeof *planes);
    struct heif_image *image = heif->image;
    planes->width = heif_image_get_primary_width(image);
    planes->height = heif_image_get_primary_height(image);
    enum heif_colorspace space = heif_image_get_colorspace(image);
    enum heif_chroma chroma = heif_image_get_chroma_format(image);
    int stride = 0;
    if (space == heif_colorspace_YCbCr || space == heif_colorspace_monochrome) {
        planes->layout = space == heif_colorspace_monochrome || chroma == heif_chroma_monochrome ? 0
                       : chroma == heif_chroma_420 ? 420 : chroma == heif_chroma_422 ? 422 : 444;
        planes->bits = heif_image_get_bits_per_pixel_range(image, heif_channel_Y);
        planes->y = heif_image_get_plane_readonly(image, heif_channel_Y, &stride);
        planes->y_stride = stride;
        if (planes->layout != 0) {
            planes->cb = heif_image_get_plane_readonly(image, heif_channel_Cb, &stride);
            planes->cb_stride = stride;
            planes->cr = heif_image_get_plane_readonly(image, heif_channel_Cr, &stride);
            planes->cr_stride = stride;
        }
    } else if (space == heif_colorspace_RGB && chroma == heif_chroma_444) {
        planes->layout = 3;  // planar RGB
        planes->bits = heif_image_get_bits_per_pixel_range(image, heif_channel_R);
        planes->y = heif_image_get_plane_readonly(image, heif_channel_R, &stride);
        planes->y_stride = stride;
        planes->cb = heif_image_get_plane_readonly(image, heif_channel_G, &stride);
        planes->cb_stride = stride;
        planes->cr = heif_image_get_plane_readonly(image, heif_channel_B, &stride);
        planes->cr_stride = stride;
    } else {
        snprintf(message, message_bytes, "a HEIF colour layout Tessera does not read (colour space %d, chroma %d)",
                 (int)space, (int)chroma);
        return -1;
    }
    if (heif_image_has_channel(image, heif_channel_Alpha)) {
        planes->alpha = heif_image_get_plane_readonly(image, heif_channel_Alpha, &stride);
        planes->alpha_stride = stride;
        planes->alpha_bits = heif_image_get_bits_per_pixel_range(image, heif_channel_Alpha);
    }
    if (planes->y == NULL || (planes->layout != 0 && (planes->cb == NULL || planes->cr == NULL))) {
        snprintf(message, message_bytes, "libheif returned an image without its planes");
        return -1;
    }
    // The matrix and range of the decoded image (a thumbnail may differ from the primary).
    planes->matrix = 6;
    planes->full_range = 1;
    struct heif_color_profile_nclx *nclx = NULL;
    if (heif_image_get_nclx_color_profile(image, &nclx).code == heif_error_Ok && nclx != NULL) {
        planes->matrix = nclx->matrix_coefficients;
        planes->full_range = nclx->full_range_flag;
        heif_nclx_color_profile_free(nclx);
    }
    return 0;
}

void tessera_heif_release_image(tessera_heif *heif) {
    if (heif->image != NULL) { heif_image_release(heif->image); heif->image = NULL; }
}

void tessera_heif_close(tessera_heif *heif) {
    if (heif == NULL) return;
    tessera_heif_release_image(heif);
    if (heif->thumbnail != NULL) heif_image_handle_release(heif->thumbnail);
    if (heif->primary != NULL) heif_image_handle_release(heif->primary);
    if (heif->context != NULL) heif_context_free(heif->context);
    free(heif->icc);
    free(heif);
}
