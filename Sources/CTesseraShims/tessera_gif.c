// tessera_gif.c — the first frame of a GIF with giflib, read from a file descriptor with pread.
//
// giflib's DGifGetLine decodes a frame row by row, so a non-interlaced frame streams: one row
// of palette indices at a time. An interlaced frame's rows come in four passes (every 8th row,
// then the 4th, ...), so it is read whole first, one byte a pixel, which the caller counted
// against its memory budget. Only the first frame is read; extensions before it are walked for
// the graphics control block (the transparent index) and skipped otherwise.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <gif_lib.h>

#include "tessera_gif.h"

struct tessera_gif {
    GifFileType *file;
    int fd;
    uint64_t offset;
    uint64_t file_bytes;
    tessera_gif_info info;
    GifColorType colors[256];
    int color_count;
    uint8_t *frame;        // an interlaced frame, whole
    uint8_t *line;         // one frame row of indices
    uint32_t next_row;     // the next canvas row
    int failed;            // the image data ended or was corrupt: transparent from there on
    char problem[200];
    char message[200];
    uint8_t ahead[64 << 10];  // read-ahead: the bytes from ahead_at
    uint64_t ahead_at;
    size_t ahead_length;
};

/// giflib reads a byte or a sub-block at a time: served from a 64 KiB read-ahead, not a pread
/// each (a 10 MB comment of one-byte sub-blocks was 4 million preads and 14-26 s: a helper's
/// finding).
static int read_fn(GifFileType *file, GifByteType *buffer, int length) {
    struct tessera_gif *gif = file->UserData;
    int done = 0;
    while (done < length) {
        if (gif->offset >= gif->ahead_at && gif->offset < gif->ahead_at + gif->ahead_length) {
            size_t from = (size_t)(gif->offset - gif->ahead_at), count = gif->ahead_length - from;
            if (count > (size_t)(length - done)) count = (size_t)(length - done);
            memcpy(buffer + done, gif->ahead + from, count);
            gif->offset += count;
            done += (int)count;
            continue;
        }
        ssize_t n = pread(gif->fd, gif->ahead, sizeof gif->ahead, (off_t)gif->offset);
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (n == 0) break;
        gif->ahead_at = gif->offset;
        gif->ahead_length = (size_t)n;
    }
    return done;
}

static void say(char *out, size_t capacity, const char *what, int error) {
    const char *reason = GifErrorString(error);
    snprintf(out, capacity, "%s%s%s", what, reason ? ": " : "", reason ? reason : "");
}

/// Walks the blocks before the first frame: extensions (the graphics control block's
/// transparent index is kept) until the image descriptor.
static int read_to_first_frame(struct tessera_gif *gif) {
    int transparent = -1;
    for (int blocks = 0; blocks < 100000; blocks++) {
        GifRecordType type;
        if (DGifGetRecordType(gif->file, &type) == GIF_ERROR) {
            say(gif->message, sizeof gif->message, "reading the blocks before the first frame", gif->file->Error);
            return -1;
        }
        if (type == IMAGE_DESC_RECORD_TYPE) {
            if (DGifGetImageDesc(gif->file) == GIF_ERROR) {
                say(gif->message, sizeof gif->message, "reading the first frame's descriptor", gif->file->Error);
                return -1;
            }
            gif->info.transparent_index = transparent;
            return 0;
        }
        if (type == TERMINATE_RECORD_TYPE) {
            snprintf(gif->message, sizeof gif->message, "the GIF ends before its first frame");
            return -1;
        }
        if (type != EXTENSION_RECORD_TYPE) continue;
        int code = 0;
        GifByteType *data = NULL;
        if (DGifGetExtension(gif->file, &code, &data) == GIF_ERROR) {
            say(gif->message, sizeof gif->message, "reading an extension", gif->file->Error);
            return -1;
        }
        if (code == GRAPHICS_EXT_FUNC_CODE && data != NULL && data[0] >= 4) {
            GraphicsControlBlock gcb;
            if (DGifExtensionToGCB(data[0], data + 1, &gcb) == GIF_OK) transparent = gcb.TransparentColor;
        }
        int sub_blocks = 0;
        while (data != NULL) {
            if (DGifGetExtensionNext(gif->file, &data) == GIF_ERROR) {
                say(gif->message, sizeof gif->message, "reading an extension", gif->file->Error);
                return -1;
            }
            // 255 bytes a sub-block: a file of N bytes has fewer than N of them.
            if (++sub_blocks > 1 << 24) {
                snprintf(gif->message, sizeof gif->message, "an extension of more than 16 million blocks");
                return -1;
            }
        }
    }
    snprintf(gif->message, sizeof gif->message, "more than 100,000 blocks before the first frame");
    return -1;
}

tessera_gif *tessera_gif_open(int fd, uint64_t file_bytes, tessera_gif_info *info, char *message, size_t message_bytes) {
    struct tessera_gif *gif = calloc(1, sizeof *gif);
    if (gif == NULL) {
        snprintf(message, message_bytes, "out of memory");
        return NULL;
    }
    gif->fd = fd;
    gif->file_bytes = file_bytes;
    int error = 0;
    gif->file = DGifOpen(gif, read_fn, &error);
    if (gif->file == NULL) {
        say(message, message_bytes, "not a GIF giflib reads", error);
        free(gif);
        return NULL;
    }
    if (read_to_first_frame(gif) != 0) {
        snprintf(message, message_bytes, "%s", gif->message);
        tessera_gif_close(gif);
        return NULL;
    }
    GifImageDesc *image = &gif->file->Image;
    if (image->Width <= 0 || image->Height <= 0 || image->Left < 0 || image->Top < 0) {
        snprintf(message, message_bytes, "its first frame is %d x %d px", image->Width, image->Height);
        tessera_gif_close(gif);
        return NULL;
    }
    ColorMapObject *map = image->ColorMap != NULL ? image->ColorMap : gif->file->SColorMap;
    if (map != NULL && map->Colors != NULL) {
        gif->color_count = map->ColorCount > 256 ? 256 : map->ColorCount;
        memcpy(gif->colors, map->Colors, (size_t)gif->color_count * sizeof(GifColorType));
    } else {
        // No palette at all: a grey ramp, as browsers draw such files.
        gif->color_count = 256;
        for (int i = 0; i < 256; i++) gif->colors[i] = (GifColorType){(GifByteType)i, (GifByteType)i, (GifByteType)i};
    }
    tessera_gif_info *out = &gif->info;
    out->frame_left = (uint32_t)image->Left;
    out->frame_top = (uint32_t)image->Top;
    out->frame_width = (uint32_t)image->Width;
    out->frame_height = (uint32_t)image->Height;
    // A frame past the logical screen grows the canvas (browsers draw such a frame whole).
    uint32_t right = out->frame_left + out->frame_width, bottom = out->frame_top + out->frame_height;
    out->width = (uint32_t)gif->file->SWidth > right ? (uint32_t)gif->file->SWidth : right;
    out->height = (uint32_t)gif->file->SHeight > bottom ? (uint32_t)gif->file->SHeight : bottom;
    out->interlaced = image->Interlace ? 1 : 0;
    if (out->transparent_index >= gif->color_count) out->transparent_index = -1;
    out->has_alpha = out->transparent_index >= 0 || out->frame_left > 0 || out->frame_top > 0
        || right < out->width || bottom < out->height;
    out->frames_seen = 1;
    *info = *out;
    return gif;
}

static void fail(struct tessera_gif *gif, uint32_t frame_row) {
    if (gif->failed) return;
    gif->failed = 1;
    char what[80];
    snprintf(what, sizeof what, "the first frame's data ends after %u of its %u rows", frame_row, gif->info.frame_height);
    say(gif->problem, sizeof gif->problem, what, gif->file->Error);
}

int tessera_gif_start(tessera_gif *gif) {
    tessera_gif_info *info = &gif->info;
    gif->line = malloc(info->frame_width);
    if (gif->line == NULL) {
        snprintf(gif->message, sizeof gif->message, "out of memory for a row of %u px", info->frame_width);
        return -1;
    }
    if (!info->interlaced) return 0;
    size_t bytes = (size_t)info->frame_width * info->frame_height;
    gif->frame = calloc(bytes, 1);
    if (gif->frame == NULL) {
        snprintf(gif->message, sizeof gif->message, "out of memory for an interlaced frame of %u x %u px",
                 info->frame_width, info->frame_height);
        return -1;
    }
    // Rows left unread (data that ends early) are the transparent index, or index 0.
    if (info->transparent_index >= 0) memset(gif->frame, info->transparent_index, bytes);
    static const uint32_t starts[4] = {0, 4, 2, 1}, steps[4] = {8, 8, 4, 2};
    uint32_t rows = 0;
    for (int pass = 0; pass < 4 && !gif->failed; pass++) {
        for (uint32_t y = starts[pass]; y < info->frame_height; y += steps[pass]) {
            if (DGifGetLine(gif->file, gif->frame + (size_t)y * info->frame_width, (int)info->frame_width) == GIF_ERROR) {
                fail(gif, rows);
                break;
            }
            rows++;
        }
    }
    return 0;
}

int tessera_gif_read_row(tessera_gif *gif, uint8_t *rgba) {
    tessera_gif_info *info = &gif->info;
    if (gif->next_row >= info->height) return 0;
    uint32_t y = gif->next_row++;
    memset(rgba, 0, (size_t)info->width * 4);
    if (y < info->frame_top || y >= info->frame_top + info->frame_height) return 1;
    uint32_t frame_row = y - info->frame_top;
    const uint8_t *indices;
    if (info->interlaced) {
        indices = gif->frame + (size_t)frame_row * info->frame_width;
    } else {
        if (gif->failed) return 1;
        if (DGifGetLine(gif->file, gif->line, (int)info->frame_width) == GIF_ERROR) {
            fail(gif, frame_row);
            return 1;
        }
        indices = gif->line;
    }
    uint8_t *out = rgba + (size_t)info->frame_left * 4;
    for (uint32_t x = 0; x < info->frame_width; x++) {
        int index = indices[x];
        // Indices past the palette are black, as giflib's own tools draw them.
        if (index == info->transparent_index) continue;
        if (index < gif->color_count) {
            out[x * 4] = gif->colors[index].Red;
            out[x * 4 + 1] = gif->colors[index].Green;
            out[x * 4 + 2] = gif->colors[index].Blue;
        }
        out[x * 4 + 3] = 255;
    }
    return 1;
}

const char *tessera_gif_problem(const tessera_gif *gif) { return gif->failed ? gif->problem : NULL; }

const char *tessera_gif_message(const tessera_gif *gif) { return gif->message; }

void tessera_gif_close(tessera_gif *gif) {
    if (gif == NULL) return;
    if (gif->file != NULL) {
        int error = 0;
        DGifCloseFile(gif->file, &error);
    }
    free(gif->frame);
    free(gif->line);
    free(gif);
}
