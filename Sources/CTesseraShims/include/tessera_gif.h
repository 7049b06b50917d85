// tessera_gif.h — the first frame of a GIF with giflib (tessera_gif.c), row by row.
#ifndef TESSERA_GIF_H
#define TESSERA_GIF_H

#include <stddef.h>
#include <stdint.h>

typedef struct tessera_gif tessera_gif;

/// What the GIF's header and the blocks up to its first frame say.
typedef struct {
    uint32_t width;           // the canvas: the logical screen, grown to hold the first frame
    uint32_t height;
    uint32_t frame_left;      // the first frame's place on the canvas
    uint32_t frame_top;
    uint32_t frame_width;
    uint32_t frame_height;
    int32_t interlaced;       // 1: its rows come in four passes (the frame is read whole)
    int32_t transparent_index; // -1: none
    int32_t has_alpha;        // a transparent index, or a frame that leaves part of the canvas empty
    int32_t frames_seen;      // 1 (only the first frame is read)
} tessera_gif_info;

/// Opens the GIF on `fd` (read with pread, from byte 0) and reads up to its first frame's
/// descriptor. NULL with the reason in `message` when it is not a GIF giflib reads.
tessera_gif *tessera_gif_open(int fd, uint64_t file_bytes, tessera_gif_info *info, char *message, size_t message_bytes);

/// Starts the frame: an interlaced frame is read whole here (frame_width x frame_height bytes
/// of palette indices, allocated here). 0, or -1 with the reason in tessera_gif_message.
int tessera_gif_start(tessera_gif *gif);

/// The next canvas row as RGBA8 (`width` * 4 bytes): pixels outside the frame and the
/// transparent index have alpha 0. 1 for a row, 0 after the last. Data that ends early or is
/// corrupt gives transparent rows from there on, and tessera_gif_problem says so.
int tessera_gif_read_row(tessera_gif *gif, uint8_t *rgba);

/// What was wrong with the image data (NULL: nothing): rows drawn transparent from there on.
const char *tessera_gif_problem(const tessera_gif *gif);
const char *tessera_gif_message(const tessera_gif *gif);
void tessera_gif_close(tessera_gif *gif);

#endif
