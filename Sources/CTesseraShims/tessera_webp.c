// tessera_webp.c — WebP with libwebp: the file mapped read-only, decoded straight to the size
// asked for (libwebp scales while it decodes), as RGBA. The ICC profile and EXIF come from the
// RIFF chunks through libwebpdemux. An animation gives its first frame.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <webp/decode.h>
#include <webp/demux.h>

#include "tessera_shims.h"

int tessera_exif_orientation(const uint8_t *app1, size_t length);
int tessera_exif_read(const uint8_t *app1, size_t length, int64_t *date_taken);

struct tessera_webp {
    uint8_t *map;
    size_t map_bytes;
    WebPDemuxer *demux;
    WebPIterator frame;
    int has_frame;
    WebPChunkIterator icc;
    int has_icc;
};

static const char *status_text(VP8StatusCode status) {
    switch (status) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "corrupt WebP data";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "a WebP feature libwebp does not support";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "cancelled";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "the file ends early (truncated WebP)";
    default: return "unknown WebP error";
    }
}

tessera_webp *tessera_webp_open(int fd, uint64_t file_bytes, tessera_webp_info *info, char *message, size_t message_bytes) {
    if (file_bytes < 12 || file_bytes > (1ull << 32)) {
        snprintf(message, message_bytes, "a WebP of %llu bytes is not a picture", (unsigned long long)file_bytes);
        return NULL;
    }
    struct tessera_webp *webp = calloc(1, sizeof *webp);
    if (webp == NULL) { snprintf(message, message_bytes, "out of memory"); return NULL; }
    webp->map_bytes = (size_t)file_bytes;
    void *map = mmap(NULL, webp->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        free(webp);
        snprintf(message, message_bytes, "mmap failed");
        return NULL;
    }
    webp->map = map;
    madvise(map, webp->map_bytes, MADV_SEQUENTIAL);
    WebPData data = { webp->map, webp->map_bytes };
    webp->demux = WebPDemux(&data);
    if (webp->demux == NULL) {
        snprintf(message, message_bytes, "corrupt or truncated WebP container");
        tessera_webp_close(webp);
        return NULL;
    }
    if (!WebPDemuxGetFrame(webp->demux, 1, &webp->frame)) {
        snprintf(message, message_bytes, "a WebP with no picture");
        tessera_webp_close(webp);
        return NULL;
    }
    webp->has_frame = 1;
    WebPBitstreamFeatures features;
    VP8StatusCode status = WebPGetFeatures(webp->frame.fragment.bytes, webp->frame.fragment.size, &features);
    if (status != VP8_STATUS_OK) {
        snprintf(message, message_bytes, "%s", status_text(status));
        tessera_webp_close(webp);
        return NULL;
    }
    memset(info, 0, sizeof *info);
    info->width = (uint32_t)features.width;
    info->height = (uint32_t)features.height;
    info->has_alpha = features.has_alpha;
    info->lossless = features.format == 2;
    info->animated = WebPDemuxGetI(webp->demux, WEBP_FF_FRAME_COUNT) > 1;
    if (WebPDemuxGetChunk(webp->demux, "ICCP", 1, &webp->icc)) webp->has_icc = 1;
    WebPChunkIterator exif;
    if (WebPDemuxGetChunk(webp->demux, "EXIF", 1, &exif)) {
        const uint8_t *bytes = exif.chunk.bytes;
        size_t length = exif.chunk.size;
        if (length >= 6 && memcmp(bytes, "Exif\0\0", 6) == 0) {
            info->exif_orientation = tessera_exif_read(bytes, length, &info->date_taken);
        } else if (length > 0 && length < (1u << 20)) {
            uint8_t *app1 = malloc(length + 6);
            if (app1 != NULL) {
                memcpy(app1, "Exif\0\0", 6);
                memcpy(app1 + 6, bytes, length);
                info->exif_orientation = tessera_exif_read(app1, length + 6, &info->date_taken);
                free(app1);
            }
        }
        WebPDemuxReleaseChunkIterator(&exif);
    }
    return webp;
}

const uint8_t *tessera_webp_icc(tessera_webp *webp, size_t *length) {
    if (!webp->has_icc) { *length = 0; return NULL; }
    *length = webp->icc.chunk.size;
    return webp->icc.chunk.bytes;
}

int tessera_webp_decode(tessera_webp *webp, int width, int height, uint8_t *rgba, size_t stride, char *message,
                        size_t message_bytes) {
    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config)) { snprintf(message, message_bytes, "libwebp version mismatch"); return -1; }
    if (width != (int)webp->frame.width || height != (int)webp->frame.height) {
        config.options.use_scaling = 1;
        config.options.scaled_width = width;
        config.options.scaled_height = height;
    }
    config.output.colorspace = MODE_RGBA;
    config.output.is_external_memory = 1;
    config.output.u.RGBA.rgba = rgba;
    config.output.u.RGBA.stride = (int)stride;
    config.output.u.RGBA.size = stride * (size_t)height;
    VP8StatusCode status = WebPDecode(webp->frame.fragment.bytes, webp->frame.fragment.size, &config);
    WebPFreeDecBuffer(&config.output);
    if (status != VP8_STATUS_OK) {
        snprintf(message, message_bytes, "%s", status_text(status));
        return -1;
    }
    return 0;
}

void tessera_webp_close(tessera_webp *webp) {
    if (webp == NULL) return;
    if (webp->has_icc) WebPDemuxReleaseChunkIterator(&webp->icc);
    if (webp->has_frame) WebPDemuxReleaseIterator(&webp->frame);
    if (webp->demux != NULL) WebPDemuxDelete(webp->demux);
    if (webp->map != NULL) {
        madvise(webp->map, webp->map_bytes, MADV_DONTNEED);
        munmap(webp->map, webp->map_bytes);
    }
    free(webp);
}
