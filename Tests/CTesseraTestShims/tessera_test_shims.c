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
