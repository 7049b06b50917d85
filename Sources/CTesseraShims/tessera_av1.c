// tessera_av1.c — AV1 pictures (AVIF) decoded by dav1d on one thread, as a libheif decoder plugin.
//
// libheif 1.15's own dav1d plugin opens dav1d with its defaults: a thread per core and a frame
// delay of the square root of that, so each decode holds that many frames' buffers (the
// coefficients alone 2 bytes a sample each) whatever budget admitted it: a 2048 x 2048 4:4:4
// AVIF with alpha held 62 MiB where one thread holds 27, and a folder of them was OOM-killed in
// a 64 MiB container at --max-memory 64M (a helper's finding, measured with a malloc tracer).
// A render already decodes a photo per worker; one thread a decode and one frame in flight
// makes a decode's memory the same on every machine. Registered above libheif's plugins
// (priority 200 against dav1d's 150 and libaom's 100) once, before the first HEIF is opened.
//
// What the plugin hands libheif is what libheif's does: the picture's planes at their bit
// depth (16-bit samples above 8), and the colour description of the sequence header (libheif
// puts the item's own colr box over it when there is one).
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <dav1d/dav1d.h>
#include <libheif/heif.h>
#include <libheif/heif_plugin.h>

#include "tessera_shims.h"

typedef struct {
    uint8_t *data;
    size_t size;
    size_t capacity;
} av1_decoder;

static struct heif_error av1_error(enum heif_error_code code, const char *message) {
    struct heif_error error = { code, heif_suberror_Unspecified, message };
    return error;
}

static const struct heif_error av1_ok = { heif_error_Ok, heif_suberror_Unspecified, "" };

static const char *av1_name(void) { return "dav1d on one thread (tessera)"; }

static void av1_init(void) {}

static void av1_deinit(void) {}

static int av1_supports(enum heif_compression_format format) { return format == heif_compression_AV1 ? 200 : 0; }

static struct heif_error av1_new(void **decoder) {
    *decoder = calloc(1, sizeof(av1_decoder));
    return *decoder == NULL ? av1_error(heif_error_Memory_allocation_error, "out of memory") : av1_ok;
}

static void av1_free(void *decoder) {
    av1_decoder *d = decoder;
    if (d == NULL) return;
    free(d->data);
    free(d);
}

static struct heif_error av1_push(void *decoder, const void *data, size_t size) {
    av1_decoder *d = decoder;
    if (size > SIZE_MAX - d->size) return av1_error(heif_error_Memory_allocation_error, "out of memory");
    if (d->size + size > d->capacity) {
        size_t capacity = d->capacity ? d->capacity : 4096;
        while (capacity < d->size + size) capacity = capacity > SIZE_MAX / 2 ? d->size + size : capacity * 2;
        uint8_t *grown = realloc(d->data, capacity);
        if (grown == NULL) return av1_error(heif_error_Memory_allocation_error, "out of memory");
        d->data = grown;
        d->capacity = capacity;
    }
    memcpy(d->data + d->size, data, size);
    d->size += size;
    return av1_ok;
}

static void av1_keep(const uint8_t *buffer, void *cookie) { (void)buffer; (void)cookie; }

/// The first picture of the pushed data, decoded on one thread with one frame in flight.
static int av1_picture(av1_decoder *d, Dav1dPicture *picture) {
    Dav1dSettings settings;
    dav1d_default_settings(&settings);
    settings.n_threads = 1;
    settings.max_frame_delay = 1;
    settings.all_layers = 0;
    // dav1d's own lines on standard error ("Error parsing OBU data") would break --progress
    // json's one object a line: a damaged picture is named by the warning its failure makes.
    settings.logger.callback = NULL;
    Dav1dContext *context = NULL;
    if (dav1d_open(&context, &settings) != 0) return DAV1D_ERR(ENOMEM);
    Dav1dData data;
    memset(&data, 0, sizeof data);
    int result = dav1d_data_wrap(&data, d->data, d->size, av1_keep, NULL);
    if (result == 0) {
        result = DAV1D_ERR(EAGAIN);
        while (result == DAV1D_ERR(EAGAIN)) {
            size_t before = data.sz;
            if (data.sz > 0) {
                int sent = dav1d_send_data(context, &data);
                if (sent < 0 && sent != DAV1D_ERR(EAGAIN)) { result = sent; break; }
            }
            result = dav1d_get_picture(context, picture);
            // All data sent and still no picture, or none taken and none given: none will come.
            if (result == DAV1D_ERR(EAGAIN) && (data.sz == 0 || data.sz == before)) { result = DAV1D_ERR(EINVAL); break; }
        }
        if (data.sz > 0) dav1d_data_unref(&data);
    }
    dav1d_close(&context);
    return result;
}

static struct heif_error av1_decode(void *decoder, struct heif_image **out) {
    av1_decoder *d = decoder;
    *out = NULL;
    Dav1dPicture picture;
    memset(&picture, 0, sizeof picture);
    if (av1_picture(d, &picture) < 0) return av1_error(heif_error_Decoder_plugin_error, "dav1d could not decode the AV1 picture");
    enum heif_colorspace colorspace = heif_colorspace_YCbCr;
    enum heif_chroma chroma;
    switch (picture.p.layout) {
    case DAV1D_PIXEL_LAYOUT_I400: colorspace = heif_colorspace_monochrome; chroma = heif_chroma_monochrome; break;
    case DAV1D_PIXEL_LAYOUT_I420: chroma = heif_chroma_420; break;
    case DAV1D_PIXEL_LAYOUT_I422: chroma = heif_chroma_422; break;
    default: chroma = heif_chroma_444; break;
    }
    int width = picture.p.w, height = picture.p.h, depth = picture.p.bpc;
    struct heif_image *image = NULL;
    struct heif_error error = heif_image_create(width, height, colorspace, chroma, &image);
    int planes = colorspace == heif_colorspace_monochrome ? 1 : 3;
    int across = picture.p.layout == DAV1D_PIXEL_LAYOUT_I444 ? 0 : 1;
    int down = picture.p.layout == DAV1D_PIXEL_LAYOUT_I420 ? 1 : 0;
    static const enum heif_channel channels[3] = { heif_channel_Y, heif_channel_Cb, heif_channel_Cr };
    for (int p = 0; p < planes && error.code == heif_error_Ok; p++) {
        int plane_width = p == 0 ? width : (width + across) >> across, plane_height = p == 0 ? height : (height + down) >> down;
        error = heif_image_add_plane(image, channels[p], plane_width, plane_height, depth);
        if (error.code != heif_error_Ok) break;
        int stride = 0;
        uint8_t *to = heif_image_get_plane(image, channels[p], &stride);
        const uint8_t *from = picture.data[p];
        ptrdiff_t from_stride = picture.stride[p == 0 ? 0 : 1];
        size_t row_bytes = (size_t)plane_width * (depth > 8 ? 2 : 1);
        for (int y = 0; y < plane_height; y++) memcpy(to + (size_t)y * (size_t)stride, from + y * from_stride, row_bytes);
    }
    if (error.code == heif_error_Ok && picture.seq_hdr != NULL) {
        struct heif_color_profile_nclx *nclx = heif_nclx_color_profile_alloc();
        if (nclx != NULL) {
            nclx->color_primaries = (enum heif_color_primaries)picture.seq_hdr->pri;
            nclx->transfer_characteristics = (enum heif_transfer_characteristics)picture.seq_hdr->trc;
            nclx->matrix_coefficients = (enum heif_matrix_coefficients)picture.seq_hdr->mtrx;
            nclx->full_range_flag = (uint8_t)picture.seq_hdr->color_range;
            heif_image_set_nclx_color_profile(image, nclx);
            heif_nclx_color_profile_free(nclx);
        }
    }
    dav1d_picture_unref(&picture);
    if (error.code != heif_error_Ok) {
        if (image != NULL) heif_image_release(image);
        return error;
    }
    *out = image;
    return av1_ok;
}

static void av1_strict(void *decoder, int flag) { (void)decoder; (void)flag; }

static const struct heif_decoder_plugin av1_plugin = {
    .plugin_api_version = 3,
    .get_plugin_name = av1_name,
    .init_plugin = av1_init,
    .deinit_plugin = av1_deinit,
    .does_support_format = av1_supports,
    .new_decoder = av1_new,
    .free_decoder = av1_free,
    .push_data = av1_push,
    .decode_image = av1_decode,
    .set_strict_decoding = av1_strict,
    .id_name = "tessera-dav1d",
};

static pthread_once_t registered = PTHREAD_ONCE_INIT;

static void register_plugin(void) { heif_register_decoder_plugin(&av1_plugin); }

void tessera_av1_register(void) { pthread_once(&registered, register_plugin); }
