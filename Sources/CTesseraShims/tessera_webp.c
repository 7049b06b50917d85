// tessera_webp.c — WebP with libwebp: the file mapped read-only, decoded straight to the size
// asked for (libwebp scales while it decodes), as RGBA. The ICC profile and EXIF come from the
// RIFF chunks through libwebpdemux. An animation gives its first frame.
//
// A mapped file that is cut short while it is read (a photo being synced or rewritten during
// the render) raises SIGBUS at the first page past its new end, which killed the run (a
// helper's attack: 4 runs in 30). The mappings are registered, and a SIGBUS inside one has its
// page replaced by a page of zeros and is noted: libwebp then reads zeros, and the photo is
// reported as cut while it was read. A SIGBUS anywhere else goes to the handler that was there
// before (or kills the process, as it would have).
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <webp/decode.h>
#include <webp/demux.h>

#include "tessera_shims.h"

// MARK: Mappings that survive their file being cut

#define GUARDED_SLOTS 1024
#define SLOT_TAKEN ((uintptr_t)1)
static struct {
    _Atomic uintptr_t start;  // 0: free; SLOT_TAKEN: being filled in; else the mapping's first byte
    _Atomic uintptr_t end;
    _Atomic int cut;
} guarded[GUARDED_SLOTS];
static struct sigaction previous_sigbus;
static pthread_once_t sigbus_once = PTHREAD_ONCE_INIT;
static long page_bytes = 4096;

static void on_sigbus(int signal_number, siginfo_t *info, void *context) {
    uintptr_t at = (uintptr_t)info->si_addr;
    for (int i = 0; i < GUARDED_SLOTS; i++) {
        uintptr_t start = atomic_load(&guarded[i].start);
        if (start <= SLOT_TAKEN || at < start || at >= atomic_load(&guarded[i].end)) continue;
        void *page = (void *)(at & ~(uintptr_t)(page_bytes - 1));
        if (mmap(page, (size_t)page_bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
            atomic_store(&guarded[i].cut, 1);
            return;
        }
        break;
    }
    if ((previous_sigbus.sa_flags & SA_SIGINFO) && previous_sigbus.sa_sigaction != NULL) {
        previous_sigbus.sa_sigaction(signal_number, info, context);
    } else if (!(previous_sigbus.sa_flags & SA_SIGINFO) && previous_sigbus.sa_handler != SIG_DFL
               && previous_sigbus.sa_handler != SIG_IGN) {
        previous_sigbus.sa_handler(signal_number);
    } else {
        // The default action: the faulting access runs again and ends the process, as before.
        struct sigaction fallback;
        memset(&fallback, 0, sizeof fallback);
        fallback.sa_handler = SIG_DFL;
        sigaction(SIGBUS, &fallback, NULL);
    }
}

static void install_sigbus_handler(void) {
    long size = sysconf(_SC_PAGESIZE);
    if (size > 0) page_bytes = size;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &previous_sigbus);
}

/// Maps `bytes` of `fd` read-only in a registered slot (*slot), or NULL (no slot, or mmap failed).
static uint8_t *guarded_map(int fd, size_t bytes, int *slot) {
    pthread_once(&sigbus_once, install_sigbus_handler);
    for (int i = 0; i < GUARDED_SLOTS; i++) {
        uintptr_t free_slot = 0;
        if (!atomic_compare_exchange_strong(&guarded[i].start, &free_slot, SLOT_TAKEN)) continue;
        void *map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            atomic_store(&guarded[i].start, 0);
            return NULL;
        }
        atomic_store(&guarded[i].cut, 0);
        atomic_store(&guarded[i].end, (uintptr_t)map + bytes);
        atomic_store(&guarded[i].start, (uintptr_t)map);
        *slot = i;
        return map;
    }
    return NULL;
}

static int guarded_cut(int slot) { return atomic_load(&guarded[slot].cut); }

static void guarded_unmap(uint8_t *map, size_t bytes, int slot) {
    atomic_store(&guarded[slot].start, SLOT_TAKEN);
    madvise(map, bytes, MADV_DONTNEED);
    munmap(map, bytes);
    atomic_store(&guarded[slot].end, 0);
    atomic_store(&guarded[slot].start, 0);
}

#define TESSERA_WEBP_CHUNKS 100000

static const char cut_message[] = "the file was cut short while it was read (changed during the render)";

int tessera_exif_orientation(const uint8_t *app1, size_t length);
int tessera_exif_read(const uint8_t *app1, size_t length, int64_t *date_taken);

struct tessera_webp {
    uint8_t *map;
    size_t map_bytes;
    int slot;
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

/// The lossless stream of `fragment` (the frame's chunks: ALPH then VP8, or VP8L) measured:
/// what libwebp will allocate for it, 0 when there is none. -1 with `message` when libwebp
/// would refuse it.
static int measure_lossless(const uint8_t *fragment, size_t size, uint32_t width, uint32_t height, uint64_t cap,
                            tessera_webp_info *info, char *message, size_t message_bytes) {
    size_t at = 0;
    while (at <= size && size - at >= 8) {  // (a padding byte past a clamped length can take `at` past `size`)
        const uint8_t *chunk = fragment + at;
        uint64_t length = (uint64_t)chunk[4] | (uint64_t)chunk[5] << 8 | (uint64_t)chunk[6] << 16 | (uint64_t)chunk[7] << 24;
        if (length > size - at - 8) length = size - at - 8;
        const uint8_t *payload = chunk + 8;
        int lossless = memcmp(chunk, "VP8L", 4) == 0, alpha = memcmp(chunk, "ALPH", 4) == 0;
        if ((lossless && length >= 5) || (alpha && length >= 1 && (payload[0] & 3) == 1)) {
            tessera_vp8l_cost cost;
            size_t skip = lossless ? 5 : 1;
            if (tessera_vp8l_measure(payload + skip, (size_t)length - skip, width, height, alpha, cap, &cost, message,
                                     message_bytes) != 0) return -1;
            // A lossy picture's alpha is decoded into a plane of its own, a byte a pixel.
            info->lossless_bytes = cost.bytes + (alpha ? (uint64_t)width * height : 0);
            info->groups = cost.groups;
            info->at_least = cost.at_least;
            return 0;
        }
        if (memcmp(chunk, "VP8 ", 4) == 0) return 0;
        at += 8 + (size_t)length + (length & 1);
    }
    return 0;
}

tessera_webp *tessera_webp_open(int fd, uint64_t file_bytes, uint64_t cap, tessera_webp_info *info, char *message,
                                size_t message_bytes) {
    if (file_bytes < 12 || file_bytes > (1ull << 32)) {
        snprintf(message, message_bytes, "a WebP of %llu bytes is not a picture", (unsigned long long)file_bytes);
        return NULL;
    }
    struct tessera_webp *webp = calloc(1, sizeof *webp);
    if (webp == NULL) { snprintf(message, message_bytes, "out of memory"); return NULL; }
    webp->map_bytes = (size_t)file_bytes;
    uint8_t *map = guarded_map(fd, webp->map_bytes, &webp->slot);
    if (map == NULL) {
        free(webp);
        snprintf(message, message_bytes, "mmap failed");
        return NULL;
    }
    webp->map = map;
    madvise(map, webp->map_bytes, MADV_SEQUENTIAL);
    // libwebpdemux keeps a record of about 24 bytes for every chunk, outside any budget: a 16 MB
    // file of 2,000,000 empty chunks took 48 MB to open (a helper's finding). An animation's
    // frame is one chunk here; no picture has more than a few thousand.
    uint64_t chunks = 0;
    for (size_t at = 12; at + 8 <= webp->map_bytes && chunks <= TESSERA_WEBP_CHUNKS; chunks++) {
        uint64_t length = (uint64_t)map[at + 4] | (uint64_t)map[at + 5] << 8 | (uint64_t)map[at + 6] << 16 | (uint64_t)map[at + 7] << 24;
        if (length > webp->map_bytes - at - 8) break;
        at += 8 + (size_t)length + (length & 1);
    }
    if (chunks > TESSERA_WEBP_CHUNKS || guarded_cut(webp->slot)) {
        if (guarded_cut(webp->slot)) snprintf(message, message_bytes, "%s", cut_message);
        else snprintf(message, message_bytes, "its RIFF holds more than %d chunks, which libwebp would list in memory",
                      TESSERA_WEBP_CHUNKS);
        tessera_webp_close(webp);
        return NULL;
    }
    WebPData data = { webp->map, webp->map_bytes };
    webp->demux = WebPDemux(&data);
    if (webp->demux == NULL || guarded_cut(webp->slot)) {
        snprintf(message, message_bytes, "%s", webp->demux == NULL ? "corrupt or truncated WebP container" : cut_message);
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
    char lossless_message[120];
    if (measure_lossless(webp->frame.fragment.bytes, webp->frame.fragment.size, (uint32_t)features.width,
                         (uint32_t)features.height, cap, info, lossless_message, sizeof lossless_message) != 0
        || guarded_cut(webp->slot)) {
        if (guarded_cut(webp->slot)) snprintf(message, message_bytes, "%s", cut_message);
        else snprintf(message, message_bytes, "%s stream: %s", info->lossless ? "lossless" : "alpha", lossless_message);
        tessera_webp_close(webp);
        return NULL;
    }
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
    if (guarded_cut(webp->slot)) {
        snprintf(message, message_bytes, "%s", cut_message);
        tessera_webp_close(webp);
        return NULL;
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
    if (guarded_cut(webp->slot)) {
        snprintf(message, message_bytes, "%s", cut_message);
        return -1;
    }
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
    if (webp->map != NULL) guarded_unmap(webp->map, webp->map_bytes, webp->slot);
    free(webp);
}
