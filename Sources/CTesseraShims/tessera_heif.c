// tessera_heif.c — HEIF/HEIC with libheif 1.15, read through pread on a file descriptor.
//
// libheif 1.15 decodes whole images only, so a decode is of the primary image (or of an
// embedded thumbnail, when the caller finds it large enough) in its own planes, or, for a grid
// (what phones write), of one tile at a time as a one-item HEIF made in memory (MARK: Tiles): no
// RGB copy of a 12-megapixel photo. libheif applies the item's irot/imir/clap transforms itself
// to a whole decode; for tiles they are read here and returned as an orientation. Whether the
// primary image has irot or imir is read here from the item properties (libheif 1.15 does not
// say), because a file without them may carry its rotation in EXIF instead.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libheif/heif.h>
#include <zlib.h>

#include "tessera_shims.h"
#include "tessera_private.h"

int tessera_exif_orientation(const uint8_t *app1, size_t length);
int tessera_exif_read(const uint8_t *app1, size_t length, int64_t *date_taken);

struct meta_boxes;
struct extent { uint64_t at, bytes; };

struct tessera_heif {
    int fd;
    int64_t position;
    int64_t file_bytes;
    int cut;  // a read found the file shorter than at open (read_bytes)
    // Bytes read ahead: libheif 1.15 reads some boxes a byte at a time (a 950 KB colr profile
    // took 1.9 million preads); small reads are served from here.
    uint8_t ahead[16384];
    int64_t ahead_start;
    size_t ahead_bytes;
    struct heif_context *context;
    struct heif_image_handle *primary;
    struct heif_image_handle *thumbnail;
    struct heif_image *image;
    uint8_t *icc;
    size_t icc_bytes;
    int is_grid;
    // The most bits a sample that any HEVC SPS or AV1 sequence header read says (coded_size):
    // what the decoder allocates by, whatever the container's hvcC, av1C or pixi claim.
    int coded_bits;
    // The tiled path (info.tiled): the 'meta' box kept for the tiles' boxes, the tiles' item
    // ids row by row, and the decoded tiles of one row (one slot a column).
    uint8_t *meta_data;
    struct meta_boxes *meta;
    uint32_t *tile_ids;
    uint32_t columns, rows, tile_width, tile_height, canvas_width, canvas_height, largest_tile;
    struct heif_image **row_images;
    // While libheif opens the file: 1. libheif 1.15 reads every item's data at open (to look
    // for metadata in it) and keeps only the metadata's: the coded pictures' extents (`skip`,
    // sorted) are given as zeros instead of read (MARK: Reader over pread).
    int opening;
    struct extent *skip;
    size_t skips;
    // Whether coded_size reads the parameter sets in an item's data too (at a decode, for the
    // items it decodes), or only its decoder configuration (at open: the scan reads no
    // picture data).
    int walk_data;
    // The bits a sample planned at open (the primary's and the thumbnail's), which the
    // parameter sets in the data a decode reads must not exceed.
    int planned_bits, planned_thumbnail_bits;
    uint32_t primary_id, thumbnail_id;
};

// MARK: Reader over pread

static const char cut_message[] = "the file was cut short while it was read (changed during the render)";

static int64_t get_position(void *user) { return ((struct tessera_heif *)user)->position; }

/// Whether [at, at + size) is exactly one of the coded extents libheif's open need not read.
static int skipped_extent(const struct tessera_heif *heif, uint64_t at, size_t size) {
    size_t low = 0, high = heif->skips;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (heif->skip[middle].at < at) low = middle + 1; else high = middle;
    }
    for (; low < heif->skips && heif->skip[low].at == at; low++) {
        if (heif->skip[low].bytes == size) return 1;
    }
    return 0;
}

// A read libheif asked for inside the file's size (as it was at open) that finds the file's
// end: the file was cut while it was read. libheif 1.15 asserts that such a read succeeds
// (box.cc, reading an item's data: SIGABRT, a helper's attack), so the rest is given as zeros
// and the cut noted; the open or decode reports it (tessera_heif's `cut`).
static int read_bytes(void *data, size_t size, void *user) {
    struct tessera_heif *heif = user;
    uint8_t *out = data;
    if (heif->opening && skipped_extent(heif, (uint64_t)heif->position, size)) {
        memset(out, 0, size);
        heif->position += (int64_t)size;
        return 0;
    }
    if (size < sizeof heif->ahead / 4) {
        if (heif->position < heif->ahead_start || heif->position + (int64_t)size > heif->ahead_start + (int64_t)heif->ahead_bytes) {
            ssize_t n = pread(heif->fd, heif->ahead, sizeof heif->ahead, (off_t)heif->position);
            heif->ahead_start = heif->position;
            heif->ahead_bytes = n > 0 ? (size_t)n : 0;
        }
        if (heif->position + (int64_t)size <= heif->ahead_start + (int64_t)heif->ahead_bytes) {
            memcpy(out, heif->ahead + (heif->position - heif->ahead_start), size);
            heif->position += (int64_t)size;
            return 0;
        }
    }
    while (size > 0) {
        ssize_t n = pread(heif->fd, out, size, (off_t)heif->position);
        if (n <= 0) {
            if (heif->position + (int64_t)size > heif->file_bytes) return -1;
            memset(out, 0, size);
            heif->position += (int64_t)size;
            heif->cut = 1;
            return 0;
        }
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

// MARK: What libheif will allocate, from the boxes
//
// libheif 1.15 sizes a decode from the coded data, not from 'ispe': a grid's canvas is the
// output size in its 'grid' item data, and a coded picture is as large as its SPS (HEVC) or
// sequence header (AV1) says. A hostile file's 'ispe' can claim 512 x 512 over a grid of
// 40 x 40 references to one tile (20480 x 20480 px), or 100 x 75 over a 4000 x 3000 picture.
// So the sizes are read here from the same boxes libheif reads, every read bounded by the
// 'meta' box (at most 16 MiB, in memory) or by a few KiB of pread, and compared with 'ispe'.

/// The 'meta' box's children that item sizes come from (offsets into `data`, 0 when absent).
struct meta_boxes {
    const uint8_t *data;
    size_t end;
    size_t iinf, iinf_size, iref, iref_size, ipco, ipco_size, ipma, ipma_size, iloc, iloc_size, idat, idat_size;
};

/// A big-endian number of `n` (0..8) bytes at `at`, if [at, at + n) is inside `end`.
static int read_n(const uint8_t *data, size_t end, size_t at, int n, uint64_t *value) {
    if (n < 0 || n > 8 || at > end || (size_t)n > end - at) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | data[at + i];
    *value = v;
    return 1;
}

/// The four-character item type of `id` from 'iinf' (infe version 2 or 3).
static int item_type(const struct meta_boxes *m, uint32_t id, char type[4]) {
    if (m->iinf_size < 6) return 0;
    const uint8_t *d = m->data;
    size_t q = m->iinf + (d[m->iinf] == 0 ? 6 : 8), end = m->iinf + m->iinf_size;
    while (q + 8 <= end) {
        uint32_t size = be32(d + q);
        if (size < 8 || size > end - q) return 0;
        if (memcmp(d + q + 4, "infe", 4) == 0 && size >= 20 && d[q + 8] >= 2) {
            int wide = d[q + 8] == 3;
            uint32_t item = wide ? be32(d + q + 12) : be16(d + q + 12);
            size_t at = q + 12 + (wide ? 4 : 2) + 2;
            if (item == id && at + 4 <= q + size) { memcpy(type, d + at, 4); return 1; }
        }
        q += size;
    }
    return 0;
}

/// The first property of `type` associated with item `id` (ipco/ipma): its payload.
static int item_property(const struct meta_boxes *m, uint32_t id, const char *type, size_t *payload, size_t *size) {
    if (m->ipma_size < 8) return 0;
    const uint8_t *d = m->data;
    int version = d[m->ipma], flags = d[m->ipma + 3];
    uint32_t entries = be32(d + m->ipma + 4);
    size_t q = m->ipma + 8, end = m->ipma + m->ipma_size;
    for (uint32_t e = 0; e < entries && q < end; e++) {
        uint64_t item = 0, count = 0;
        if (!read_n(d, end, q, version < 1 ? 2 : 4, &item)) return 0;
        q += version < 1 ? 2 : 4;
        if (!read_n(d, end, q, 1, &count)) return 0;
        q += 1;
        for (uint64_t a = 0; a < count; a++) {
            uint64_t raw = 0;
            int wide = flags & 1;
            if (!read_n(d, end, q, wide ? 2 : 1, &raw)) return 0;
            q += wide ? 2 : 1;
            uint64_t index = raw & (wide ? 0x7FFF : 0x7F);
            if (item != id || index == 0) continue;
            // The index-th box of ipco (1-based).
            size_t p = m->ipco, ipco_end = m->ipco + m->ipco_size;
            for (uint64_t i = 1; p + 8 <= ipco_end; i++) {
                uint32_t box = be32(d + p);
                if (box < 8 || box > ipco_end - p) break;
                if (i == index) {
                    if (memcmp(d + p + 4, type, 4) != 0) break;
                    *payload = p + 8;
                    *size = box - 8;
                    return 1;
                }
                p += box;
            }
        }
    }
    return 0;
}

/// A raw 'ispe' of item `id` (before irot and clap).
static int item_ispe(const struct meta_boxes *m, uint32_t id, uint32_t *width, uint32_t *height) {
    size_t at, size;
    if (!item_property(m, id, "ispe", &at, &size) || size < 12) return 0;
    *width = be32(m->data + at + 4);
    *height = be32(m->data + at + 8);
    return 1;
}

/// 'iloc' read as libheif 1.15 reads it: an offset, length or base offset field of a size other
/// than 4 or 8 is not read (taken as 0), and an extent's index only from version 2 (a file
/// parsed otherwise here could have its data located, checked and counted elsewhere than where
/// libheif reads it).
struct iloc_cursor {
    const struct meta_boxes *m;
    size_t q, end;
    int version, offset_size, length_size, base_size, index_size;
    uint64_t items, item;
    // The current item (iloc_next_item): its id, construction method, base offset, extents.
    uint32_t id;
    int method;
    uint64_t base, extents, extent;
};

static int iloc_next_extent(struct iloc_cursor *c, uint64_t *offset, uint64_t *length);

static int libheif_field(int size) { return size == 4 || size == 8 ? size : 0; }

static int iloc_open(const struct meta_boxes *m, struct iloc_cursor *c) {
    memset(c, 0, sizeof *c);
    c->m = m;
    const uint8_t *d = m->data;
    c->q = m->iloc;
    c->end = m->iloc + m->iloc_size;
    if (m->iloc_size < 8) return 0;
    c->version = d[c->q];
    c->offset_size = libheif_field(d[c->q + 4] >> 4);
    c->length_size = libheif_field(d[c->q + 4] & 15);
    c->base_size = libheif_field(d[c->q + 5] >> 4);
    c->index_size = c->version > 1 ? libheif_field(d[c->q + 5] & 15) : 0;
    c->q += 6;
    if (!read_n(d, c->end, c->q, c->version < 2 ? 2 : 4, &c->items)) return 0;
    c->q += c->version < 2 ? 2 : 4;
    return 1;
}

/// The next item's entry (its extents then read with iloc_next_extent, or skipped). 0 at the
/// end or where the box ends early.
static int iloc_next_item(struct iloc_cursor *c) {
    while (c->extent < c->extents) {  // extents not read
        uint64_t offset, length;
        if (!iloc_next_extent(c, &offset, &length)) return 0;
    }
    if (c->item == c->items) return 0;
    c->item++;
    const uint8_t *d = c->m->data;
    uint64_t id = 0, method = 0;
    if (!read_n(d, c->end, c->q, c->version < 2 ? 2 : 4, &id)) return 0;
    c->q += c->version < 2 ? 2 : 4;
    if (c->version == 1 || c->version == 2) {
        if (!read_n(d, c->end, c->q, 2, &method)) return 0;
        c->q += 2;
    }
    c->q += 2;  // data_reference_index
    if (!read_n(d, c->end, c->q, c->base_size, &c->base)) return 0;
    c->q += (size_t)c->base_size;
    if (!read_n(d, c->end, c->q, 2, &c->extents)) return 0;
    c->q += 2;
    c->id = (uint32_t)id;
    c->method = (int)(method & 15);
    c->extent = 0;
    return 1;
}

/// The current item's next extent: where it starts (the base offset added; in the file for
/// method 0, in 'idat' for method 1) and how long it is. 0 past its last or where the box ends.
static int iloc_next_extent(struct iloc_cursor *c, uint64_t *offset, uint64_t *length) {
    if (c->extent == c->extents) return 0;
    const uint8_t *d = c->m->data;
    uint64_t extent_offset = 0;
    c->q += (size_t)c->index_size;
    if (!read_n(d, c->end, c->q, c->offset_size, &extent_offset)) return 0;
    c->q += (size_t)c->offset_size;
    if (!read_n(d, c->end, c->q, c->length_size, length)) return 0;
    c->q += (size_t)c->length_size;
    c->extent++;
    *offset = c->base + extent_offset;
    return *offset >= c->base;  // a sum past 2^64 wraps to a small offset: refused rather than read
}

/// The extents of item `id` in 'iloc' (the first `capacity` of them; `*count` is how many there
/// are): where each starts, in the file (method 0) or in 'idat' (method 1, `*in_idat`), and how
/// long it is (0: to the end of the file). 1 when the item was found.
static int item_extents(const struct meta_boxes *m, uint32_t id, uint64_t *offsets, uint64_t *lengths, uint32_t capacity,
                        uint32_t *count, int *in_idat) {
    struct iloc_cursor c;
    if (!iloc_open(m, &c)) return 0;
    while (iloc_next_item(&c)) {
        if (c.id != id) continue;
        if (c.method > 1) return 0;
        for (uint32_t e = 0; e < capacity && e < c.extents; e++) {
            if (!iloc_next_extent(&c, &offsets[e], &lengths[e])) return 0;
        }
        *count = (uint32_t)c.extents;
        *in_idat = c.method == 1;
        return c.extents > 0;
    }
    return 0;
}

/// The first extent of item `id` (item_extents).
static int item_extent(const struct meta_boxes *m, uint32_t id, uint64_t *offset, uint64_t *length, int *in_idat) {
    uint32_t count = 0;
    return item_extents(m, id, offset, length, 1, &count, in_idat);
}

/// The first `count` (at most `capacity`) bytes of item `id`'s data; how many were read.
static size_t item_head(struct tessera_heif *heif, const struct meta_boxes *m, uint32_t id, uint8_t *out, size_t capacity) {
    uint64_t offset = 0, length = 0;
    int in_idat = 0;
    if (!item_extent(m, id, &offset, &length, &in_idat)) return 0;
    size_t want = capacity;
    if (length > 0 && length < want) want = (size_t)length;
    if (in_idat) {
        if (offset > m->idat_size) return 0;
        if (want > m->idat_size - offset) want = m->idat_size - (size_t)offset;
        memcpy(out, m->data + m->idat + offset, want);
        return want;
    }
    if ((int64_t)offset < 0 || (int64_t)offset >= heif->file_bytes) return 0;
    ssize_t n = pread(heif->fd, out, want, (off_t)offset);
    return n > 0 ? (size_t)n : 0;
}

/// The items `from` refers to with reference `type` (iref), up to `capacity` of them; how many
/// references there are in all.
static uint32_t item_references(const struct meta_boxes *m, uint32_t from, const char *type, uint32_t *to, uint32_t capacity) {
    if (m->iref_size < 4) return 0;
    const uint8_t *d = m->data;
    int wide = d[m->iref] != 0;
    size_t q = m->iref + 4, end = m->iref + m->iref_size;
    while (q + 8 <= end) {
        uint32_t size = be32(d + q);
        if (size < 8 || size > end - q) return 0;
        size_t r = q + 8, box_end = q + size;
        uint64_t source = 0, count = 0;
        if (memcmp(d + q + 4, type, 4) == 0 && read_n(d, box_end, r, wide ? 4 : 2, &source) &&
            read_n(d, box_end, r + (wide ? 4 : 2), 2, &count) && source == from) {
            r += (wide ? 4 : 2) + 2;
            uint32_t found = 0;
            for (uint64_t i = 0; i < count; i++) {
                uint64_t target = 0;
                if (!read_n(d, box_end, r, wide ? 4 : 2, &target)) break;
                r += wide ? 4 : 2;
                if (found < capacity) to[found] = (uint32_t)target;
                found++;
            }
            return found;
        }
        q += size;
    }
    return 0;
}

/// The items that refer to `to` with reference `type` (an alpha plane's 'auxl' to its image), up
/// to `capacity` of them; how many were found.
static uint32_t items_referring(const struct meta_boxes *m, uint32_t to, const char *type, uint32_t *from, uint32_t capacity) {
    if (m->iref_size < 4) return 0;
    const uint8_t *d = m->data;
    int wide = d[m->iref] != 0;
    uint32_t found = 0;
    size_t q = m->iref + 4, end = m->iref + m->iref_size;
    while (q + 8 <= end && found < capacity) {
        uint32_t size = be32(d + q);
        if (size < 8 || size > end - q) break;
        size_t r = q + 8, box_end = q + size;
        uint64_t source = 0, count = 0;
        if (memcmp(d + q + 4, type, 4) == 0 && read_n(d, box_end, r, wide ? 4 : 2, &source) &&
            read_n(d, box_end, r + (wide ? 4 : 2), 2, &count)) {
            r += (wide ? 4 : 2) + 2;
            for (uint64_t i = 0; i < count; i++) {
                uint64_t target = 0;
                if (!read_n(d, box_end, r, wide ? 4 : 2, &target)) break;
                r += wide ? 4 : 2;
                if (target == to) { from[found++] = (uint32_t)source; break; }
            }
        }
        q += size;
    }
    return found;
}

// MARK: Coded sizes: HEVC SPS, AV1 sequence header

/// Bits of an RBSP (emulation-prevention bytes already removed).
struct bits { const uint8_t *data; size_t count, at; int failed; };

static uint32_t read_bits(struct bits *b, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        if (b->at >= b->count * 8) { b->failed = 1; return 0; }
        v = v << 1 | ((b->data[b->at >> 3] >> (7 - (b->at & 7))) & 1);
        b->at++;
    }
    return v;
}

static uint32_t read_ue(struct bits *b) {
    int zeros = 0;
    while (read_bits(b, 1) == 0) { if (b->failed || ++zeros > 31) { b->failed = 1; return 0; } }
    return (uint32_t)(((uint64_t)1 << zeros) - 1 + read_bits(b, zeros));
}

/// An HEVC SPS NAL unit (with its 2-byte header): the coded picture's size as decoded, the
/// size after its conformance window, and its bits a luma sample (0 when not read). 1 when read.
static int hevc_sps_size(const uint8_t *nal, size_t length, uint32_t *coded_w, uint32_t *coded_h,
                         uint32_t *shown_w, uint32_t *shown_h, int *bits) {
    uint8_t rbsp[512];
    size_t count = 0;
    for (size_t i = 2, zeros = 0; i < length && count < sizeof rbsp; i++) {
        if (zeros >= 2 && nal[i] == 3) { zeros = 0; continue; }
        zeros = nal[i] == 0 ? zeros + 1 : 0;
        rbsp[count++] = nal[i];
    }
    struct bits b = { rbsp, count, 0, 0 };
    read_bits(&b, 4);                               // sps_video_parameter_set_id
    int sub_layers = (int)read_bits(&b, 3);         // sps_max_sub_layers_minus1
    read_bits(&b, 1);
    b.at += 88 + 8;                                 // general profile, level
    int profile_present[8] = { 0 }, level_present[8] = { 0 };
    for (int i = 0; i < sub_layers; i++) { profile_present[i] = (int)read_bits(&b, 1); level_present[i] = (int)read_bits(&b, 1); }
    if (sub_layers > 0) for (int i = sub_layers; i < 8; i++) read_bits(&b, 2);
    for (int i = 0; i < sub_layers; i++) b.at += (profile_present[i] ? 88 : 0) + (level_present[i] ? 8 : 0);
    read_ue(&b);                                    // sps_seq_parameter_set_id
    uint32_t chroma = read_ue(&b);
    if (chroma == 3) read_bits(&b, 1);
    uint32_t w = read_ue(&b), h = read_ue(&b);
    uint32_t left = 0, right = 0, top = 0, bottom = 0;
    if (read_bits(&b, 1)) { left = read_ue(&b); right = read_ue(&b); top = read_ue(&b); bottom = read_ue(&b); }
    if (b.failed || w == 0 || h == 0 || chroma > 3) return 0;
    uint32_t luma_bits = read_ue(&b) + 8;           // bit_depth_luma_minus8
    uint32_t chroma_bits = read_ue(&b) + 8;         // bit_depth_chroma_minus8: libde265 sizes each plane by its own
    uint32_t deeper = chroma_bits > luma_bits && chroma != 0 ? chroma_bits : luma_bits;
    *bits = b.failed || deeper > 16 ? 0 : (int)deeper;
    uint32_t unit_x = chroma == 1 || chroma == 2 ? 2 : 1, unit_y = chroma == 1 ? 2 : 1;
    uint64_t crop_x = ((uint64_t)left + right) * unit_x, crop_y = ((uint64_t)top + bottom) * unit_y;
    *coded_w = w;
    *coded_h = h;
    *shown_w = crop_x < w ? w - (uint32_t)crop_x : 0;
    *shown_h = crop_y < h ? h - (uint32_t)crop_y : 0;
    return 1;
}

/// The largest SPS picture in an hvcC payload (its parameter-set arrays).
static int hvcc_size(const uint8_t *p, size_t size, uint32_t *coded_w, uint32_t *coded_h, uint32_t *shown_w, uint32_t *shown_h,
                     int *length_bytes, int *bits) {
    if (size < 23) return 0;
    *length_bytes = (p[21] & 3) + 1;
    int arrays = p[22], found = 0;
    size_t q = 23;
    for (int a = 0; a < arrays; a++) {
        if (q + 3 > size) return found;
        int type = p[q] & 0x3F, nalus = be16(p + q + 1);
        q += 3;
        for (int n = 0; n < nalus; n++) {
            if (q + 2 > size) return found;
            size_t length = be16(p + q);
            q += 2;
            if (length > size - q) return found;
            uint32_t cw, ch, sw, sh;
            int sps_bits = 0;
            if (type == 33 && hevc_sps_size(p + q, length, &cw, &ch, &sw, &sh, &sps_bits)) {
                if (sps_bits > *bits) *bits = sps_bits;
                if (!found || (uint64_t)cw * ch > (uint64_t)*coded_w * *coded_h) {
                    *coded_w = cw; *coded_h = ch; *shown_w = sw; *shown_h = sh;
                    found = 1;
                }
            }
            q += length;
        }
    }
    return found;
}

/// An AV1 sequence header OBU's payload: max_frame_width and max_frame_height, what dav1d and
/// libaom size their frames from, and its bits a sample (0 when not read; AV1 5.5.1-5.5.2).
static int av1_sequence_size(const uint8_t *p, size_t size, uint32_t *w, uint32_t *h, int *bits) {
    struct bits b = { p, size, 0, 0 };
    int profile = (int)read_bits(&b, 3);            // seq_profile
    read_bits(&b, 1);                               // still_picture
    int reduced = (int)read_bits(&b, 1);
    if (reduced) {
        read_bits(&b, 5);
    } else {
        int decoder_model = 0, buffer_delay_bits = 0;
        if (read_bits(&b, 1)) {                     // timing_info_present_flag
            read_bits(&b, 32); read_bits(&b, 32);
            if (read_bits(&b, 1)) {                 // equal_picture_interval: uvlc
                int zeros = 0;
                while (!b.failed && read_bits(&b, 1) == 0) if (++zeros >= 32) { b.failed = 1; break; }
                if (zeros < 32) read_bits(&b, zeros);
            }
            decoder_model = (int)read_bits(&b, 1);
            if (decoder_model) {
                buffer_delay_bits = (int)read_bits(&b, 5) + 1;
                read_bits(&b, 32); read_bits(&b, 5); read_bits(&b, 5);
            }
        }
        int initial_delay = (int)read_bits(&b, 1);
        int points = (int)read_bits(&b, 5) + 1;
        for (int i = 0; i < points && !b.failed; i++) {
            read_bits(&b, 12);
            if (read_bits(&b, 5) > 7) read_bits(&b, 1);
            if (decoder_model && read_bits(&b, 1)) { read_bits(&b, buffer_delay_bits); read_bits(&b, buffer_delay_bits); read_bits(&b, 1); }
            if (initial_delay && read_bits(&b, 1)) read_bits(&b, 4);
        }
    }
    int width_bits = (int)read_bits(&b, 4) + 1, height_bits = (int)read_bits(&b, 4) + 1;
    *w = read_bits(&b, width_bits) + 1;
    *h = read_bits(&b, height_bits) + 1;
    if (b.failed) return 0;
    // On to color_config's high_bitdepth and twelve_bit.
    if (!reduced && read_bits(&b, 1)) read_bits(&b, 7);   // frame_id_numbers_present_flag, its lengths
    read_bits(&b, 3);                               // 128x128 superblocks, filter intra, intra edge filter
    if (!reduced) {
        read_bits(&b, 4);                           // interintra, masked compound, warped motion, dual filter
        int order_hint = (int)read_bits(&b, 1);
        if (order_hint) read_bits(&b, 2);           // jnt_comp, ref_frame_mvs
        int screen_content = 2;                     // SELECT_SCREEN_CONTENT_TOOLS
        if (!read_bits(&b, 1)) screen_content = (int)read_bits(&b, 1);
        if (screen_content > 0 && !read_bits(&b, 1)) read_bits(&b, 1);   // seq_choose_integer_mv, seq_force_integer_mv
        if (order_hint) read_bits(&b, 3);           // order_hint_bits_minus_1
    }
    read_bits(&b, 3);                               // superres, cdef, restoration
    int high = (int)read_bits(&b, 1);
    int depth = profile == 2 && high ? (read_bits(&b, 1) ? 12 : 10) : high ? 10 : 8;
    *bits = b.failed ? 0 : depth;
    return 1;
}

/// The largest AV1 sequence header among the OBUs in [p, p + size).
static int av1_obus_size(const uint8_t *p, size_t size, uint32_t *w, uint32_t *h, int *bits) {
    int found = 0;
    size_t q = 0;
    for (int obus = 0; obus < 64 && q < size; obus++) {
        int header = p[q], type = header >> 3 & 15, extension = header >> 2 & 1, has_size = header >> 1 & 1;
        q += 1 + (size_t)extension;
        uint64_t length = size > q ? size - q : 0;
        if (has_size) {
            length = 0;
            for (int i = 0; i < 8; i++) {
                if (q >= size) return found;
                length |= (uint64_t)(p[q] & 0x7F) << (7 * i);
                if (!(p[q++] & 0x80)) break;
            }
        }
        if (q > size || length > size - q) return found;
        uint32_t sw, sh;
        int sequence_bits = 0;
        if (type == 1 && av1_sequence_size(p + q, (size_t)length, &sw, &sh, &sequence_bits)) {
            if (sequence_bits > *bits) *bits = sequence_bits;
            if (!found || (uint64_t)sw * sh > (uint64_t)*w * *h) { *w = sw; *h = sh; found = 1; }
        }
        q += (size_t)length;
    }
    return found;
}

/// Item `id`'s coded data read as one stream over its extents, in the file or in 'idat' (an
/// extent of length 0, or one past the end, reaches to the end).
struct item_stream {
    struct tessera_heif *heif;
    const struct meta_boxes *m;
    uint64_t *offsets, *lengths;
    uint32_t extents;
    int in_idat;
    uint64_t total;
};

#define ITEM_STREAM_EXTENTS 1024  // a coded picture in more pieces is not read
#define ITEM_STREAM_UNITS 4096    // NAL units or OBUs of one item walked for parameter sets

static int item_stream_open(struct item_stream *s, struct tessera_heif *heif, const struct meta_boxes *m, uint32_t id) {
    memset(s, 0, sizeof *s);
    s->heif = heif;
    s->m = m;
    uint64_t offset, length;
    uint32_t count = 0;
    if (!item_extents(m, id, &offset, &length, 1, &count, &s->in_idat) || count > ITEM_STREAM_EXTENTS) return 0;
    s->offsets = malloc(count * sizeof *s->offsets);
    s->lengths = malloc(count * sizeof *s->lengths);
    if (s->offsets == NULL || s->lengths == NULL || !item_extents(m, id, s->offsets, s->lengths, count, &count, &s->in_idat)) return 0;
    s->extents = count;
    uint64_t source = s->in_idat ? m->idat_size : (uint64_t)heif->file_bytes;
    for (uint32_t e = 0; e < count; e++) {
        if (s->offsets[e] > source) s->offsets[e] = source;
        if (s->lengths[e] == 0 || s->lengths[e] > source - s->offsets[e]) s->lengths[e] = source - s->offsets[e];
        s->total += s->lengths[e];
    }
    return 1;
}

static void item_stream_close(struct item_stream *s) {
    free(s->offsets);
    free(s->lengths);
}

/// Up to `n` bytes of the stream from `at`; how many were read.
static size_t item_stream_read(const struct item_stream *s, uint64_t at, uint8_t *out, size_t n) {
    size_t got = 0;
    uint64_t base = 0;
    for (uint32_t e = 0; e < s->extents && got < n; base += s->lengths[e], e++) {
        if (at + got >= base + s->lengths[e]) continue;
        uint64_t within = at + got - base;
        size_t take = n - got;
        if (take > s->lengths[e] - within) take = (size_t)(s->lengths[e] - within);
        if (s->in_idat) {
            memcpy(out + got, s->m->data + s->m->idat + s->offsets[e] + within, take);
        } else {
            ssize_t r = pread(s->heif->fd, out + got, take, (off_t)(s->offsets[e] + within));
            if (r <= 0) return got;
            if ((size_t)r < take) return got + (size_t)r;
        }
        got += take;
    }
    return got;
}

/// The largest SPS among the NAL units of an HEVC item's whole data, each after its length (an
/// SPS there replaces hvcC's when the picture is decoded, wherever in the data it is: one after
/// a 5,000-byte first unit made libde265 decode 8192 x 4096 behind a declared 8192 x 64).
static int hevc_data_size(const struct item_stream *s, int length_bytes, int found, uint32_t *w, uint32_t *h,
                          uint32_t *shown_w, uint32_t *shown_h, int *bits) {
    uint8_t unit[512];
    uint64_t q = 0;
    for (int units = 0; q + (uint64_t)length_bytes + 2 <= s->total; units++) {
        if (units == ITEM_STREAM_UNITS) return 0;
        if (item_stream_read(s, q, unit, (size_t)length_bytes + 2) != (size_t)length_bytes + 2) break;
        uint64_t length = 0;
        read_n(unit, (size_t)length_bytes, 0, length_bytes, &length);
        q += (uint64_t)length_bytes;
        if (((unit[length_bytes] >> 1) & 0x3F) == 33) {
            size_t n = item_stream_read(s, q, unit, length < sizeof unit ? (size_t)length : sizeof unit);
            uint32_t cw, ch, sw, sh;
            int sps_bits = 0;
            if (hevc_sps_size(unit, n, &cw, &ch, &sw, &sh, &sps_bits)) {
                if (sps_bits > *bits) *bits = sps_bits;
                if (!found || (uint64_t)cw * ch > (uint64_t)*w * *h) {
                    *w = cw; *h = ch; *shown_w = sw; *shown_h = sh;
                    found = 1;
                }
            }
        }
        if (length > s->total - q) break;
        q += length;
    }
    return found;
}

/// The largest AV1 sequence header among the OBUs of an AV1 item's whole data.
static int av1_data_size(const struct item_stream *s, int found, uint32_t *w, uint32_t *h, int *bits) {
    uint8_t obu[512];
    uint64_t q = 0;
    for (int units = 0; q < s->total; units++) {
        if (units == ITEM_STREAM_UNITS) return 0;
        size_t n = item_stream_read(s, q, obu, 10);
        if (n == 0) break;
        int header = obu[0], type = header >> 3 & 15, extension = header >> 2 & 1, has_size = header >> 1 & 1;
        size_t at = 1 + (size_t)extension;
        uint64_t length = 0;
        if (has_size) {
            for (int i = 0;; i++) {
                if (at >= n || i == 8) return found;
                length |= (uint64_t)(obu[at] & 0x7F) << (7 * i);
                if (!(obu[at++] & 0x80)) break;
            }
        } else {
            length = s->total - q > at ? s->total - q - at : 0;
        }
        q += at;
        if (length > s->total - q) break;
        if (type == 1) {
            size_t got = item_stream_read(s, q, obu, length < sizeof obu ? (size_t)length : sizeof obu);
            uint32_t sw, sh;
            int sequence_bits = 0;
            if (av1_sequence_size(obu, got, &sw, &sh, &sequence_bits)) {
                if (sequence_bits > *bits) *bits = sequence_bits;
                if (!found || (uint64_t)sw * sh > (uint64_t)*w * *h) { *w = sw; *h = sh; found = 1; }
            }
        }
        q += length;
    }
    return found;
}

/// What a decoder allocates for coded item `id` (hvc1 or av01), and what it shows (HEVC's
/// conformance window), from its decoder configuration and, with `heif->walk_data` or when that
/// has none (an av1C may leave out the sequence header), every parameter set in its data (where
/// one may repeat and override it). 1 when read; 0 also for data of more than
/// ITEM_STREAM_EXTENTS pieces or ITEM_STREAM_UNITS units, which is not walked.
static int coded_size(struct tessera_heif *heif, const struct meta_boxes *m, uint32_t id, uint32_t *w, uint32_t *h,
                      uint32_t *shown_w, uint32_t *shown_h) {
    char type[4];
    size_t at, size;
    if (!item_type(m, id, type)) return 0;
    struct item_stream stream;
    int found = 0;
    if (!item_stream_open(&stream, heif, m, id)) {
        item_stream_close(&stream);
        return 0;
    }
    if (memcmp(type, "hvc1", 4) == 0) {
        int length_bytes = 4;
        if (item_property(m, id, "hvcC", &at, &size)) found = hvcc_size(m->data + at, size, w, h, shown_w, shown_h, &length_bytes, &heif->coded_bits);
        if (heif->walk_data || !found) found = hevc_data_size(&stream, length_bytes, found, w, h, shown_w, shown_h, &heif->coded_bits);
    } else if (memcmp(type, "av01", 4) == 0) {
        if (item_property(m, id, "av1C", &at, &size) && size > 4) found = av1_obus_size(m->data + at + 4, size - 4, w, h, &heif->coded_bits);
        if (heif->walk_data || !found) found = av1_data_size(&stream, found, w, h, &heif->coded_bits);
        *shown_w = *w;
        *shown_h = *h;
    }
    item_stream_close(&stream);
    return found;
}

/// Whether two sizes of one picture disagree by more than coding can explain (HEVC codes whole
/// 8-pixel blocks, and a 4:2:0 picture of odd size one more row or column).
static int differs(uint32_t a, uint32_t b) { return (uint64_t)a > (uint64_t)b + 64 || (uint64_t)b > (uint64_t)a + 64; }

/// Whether a picture of `w` x `h` is not what item `id`'s 'ispe' of `ispe_w` x `ispe_h` says. An
/// item turned by a quarter (irot) is also taken with the two swapped: libheif 1.15's encoder
/// writes 'ispe' after the turn, where the standard puts it before.
static int size_differs(const struct meta_boxes *m, uint32_t id, uint32_t w, uint32_t h, uint32_t ispe_w, uint32_t ispe_h) {
    if (!differs(w, ispe_w) && !differs(h, ispe_h)) return 0;
    size_t at, size;
    int quarter = item_property(m, id, "irot", &at, &size) && size >= 1 && (m->data[at] & 1);
    return !quarter || differs(w, ispe_h) || differs(h, ispe_w);
}

/// The size libheif will decode item `id` at (a grid: its canvas; one picture: its coded
/// size), checked against its 'ispe'. 1 when found and consistent; 0 with the reason in
/// `message` otherwise.
static int decode_size(struct tessera_heif *heif, const struct meta_boxes *m, uint32_t id, tessera_heif_size *out,
                       char *message, size_t message_bytes) {
    memset(out, 0, sizeof *out);
    char type[4];
    uint32_t ispe_w = 0, ispe_h = 0;
    if (!item_type(m, id, type)) { snprintf(message, message_bytes, "item %u has no type", id); return 0; }
    if (!item_ispe(m, id, &ispe_w, &ispe_h)) { snprintf(message, message_bytes, "item %u has no ispe", id); return 0; }
    if (memcmp(type, "grid", 4) == 0) {
        uint8_t grid[12];
        size_t n = item_head(heif, m, id, grid, sizeof grid);
        if (n < 8 || grid[0] != 0) { snprintf(message, message_bytes, "its grid description cannot be read"); return 0; }
        int wide = grid[1] & 1;
        if (wide && n < 12) { snprintf(message, message_bytes, "its grid description cannot be read"); return 0; }
        uint32_t rows = (uint32_t)grid[2] + 1, columns = (uint32_t)grid[3] + 1;
        out->width = wide ? be32(grid + 4) : be16(grid + 4);
        out->height = wide ? be32(grid + 8) : be16(grid + 6);
        // The tiles: every distinct one is sized (a file may reference one tile many times).
        static const uint32_t most = 4096;  // libheif 1.15 allows no more than 4096 references an item
        uint32_t tiles[4096];
        uint32_t count = item_references(m, id, "dimg", tiles, most);
        if (count != rows * columns || count > most) {
            snprintf(message, message_bytes, "its grid of %u x %u tiles references %u", columns, rows, count);
            return 0;
        }
        for (uint32_t t = 0; t < count; t++) {
            int seen = 0;
            for (uint32_t s = 0; s < t && !seen; s++) seen = tiles[s] == tiles[t];
            if (seen) continue;
            uint32_t tw = 0, th = 0, sw = 0, sh = 0, tile_ispe_w = 0, tile_ispe_h = 0;
            if (!coded_size(heif, m, tiles[t], &tw, &th, &sw, &sh)) {
                snprintf(message, message_bytes, "the coded size of its tile (item %u) cannot be read", tiles[t]);
                return 0;
            }
            if (item_ispe(m, tiles[t], &tile_ispe_w, &tile_ispe_h) && size_differs(m, tiles[t], sw, sh, tile_ispe_w, tile_ispe_h)) {
                snprintf(message, message_bytes, "a tile's ispe says %u x %u but its coded picture is %u x %u", tile_ispe_w,
                         tile_ispe_h, sw, sh);
                return 0;
            }
            if ((uint64_t)tw * th > (uint64_t)out->tile_width * out->tile_height) { out->tile_width = tw; out->tile_height = th; }
        }
        if (size_differs(m, id, out->width, out->height, ispe_w, ispe_h)) {
            snprintf(message, message_bytes, "its ispe says %u x %u but its grid of %u x %u tiles makes %u x %u", ispe_w, ispe_h,
                     columns, rows, out->width, out->height);
            return 0;
        }
        return 1;
    }
    uint32_t sw = 0, sh = 0;
    if (!coded_size(heif, m, id, &out->width, &out->height, &sw, &sh)) {
        snprintf(message, message_bytes, "the coded size of its picture cannot be read");
        return 0;
    }
    if (size_differs(m, id, sw, sh, ispe_w, ispe_h)) {
        snprintf(message, message_bytes, "its ispe says %u x %u but its coded picture is %u x %u", ispe_w, ispe_h, sw, sh);
        return 0;
    }
    return 1;
}

/// Whether item `id` (of `type`) is a picture Tessera decodes: HEVC or AV1, or a grid of them.
/// Else says what it is (it was "the coded size of its picture cannot be read").
static int decodable_kind(const struct meta_boxes *m, uint32_t id, const char type[4], char *message, size_t message_bytes) {
    const char *kind = type;
    char tile_type[4];
    if (memcmp(type, "grid", 4) == 0) {
        uint32_t tile = 0;
        if (item_references(m, id, "dimg", &tile, 1) == 0 || !item_type(m, tile, tile_type)) return 1;  // said when sized
        kind = tile_type;
    }
    if (memcmp(kind, "hvc1", 4) == 0 || memcmp(kind, "av01", 4) == 0) return 1;
    char shown[5] = { 0 };
    for (int i = 0; i < 4; i++) shown[i] = kind[i] >= 0x20 && kind[i] < 0x7F ? kind[i] : '?';
    if (memcmp(kind, "iovl", 4) == 0) {
        snprintf(message, message_bytes, "its picture is an overlay of other pictures (iovl), which Tessera does not draw");
    } else {
        snprintf(message, message_bytes, "its picture is coded as '%s', which Tessera does not decode (it reads HEVC and AV1)", shown);
    }
    return 0;
}

/// Where the top-level 'meta' box is (a HEIF file puts it first, after 'ftyp') and how long;
/// 1 when found among the first 64 boxes.
static int find_meta(struct tessera_heif *heif, int64_t *at_out, uint64_t *length_out) {
    int64_t at = 0;
    for (int boxes = 0; boxes < 64 && at + 8 <= heif->file_bytes; boxes++) {
        uint8_t head[16];
        if (pread(heif->fd, head, 16, at) < 8) return 0;
        uint64_t length = be32(head);
        if (length == 1) length = (uint64_t)be32(head + 8) << 32 | be32(head + 12);
        if (length < 8) return 0;
        if (memcmp(head + 4, "meta", 4) == 0) {
            *at_out = at;
            *length_out = length;
            return 1;
        }
        at += (int64_t)length;
    }
    return 0;
}

/// Reads the top-level 'meta' box into `*data` (freed by the caller) and finds its children.
/// 1 when found.
static int read_meta(struct tessera_heif *heif, uint8_t **data, struct meta_boxes *m) {
    *data = NULL;
    memset(m, 0, sizeof *m);
    int64_t at = 0;
    uint64_t length = 0;
    if (!find_meta(heif, &at, &length) || length > (16u << 20) || length < 12) return 0;
    uint8_t *meta = malloc((size_t)length);
    if (meta == NULL || pread(heif->fd, meta, (size_t)length, at) != (ssize_t)length) { free(meta); return 0; }
    *data = meta;
    m->data = meta;
    m->end = (size_t)length;
    // 'meta' is a full box: 8 bytes of header, 4 of version and flags.
    size_t iprp, iprp_size;
    find_box(meta, 12, m->end, "iinf", &m->iinf, &m->iinf_size);
    find_box(meta, 12, m->end, "iref", &m->iref, &m->iref_size);
    find_box(meta, 12, m->end, "iloc", &m->iloc, &m->iloc_size);
    find_box(meta, 12, m->end, "idat", &m->idat, &m->idat_size);
    if (find_box(meta, 12, m->end, "iprp", &iprp, &iprp_size)) {
        find_box(meta, iprp, iprp + iprp_size, "ipco", &m->ipco, &m->ipco_size);
        find_box(meta, iprp, iprp + iprp_size, "ipma", &m->ipma, &m->ipma_size);
    }
    return 1;
}

#define TESSERA_HEIF_META_BYTES (4u << 20)  // the most 'meta' libheif is let read: it holds about 2.3 copies
                                            // of a profile in it (7 MiB took 16 MiB); a real one is a few KB
#define TESSERA_HEIF_ITEMS 4096             // items libheif is let parse (its parsing grows as their square)

/// The count at the start of full box `at` ('iinf': 16 bits in version 0; 'iloc': 16 bits
/// before version 2, after the size fields), 0 when it cannot be read.
static uint64_t entry_count(const struct meta_boxes *m, size_t at, size_t size, int iloc) {
    if (size < 8 || at + size > m->end) return 0;
    const uint8_t *d = m->data + at;
    size_t q = iloc ? 6 : 4;
    int wide = iloc ? d[0] >= 2 : d[0] != 0;
    if (q + (wide ? 4u : 2u) > size) return 0;
    return wide ? be32(d + q) : be16(d + q);
}

static int compare_ids(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int compare_extents(const void *a, const void *b) {
    const struct extent *x = a, *y = b;
    return x->at < y->at ? -1 : x->at > y->at ? 1 : (x->bytes > y->bytes) - (x->bytes < y->bytes);
}

static int listed(const uint32_t *sorted, size_t count, uint32_t id) {
    return bsearch(&id, sorted, count, sizeof id, compare_ids) != NULL;
}

/// Whether an infe's 'mime' item, its strings from `at` to `end` (item name, content type,
/// content encoding), is encoded "deflate" (which libheif 1.15 inflates as it opens the file).
static int deflated(const uint8_t *d, size_t at, size_t end) {
    for (int skip = 0; skip < 2; skip++) {
        const uint8_t *zero = at < end ? memchr(d + at, 0, end - at) : NULL;
        if (zero == NULL) return 0;
        at = (size_t)(zero - d) + 1;
    }
    return end - at >= 7 && memcmp(d + at, "deflate", 7) == 0 && (end - at == 7 || d[at + 7] == 0);
}

/// The items in 'iinf' of coded pictures (hvc1, av01), or with `mime_deflated` of metadata
/// libheif inflates, up to `capacity`, sorted; how many.
static size_t items_of_kind(const struct meta_boxes *m, int mime_deflated, uint32_t *ids, size_t capacity) {
    size_t count = 0;
    if (m->iinf_size < 6) return 0;
    const uint8_t *d = m->data;
    size_t q = m->iinf + (d[m->iinf] == 0 ? 6 : 8), end = m->iinf + m->iinf_size;
    while (q + 8 <= end && count < capacity) {
        uint32_t size = be32(d + q);
        if (size < 8 || size > end - q) break;
        if (memcmp(d + q + 4, "infe", 4) == 0 && size >= 20 && d[q + 8] >= 2) {
            int wide = d[q + 8] == 3;
            uint32_t item = wide ? be32(d + q + 12) : be16(d + q + 12);
            size_t at = q + 12 + (wide ? 4 : 2) + 2;
            int kind = at + 4 <= q + size &&
                       (mime_deflated ? memcmp(d + at, "mime", 4) == 0 && deflated(d, at + 4, q + size)
                                      : memcmp(d + at, "hvc1", 4) == 0 || memcmp(d + at, "av01", 4) == 0);
            if (kind) ids[count++] = item;
        }
        q += size;
    }
    qsort(ids, count, sizeof *ids, compare_ids);
    return count;
}

/// The items with a 'cdsc' reference (metadata, which libheif 1.15 keeps with the images it
/// describes), up to `capacity`, sorted; how many, or SIZE_MAX when there are more.
static size_t describing_items(const struct meta_boxes *m, uint32_t *ids, size_t capacity) {
    size_t count = 0;
    if (m->iref_size < 4) return 0;
    const uint8_t *d = m->data;
    int wide = d[m->iref] != 0;
    size_t q = m->iref + 4, end = m->iref + m->iref_size;
    while (q + 8 <= end) {
        uint32_t size = be32(d + q);
        uint64_t source = 0;
        if (size < 8 || size > end - q) break;
        if (memcmp(d + q + 4, "cdsc", 4) == 0 && read_n(d, q + size, q + 8, wide ? 4 : 2, &source)) {
            if (count == capacity) return SIZE_MAX;
            ids[count++] = (uint32_t)source;
        }
        q += size;
    }
    qsort(ids, count, sizeof *ids, compare_ids);
    return count;
}

static uint64_t saturating_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

#define TESSERA_HEIF_KEPT_BYTES (4u << 20)  // the most metadata libheif is let keep (a real file's Exif and XMP: KB)

/// Feeds `length` bytes at `offset` of the file (or of 'idat') to `z`, counting what comes out
/// in `*total`. Z_STREAM_END, an error, Z_OK when the input ran out, or Z_BUF_ERROR past `limit`.
static int inflate_span(struct tessera_heif *heif, const struct meta_boxes *m, int in_idat, uint64_t offset, uint64_t length,
                        z_stream *z, uint64_t limit, uint64_t *total) {
    uint8_t in[16384], out[16384];
    while (length > 0) {
        size_t take = length < sizeof in ? (size_t)length : sizeof in;
        if (in_idat) {
            if (offset > m->idat_size || take > m->idat_size - offset) return Z_OK;  // libheif's bound is the box's
            memcpy(in, m->data + m->idat + offset, take);
        } else if (pread(heif->fd, in, take, (off_t)offset) != (ssize_t)take) {
            return Z_OK;
        }
        offset += take;
        length -= take;
        z->next_in = in;
        z->avail_in = (uInt)take;
        while (z->avail_in > 0) {
            z->next_out = out;
            z->avail_out = sizeof out;
            int result = inflate(z, Z_NO_FLUSH);
            *total += sizeof out - z->avail_out;
            if (result != Z_OK && result != Z_BUF_ERROR) return result;
            if (*total > limit) return Z_BUF_ERROR;
            if (result == Z_BUF_ERROR) break;  // (no progress: more input is needed)
        }
    }
    return Z_OK;
}

/// What deflated metadata item `id` inflates to as libheif 1.15 inflates it (its data as
/// libheif reads them, as one zlib stream), counted up to `limit` (more: past it); UINT64_MAX
/// when the stream does not end within them (empty, or cut: libheif's open fails on it), and 0
/// when zlib refuses it.
static uint64_t inflated_bytes(struct tessera_heif *heif, const struct meta_boxes *m, uint32_t id, uint64_t limit) {
    struct iloc_cursor c;
    uint64_t total = 0, offset, length;
    if (!iloc_open(m, &c)) return UINT64_MAX;
    while (iloc_next_item(&c) && c.id != id) {}
    if (c.id != id || c.method > 1) return UINT64_MAX;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK) return 0;
    int result = Z_OK;
    uint64_t source = c.method == 1 ? m->idat_size + 16 : (uint64_t)heif->file_bytes;
    while (result == Z_OK && iloc_next_extent(&c, &offset, &length)) {
        if (offset > source || length > source - offset) {
            if (c.method == 0) { result = Z_OK; break; }  // libheif's read stops: it inflates nothing
            continue;
        }
        result = inflate_span(heif, m, c.method == 1, offset, length, &z, limit, &total);
    }
    inflateEnd(&z);
    if (result == Z_STREAM_END) return total;
    if (result == Z_BUF_ERROR && total > limit) return total;
    if (result == Z_OK) return UINT64_MAX;
    return 0;
}

/// What libheif 1.15 holds while it opens the file (`*open_bytes`): it reads every item's data
/// whole (a coded picture's after its decoder configuration's parameter sets, a deflated
/// metadata item inflated), an item at a time, up to 32 extents of up to the whole file each,
/// and keeps the metadata's (`*kept_bytes`; a hostile 75 KB file made it allocate 596 MiB).
/// The item that holds the most is `*largest`; every item's data come to `*all_bytes` (about
/// the file's size, unless extents overlap). The coded pictures' extents in the file go to
/// `heif->skip`. 0 when 'iloc' cannot be read; -1 when a deflated item's stream stops early, -2
/// when it inflates past TESSERA_HEIF_KEPT_BYTES (libheif inflates it whole, with no limit: 400
/// KB took 530 MiB and 13 s).
static int plan_open_reads(struct tessera_heif *heif, const struct meta_boxes *m, uint64_t *open_bytes, uint64_t *kept_bytes,
                           uint64_t *all_bytes, uint32_t *largest) {
    static const size_t most = TESSERA_HEIF_ITEMS + 1;
    uint32_t *coded = malloc(most * sizeof *coded), *kept = malloc(most * sizeof *kept), *packed = malloc(most * sizeof *packed);
    struct extent *skip = NULL;
    size_t skips = 0, skip_capacity = 0;
    uint64_t largest_bytes = 0;
    int ok = coded != NULL && kept != NULL && packed != NULL;
    size_t coded_count = ok ? items_of_kind(m, 0, coded, most) : 0, kept_count = ok ? describing_items(m, kept, most) : 0;
    size_t packed_count = ok ? items_of_kind(m, 1, packed, most) : 0;
    struct iloc_cursor c;
    ok = ok && iloc_open(m, &c);
    while (ok && iloc_next_item(&c)) {
        int is_coded = listed(coded, coded_count, c.id), is_kept = kept_count == SIZE_MAX || listed(kept, kept_count, c.id);
        uint64_t total = 0, offset, length;
        // A coded picture's data follow its hvcC's parameter sets (each with a 4-byte length
        // where hvcC gives 2) or its av1C's OBUs.
        size_t at, size;
        if (is_coded && item_property(m, c.id, "hvcC", &at, &size)) total = 2 * (uint64_t)size;
        else if (is_coded && item_property(m, c.id, "av1C", &at, &size)) total = size;
        // libheif stops at the first extent outside the file (and the open fails); one outside
        // 'idat' it leaves out, and reads on.
        uint64_t source = c.method == 1 ? m->idat_size + 16 : (uint64_t)heif->file_bytes;
        int reading = 1;
        while (iloc_next_extent(&c, &offset, &length)) {
            if (!reading || offset > source || length > source - offset) {
                if (c.method == 0) reading = 0;
                continue;
            }
            total = saturating_add(total, length);
            if (is_coded && c.method == 0 && length > 0 && c.extent <= 32) {
                if (skips == skip_capacity) {
                    skip_capacity = skip_capacity ? skip_capacity * 2 : 64;
                    struct extent *grown = realloc(skip, skip_capacity * sizeof *skip);
                    if (grown == NULL) { ok = 0; break; }
                    skip = grown;
                }
                skip[skips++] = (struct extent){ offset, length };
            }
        }
        *all_bytes = saturating_add(*all_bytes, total);
        // (libheif grows the item's buffer extent by extent: doubling, it holds the old one
        // beside the new, up to twice the data.)
        uint64_t held = c.extents > 1 ? saturating_add(total, total) : total;
        if (listed(packed, packed_count, c.id)) {
            // (Measured on a cursor of its own: this one's place is kept.)
            uint64_t inflated = inflated_bytes(heif, m, c.id, TESSERA_HEIF_KEPT_BYTES);
            if (inflated == UINT64_MAX) { *largest = c.id; ok = -1; break; }
            if (inflated > TESSERA_HEIF_KEPT_BYTES) { *largest = c.id; ok = -2; break; }
            held = saturating_add(held, inflated);
            total = inflated;
        }
        if (held > largest_bytes) { largest_bytes = held; *largest = c.id; }
        if (is_kept) *kept_bytes = saturating_add(*kept_bytes, total);
    }
    free(coded);
    free(kept);
    free(packed);
    if (ok != 1) { free(skip); return ok; }
    qsort(skip, skips, sizeof *skip, compare_extents);
    heif->skip = skip;
    heif->skips = skips;
    *open_bytes = saturating_add(largest_bytes, *kept_bytes);
    return 1;
}

/// What libheif would read before any of Tessera's checks, checked first: a 'meta' box over
/// TESSERA_HEIF_META_BYTES (libheif holds it, and copies of its profile: a 30 MiB colr took
/// 76 MiB and 42 s at --max-memory 32M), more than TESSERA_HEIF_ITEMS items (10,000 in a 512 KB
/// file took 9.3 s of CPU in libheif's parsing), or items whose data come to more than
/// `open_limit` (plan_open_reads; `info->open_bytes`). 1 when libheif may read the file.
static int meta_acceptable(struct tessera_heif *heif, uint64_t open_limit, tessera_heif_info *info, char *message,
                           size_t message_bytes) {
    int64_t at = 0;
    uint64_t length = 0;
    uint8_t *data = NULL;
    struct meta_boxes m;
    // (A 'meta' Tessera cannot find or read is refused after libheif's open anyway: refused
    // first, before libheif reads what it points to.)
    if (!find_meta(heif, &at, &length) || (length <= TESSERA_HEIF_META_BYTES && !read_meta(heif, &data, &m))) {
        free(data);
        snprintf(message, message_bytes, "its item boxes (meta) cannot be read");
        return 0;
    }
    if (length > TESSERA_HEIF_META_BYTES) {
        snprintf(message, message_bytes, "its item boxes (meta) hold %llu MiB, which libheif would read into memory: more "
                 "than the %u MiB Tessera lets it", (unsigned long long)(length >> 20), TESSERA_HEIF_META_BYTES >> 20);
        return 0;
    }
    uint64_t items = entry_count(&m, m.iinf, m.iinf_size, 0), located = entry_count(&m, m.iloc, m.iloc_size, 1);
    if (items > TESSERA_HEIF_ITEMS || located > TESSERA_HEIF_ITEMS) {
        free(data);
        snprintf(message, message_bytes, "it declares %llu items, more than the %d libheif is let parse",
                 (unsigned long long)(items > located ? items : located), TESSERA_HEIF_ITEMS);
        return 0;
    }
    uint32_t largest = 0;
    uint64_t all_bytes = 0, open_bytes = 0, kept_bytes = 0;
    int planned = plan_open_reads(heif, &m, &open_bytes, &kept_bytes, &all_bytes, &largest);
    free(data);
    if (planned == 0) {
        snprintf(message, message_bytes, "its item locations (iloc) cannot be read");
        return 0;
    }
    if (planned < 0) {
        snprintf(message, message_bytes, planned == -1 ? "its compressed metadata (item %u) stops before its end"
                 : "its compressed metadata (item %u) inflates to more than 4 MiB, which libheif would hold whole", largest);
        return 0;
    }
    if (kept_bytes > TESSERA_HEIF_KEPT_BYTES) {
        snprintf(message, message_bytes, "its metadata items hold %llu KiB, which libheif keeps in memory with the picture: "
                 "more than the %u MiB Tessera lets it", (unsigned long long)(kept_bytes >> 10), TESSERA_HEIF_KEPT_BYTES >> 20);
        return 0;
    }
    // Items seldom share bytes (a layered AVIF's items for each layer share the picture's: 2.6
    // times its file in the AOM conformance suite): a file whose items' data come to more than
    // sixteen times its size is made to make libheif allocate, and refused at any budget (a 75
    // KB one of 250 Exif items took 596 MiB under an automatic budget).
    if (all_bytes > 16 * (uint64_t)heif->file_bytes + (1u << 20)) {
        snprintf(message, message_bytes, "its items' data overlap: they come to %llu MiB in a file of %llu KiB, which libheif "
                 "would read whole", (unsigned long long)(all_bytes >> 20), (unsigned long long)(heif->file_bytes >> 10));
        return 0;
    }
    info->open_bytes = open_bytes;  // (set only past the checks above: the caller reads a refusal with it as for want of memory)
    if (open_bytes > open_limit) {
        snprintf(message, message_bytes, "libheif reads every item's data whole to open it, and its items (the largest, item "
                 "%u) come to %llu MiB", largest, (unsigned long long)((open_bytes + (1u << 20) - 1) >> 20));
        return 0;
    }
    return 1;
}

/// The primary item's id ('pitm'); 0 when absent.
static uint32_t primary_item(const struct meta_boxes *m) {
    size_t pitm, size;
    if (!find_box(m->data, 12, m->end, "pitm", &pitm, &size) || size < 6) return 0;
    return m->data[pitm] == 0 ? be16(m->data + pitm + 4) : (size >= 8 ? be32(m->data + pitm + 4) : 0);
}

/// Whether item `id` has an irot or imir property.
static int has_transform(const struct meta_boxes *m, uint32_t id) {
    size_t at, size;
    return item_property(m, id, "irot", &at, &size) || item_property(m, id, "imir", &at, &size);
}

// MARK: Tiles
//
// libheif 1.15 cannot decode one tile of a grid: heif_context_get_image_handle finds top-level
// images only, and a grid's tiles are hidden items it refers to. So a tile is decoded as its own
// small HEIF, made here in memory: the tile's item with its own properties (hvcC or av1C, ispe,
// colr, ...) and its coded data, nothing else. libheif then decodes it exactly as it decodes the
// tile inside the whole grid (the same decoder plugin, parameter sets, nclx and conversion to
// planar RGB), so the pixels are the same; only one row of tiles is held, never the canvas.

/// The property associations of item `id` (ipma), in order: each 1-based ipco index, with the
/// essential flag in bit 15; how many there are (the first `capacity` stored).
static uint32_t item_associations(const struct meta_boxes *m, uint32_t id, uint16_t *out, uint32_t capacity) {
    if (m->ipma_size < 8) return 0;
    const uint8_t *d = m->data;
    int version = d[m->ipma], wide = d[m->ipma + 3] & 1;
    uint32_t entries = be32(d + m->ipma + 4), found = 0;
    size_t q = m->ipma + 8, end = m->ipma + m->ipma_size;
    for (uint32_t e = 0; e < entries && q < end; e++) {
        uint64_t item = 0, count = 0;
        if (!read_n(d, end, q, version < 1 ? 2 : 4, &item)) return found;
        q += version < 1 ? 2 : 4;
        if (!read_n(d, end, q, 1, &count)) return found;
        q += 1;
        for (uint64_t a = 0; a < count; a++) {
            uint64_t raw = 0;
            if (!read_n(d, end, q, wide ? 2 : 1, &raw)) return found;
            q += wide ? 2 : 1;
            uint16_t index = (uint16_t)(raw & (wide ? 0x7FFF : 0x7F));
            uint16_t essential = (uint16_t)((raw >> (wide ? 15 : 7)) & 1);
            if (item != id || index == 0) continue;
            if (found < capacity) out[found] = (uint16_t)(index | essential << 15);
            found++;
        }
    }
    return found;
}

/// The `index`-th box of ipco (1-based): where the whole box starts and its size. 1 when found.
static int ipco_box(const struct meta_boxes *m, uint32_t index, size_t *at, size_t *size) {
    size_t p = m->ipco, end = m->ipco + m->ipco_size;
    for (uint32_t i = 1; p + 8 <= end; i++) {
        uint32_t box = be32(m->data + p);
        if (box < 8 || box > end - p) return 0;
        if (i == index) { *at = p; *size = box; return 1; }
        p += box;
    }
    return 0;
}

/// Whether `type` is a property that changes the pixels' geometry (libheif applies it itself).
static int is_transform(const uint8_t *type) {
    return memcmp(type, "irot", 4) == 0 || memcmp(type, "imir", 4) == 0 || memcmp(type, "clap", 4) == 0;
}

/// The grid's irot and imir, applied in their order as libheif 1.15 applies them, as one EXIF
/// orientation: each step tracks which way one pixel right (ux) and one pixel down (uy) of the
/// turned picture go in the stored canvas. 0 when the grid has a 'clap' (its rounding is
/// libheif's own: such a grid is decoded whole).
static int grid_orientation(const struct meta_boxes *m, uint32_t id) {
    uint16_t props[64];
    uint32_t count = item_associations(m, id, props, 64);
    if (count > 64) return 0;
    int ux[2] = { 1, 0 }, uy[2] = { 0, 1 };
    for (uint32_t i = 0; i < count; i++) {
        size_t at, size;
        if (!ipco_box(m, props[i] & 0x7FFF, &at, &size)) continue;
        const uint8_t *box = m->data + at;
        if (memcmp(box + 4, "clap", 4) == 0) return 0;
        if (memcmp(box + 4, "irot", 4) == 0 && size >= 9) {
            // Each quarter turn counter-clockwise: right becomes what was down, down what was left.
            for (int turn = 0; turn < (box[8] & 3); turn++) {
                int rx = ux[0], ry = ux[1];
                ux[0] = uy[0]; ux[1] = uy[1];
                uy[0] = -rx; uy[1] = -ry;
            }
        } else if (memcmp(box + 4, "imir", 4) == 0 && size >= 9) {
            // libheif 1.15 mirrors left-right when the axis bit is 1, top-bottom when 0.
            if (box[8] & 1) { ux[0] = -ux[0]; ux[1] = -ux[1]; } else { uy[0] = -uy[0]; uy[1] = -uy[1]; }
        }
    }
    static const int table[8][4] = {
        { 1, 0, 0, 1 }, { -1, 0, 0, 1 }, { -1, 0, 0, -1 }, { 1, 0, 0, -1 },
        { 0, 1, 1, 0 }, { 0, -1, 1, 0 }, { 0, -1, -1, 0 }, { 0, 1, -1, 0 },
    };
    for (int o = 0; o < 8; o++) {
        if (table[o][0] == ux[0] && table[o][1] == ux[1] && table[o][2] == uy[0] && table[o][3] == uy[1]) return o + 1;
    }
    return 0;
}

/// Whether the primary grid can be decoded a tile at a time, and its layout into `info` and
/// `heif`. 1 when tiled; 0 when it is to be decoded whole (the reason is libheif's to handle:
/// alpha, clap, tiles of other sizes or types, a tile with transforms of its own); -1 with
/// `message` when the grid cannot be drawn at all (its tiles do not cover its canvas).
static int plan_tiles(struct tessera_heif *heif, const struct meta_boxes *m, uint32_t grid, tessera_heif_info *info, char *message,
                      size_t message_bytes) {
    uint8_t head[12];
    size_t n = item_head(heif, m, grid, head, sizeof head);
    if (n < 8 || head[0] != 0 || ((head[1] & 1) && n < 12)) return 0;
    int wide = head[1] & 1;
    uint32_t rows = (uint32_t)head[2] + 1, columns = (uint32_t)head[3] + 1;
    uint32_t width = wide ? be32(head + 4) : be16(head + 4), height = wide ? be32(head + 8) : be16(head + 6);
    int orientation = grid_orientation(m, grid);
    if (info->has_alpha || orientation == 0 || width == 0 || height == 0) return 0;
    uint32_t count = rows * columns;  // at most 256 x 256: no overflow
    uint32_t *tiles = malloc(count * sizeof *tiles);
    if (tiles == NULL || item_references(m, grid, "dimg", tiles, count) != count) { free(tiles); return 0; }
    uint32_t tile_w = 0, tile_h = 0;
    char first_type[4] = { 0 };
    for (uint32_t t = 0; t < count; t++) {
        char type[4];
        uint32_t w = 0, h = 0, auxiliary;
        if (!item_type(m, tiles[t], type) || (memcmp(type, "hvc1", 4) != 0 && memcmp(type, "av01", 4) != 0) ||
            (t > 0 && memcmp(type, first_type, 4) != 0) || !item_ispe(m, tiles[t], &w, &h) || w == 0 || h == 0 ||
            (t > 0 && (w != tile_w || h != tile_h)) || items_referring(m, tiles[t], "auxl", &auxiliary, 1) > 0) {
            free(tiles);
            return 0;
        }
        memcpy(first_type, type, 4);
        tile_w = w;
        tile_h = h;
        uint16_t props[64];
        uint32_t props_count = item_associations(m, tiles[t], props, 64);
        if (props_count > 64) { free(tiles); return 0; }
        for (uint32_t i = 0; i < props_count; i++) {
            size_t at, size;
            if (!ipco_box(m, props[i] & 0x7FFF, &at, &size) || is_transform(m->data + at + 4)) { free(tiles); return 0; }
        }
    }
    // Every canvas pixel in a tile, and no tile past the canvas (libheif 1.15 would leave the
    // first unset and refuse the second).
    if ((uint64_t)columns * tile_w < width || (uint64_t)rows * tile_h < height ||
        (uint64_t)(columns - 1) * tile_w >= width || (uint64_t)(rows - 1) * tile_h >= height) {
        snprintf(message, message_bytes, "its grid of %u x %u tiles of %u x %u does not cover its %u x %u canvas exactly",
                 columns, rows, tile_w, tile_h, width, height);
        free(tiles);
        return -1;
    }
    heif->row_images = calloc(columns, sizeof *heif->row_images);
    if (heif->row_images == NULL) { free(tiles); return 0; }
    heif->tile_ids = tiles;
    heif->columns = columns;
    heif->rows = rows;
    heif->tile_width = tile_w;
    heif->tile_height = tile_h;
    heif->canvas_width = width;
    heif->canvas_height = height;
    info->tiled = 1;
    info->grid_columns = columns;
    info->grid_rows = rows;
    info->grid_tile_width = tile_w;
    info->grid_tile_height = tile_h;
    info->canvas_width = width;
    info->canvas_height = height;
    info->grid_orientation = orientation;
    return 1;
}

/// The coded data of item `id`, all its extents in order, into a new buffer of `*length`
/// bytes after `prefix` bytes left free (freed by the caller); at most `limit` bytes. NULL
/// with `message` when it cannot be read.
static uint8_t *item_data(struct tessera_heif *heif, const struct meta_boxes *m, uint32_t id, size_t prefix, size_t limit,
                          size_t *length, char *message, size_t message_bytes) {
    uint64_t offsets[16], lengths[16];
    uint32_t extents = 0;
    int in_idat = 0;
    if (!item_extents(m, id, offsets, lengths, 16, &extents, &in_idat) || extents > 16) {
        snprintf(message, message_bytes, "the data of tile item %u cannot be located", id);
        return NULL;
    }
    uint64_t source_bytes = in_idat ? m->idat_size : (uint64_t)heif->file_bytes, total = 0;
    for (uint32_t e = 0; e < extents; e++) {
        if (offsets[e] > source_bytes) { snprintf(message, message_bytes, "tile item %u starts past its data", id); return NULL; }
        if (lengths[e] == 0) lengths[e] = source_bytes - offsets[e];
        if (lengths[e] > source_bytes - offsets[e] || lengths[e] > limit - total) {
            snprintf(message, message_bytes, "tile item %u's data is longer than its file or than a tile can be", id);
            return NULL;
        }
        total += lengths[e];
    }
    uint8_t *out = malloc(prefix + (size_t)total + 16);
    if (out == NULL) { snprintf(message, message_bytes, "out of memory"); return NULL; }
    size_t at = prefix;
    for (uint32_t e = 0; e < extents; e++) {
        if (in_idat) {
            memcpy(out + at, m->data + m->idat + offsets[e], (size_t)lengths[e]);
        } else if (pread(heif->fd, out + at, (size_t)lengths[e], (off_t)offsets[e]) != (ssize_t)lengths[e]) {
            free(out);
            snprintf(message, message_bytes, "tile item %u's data cannot be read", id);
            return NULL;
        }
        at += (size_t)lengths[e];
    }
    *length = (size_t)total;
    return out;
}

static void put32_at(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v; }

/// A HEIF of one item, tile `id`, in memory: ftyp, meta (hdlr, pitm, iinf, iprp with the tile's
/// own properties, iloc) and mdat with its data. NULL with `message` when it cannot be made.
static uint8_t *tile_file(struct tessera_heif *heif, const struct meta_boxes *m, uint32_t id, size_t *file_length, char *message,
                          size_t message_bytes) {
    char type[4];
    uint16_t props[64];
    uint32_t props_count = item_associations(m, id, props, 64);
    if (!item_type(m, id, type) || props_count > 64) { snprintf(message, message_bytes, "tile item %u cannot be read", id); return NULL; }
    size_t props_bytes = 0;
    for (uint32_t i = 0; i < props_count; i++) {
        size_t at, size;
        if (!ipco_box(m, props[i] & 0x7FFF, &at, &size)) { snprintf(message, message_bytes, "a property of tile item %u is missing", id); return NULL; }
        props_bytes += size;
    }
    // ftyp 24; meta 12 + hdlr 33 + pitm 14 + iinf 14 + infe 21 + iprp 8 + ipco 8 + ipma 19 + 2 a
    // property + iloc 30; mdat 8.
    size_t ipma_bytes = 19 + 2 * (size_t)props_count;
    size_t meta_bytes = 12 + 33 + 14 + 14 + 21 + 8 + 8 + props_bytes + ipma_bytes + 30;
    size_t prefix = 24 + meta_bytes + 8, data_bytes = 0;
    // A tile's coded data is far smaller than its pixels; four bytes a pixel is refused.
    size_t limit = (size_t)heif->tile_width * heif->tile_height * 4 + (64u << 10);
    uint8_t *f = item_data(heif, m, id, prefix, limit, &data_bytes, message, message_bytes);
    if (f == NULL) return NULL;
    uint8_t *p = f;
    put32_at(p, 24); memcpy(p + 4, "ftyp", 4); memcpy(p + 8, memcmp(type, "av01", 4) == 0 ? "avif" : "heic", 4);
    put32_at(p + 12, 0); memcpy(p + 16, "mif1", 4); memcpy(p + 20, p + 8, 4);
    p += 24;
    put32_at(p, (uint32_t)meta_bytes); memcpy(p + 4, "meta", 4); put32_at(p + 8, 0);
    p += 12;
    memset(p, 0, 33); put32_at(p, 33); memcpy(p + 4, "hdlr", 4); memcpy(p + 16, "pict", 4);
    p += 33;
    put32_at(p, 14); memcpy(p + 4, "pitm", 4); put32_at(p + 8, 0); p[12] = 0; p[13] = 1;
    p += 14;
    put32_at(p, 14 + 21); memcpy(p + 4, "iinf", 4); put32_at(p + 8, 0); p[12] = 0; p[13] = 1;
    p += 14;
    put32_at(p, 21); memcpy(p + 4, "infe", 4); put32_at(p + 8, 2u << 24); p[12] = 0; p[13] = 1; p[14] = 0; p[15] = 0;
    memcpy(p + 16, type, 4); p[20] = 0;
    p += 21;
    put32_at(p, (uint32_t)(8 + 8 + props_bytes + ipma_bytes)); memcpy(p + 4, "iprp", 4);
    put32_at(p + 8, (uint32_t)(8 + props_bytes)); memcpy(p + 12, "ipco", 4);
    p += 16;
    for (uint32_t i = 0; i < props_count; i++) {
        size_t at, size;
        ipco_box(m, props[i] & 0x7FFF, &at, &size);
        memcpy(p, m->data + at, size);
        p += size;
    }
    put32_at(p, (uint32_t)ipma_bytes); memcpy(p + 4, "ipma", 4); put32_at(p + 8, 1);  // version 0, 15-bit indices
    put32_at(p + 12, 1); p[16] = 0; p[17] = 1; p[18] = (uint8_t)props_count;
    p += 19;
    for (uint32_t i = 0; i < props_count; i++) {
        uint16_t entry = (uint16_t)((props[i] & 0x8000) | (i + 1));
        p[0] = (uint8_t)(entry >> 8); p[1] = (uint8_t)entry;
        p += 2;
    }
    put32_at(p, 30); memcpy(p + 4, "iloc", 4); put32_at(p + 8, 0); p[12] = 0x44; p[13] = 0x00; p[14] = 0; p[15] = 1;
    p[16] = 0; p[17] = 1; p[18] = 0; p[19] = 0; p[20] = 0; p[21] = 1;
    put32_at(p + 22, (uint32_t)prefix); put32_at(p + 26, (uint32_t)data_bytes);
    p += 30;
    put32_at(p, (uint32_t)(8 + data_bytes)); memcpy(p + 4, "mdat", 4);
    *file_length = prefix + data_bytes;
    return f;
}

/// Whether the parameter sets in the data a decode of item `id` reads (a grid's tiles with
/// `with_parts`, and its alpha plane) say no larger picture than its boxes, and no more than
/// `planned_bits` a sample: the open planned by the boxes alone, reading no picture data (it
/// had read every item's data, the whole file, at each scan and decode), and libheif decodes by
/// the data (an SPS behind a 5,000-byte first unit made libde265 decode 4096 x 4096 behind a
/// declared 4096 x 64: 106 MiB at --max-memory 32M). Walked just before libheif reads the same
/// data. 0 with `message` when the decode is refused.
static int data_agrees(struct tessera_heif *heif, uint32_t id, int planned_bits, int with_parts, char *message,
                       size_t message_bytes) {
    static const uint32_t most = 4096;  // libheif 1.15 allows no more references an item
    const struct meta_boxes *m = heif->meta;
    if (m == NULL) { snprintf(message, message_bytes, "its item boxes (meta) were not kept"); return 0; }
    uint32_t *items = malloc(9 * most * sizeof *items), count = 0, parts[9] = { id }, part_count = 1;
    if (items == NULL) { snprintf(message, message_bytes, "out of memory"); return 0; }
    if (with_parts) part_count += items_referring(m, id, "auxl", parts + 1, 8);
    for (uint32_t p = 0; p < part_count; p++) {
        // A grid's tiles (an alpha plane of a tiled picture is a grid too).
        char type[4];
        uint32_t tiles = 1;
        if (with_parts && item_type(m, parts[p], type) && memcmp(type, "grid", 4) == 0) {
            tiles = item_references(m, parts[p], "dimg", items + count, most);
            if (tiles > most) tiles = most;
        } else {
            items[count] = parts[p];
        }
        count += tiles;
    }
    int agrees = 1, saved_bits = heif->coded_bits;
    qsort(items, count, sizeof *items, compare_ids);
    for (uint32_t i = 0; i < count && agrees; i++) {
        if (i > 0 && items[i] == items[i - 1]) continue;  // (a tile may be referenced many times)
        uint32_t box_w = 0, box_h = 0, data_w = 0, data_h = 0, shown_w, shown_h;
        heif->coded_bits = 0;
        heif->walk_data = 0;
        int boxed = coded_size(heif, m, items[i], &box_w, &box_h, &shown_w, &shown_h);
        heif->walk_data = 1;
        int walked = coded_size(heif, m, items[i], &data_w, &data_h, &shown_w, &shown_h);
        heif->walk_data = 0;
        if (!walked) {
            snprintf(message, message_bytes, "the coded data of item %u cannot be read through", items[i]);
            agrees = 0;
        } else if (boxed && (data_w > box_w || data_h > box_h)) {
            snprintf(message, message_bytes, "a parameter set in its data says its coded picture is %u x %u, where its boxes say %u x %u "
                     "(refused: libheif would decode the larger)", data_w, data_h, box_w, box_h);
            agrees = 0;
        } else if (heif->coded_bits > planned_bits) {
            snprintf(message, message_bytes, "a parameter set in its data codes %d bits a sample, where its boxes say %d "
                     "(refused: the decoder would allocate by the larger)", heif->coded_bits, planned_bits);
            agrees = 0;
        }
    }
    heif->coded_bits = saved_bits;
    free(items);
    return agrees;
}

// MARK: Open, decode

static void error_text(struct heif_error error, char *message, size_t message_bytes) {
    snprintf(message, message_bytes, "%s", error.message != NULL && error.message[0] ? error.message : "libheif error");
}

static tessera_heif *open_heif(int fd, uint64_t file_bytes, uint64_t open_limit, tessera_heif_info *info, char *message,
                               size_t message_bytes);

tessera_heif *tessera_heif_open(int fd, uint64_t file_bytes, uint64_t open_limit, tessera_heif_info *info, char *message,
                                size_t message_bytes) {
    // The open reads the boxes and a few small items, scattered over the first tens of KB: the
    // kernel's read-ahead would read ten times that (a scan of 200 phone HEICs read 121 MiB with
    // it). The decode that may follow reads whole items, in order: read-ahead is back for it.
    posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    tessera_heif *heif = open_heif(fd, file_bytes, open_limit, info, message, message_bytes);
    posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL);
    return heif;
}

static tessera_heif *open_heif(int fd, uint64_t file_bytes, uint64_t open_limit, tessera_heif_info *info, char *message,
                               size_t message_bytes) {
    memset(info, 0, sizeof *info);
    struct tessera_heif *heif = calloc(1, sizeof *heif);
    if (heif == NULL) { snprintf(message, message_bytes, "out of memory"); return NULL; }
    heif->fd = fd;
    heif->file_bytes = (int64_t)file_bytes;
    tessera_av1_register();
    heif->context = heif_context_alloc();
    if (heif->context == NULL) { free(heif); snprintf(message, message_bytes, "out of memory"); return NULL; }
    // One decoding thread: the render's workers are the parallelism, and each thread of
    // libheif's own would hold a decoder of its own.
    heif_context_set_max_decoding_threads(heif->context, 0);
    // No image wider or taller than this (a hostile header); the caller budgets the rest.
    heif_context_set_maximum_image_size_limit(heif->context, 1 << 15);
    if (!meta_acceptable(heif, open_limit, info, message, message_bytes)) { tessera_heif_close(heif); return NULL; }
    heif->opening = 1;
    struct heif_error error = heif_context_read_from_reader(heif->context, &reader, heif, NULL);
    heif->opening = 0;
    free(heif->skip);
    heif->skip = NULL;
    heif->skips = 0;
    if (heif->cut) { snprintf(message, message_bytes, "%s", cut_message); tessera_heif_close(heif); return NULL; }
    if (error.code != heif_error_Ok) { error_text(error, message, message_bytes); tessera_heif_close(heif); return NULL; }
    error = heif_context_get_primary_image_handle(heif->context, &heif->primary);
    if (error.code != heif_error_Ok) { error_text(error, message, message_bytes); tessera_heif_close(heif); return NULL; }
    info->width = (uint32_t)heif_image_handle_get_width(heif->primary);
    info->height = (uint32_t)heif_image_handle_get_height(heif->primary);
    info->has_alpha = heif_image_handle_has_alpha_channel(heif->primary);
    info->luma_bits = heif_image_handle_get_luma_bits_per_pixel(heif->primary);
    // What libheif will allocate, from the boxes rather than from 'ispe' (the handle's size).
    uint8_t *meta_data = NULL;
    struct meta_boxes meta;
    uint32_t primary = 0;
    char type[4] = { 0 };
    if (!read_meta(heif, &meta_data, &meta) || (primary = primary_item(&meta)) == 0 || !item_type(&meta, primary, type)) {
        free(meta_data);
        snprintf(message, message_bytes, "its item boxes (meta) cannot be read");
        tessera_heif_close(heif);
        return NULL;
    }
    info->has_transform = has_transform(&meta, primary);
    info->is_grid = heif->is_grid = memcmp(type, "grid", 4) == 0;
    if (!decodable_kind(&meta, primary, type, message, message_bytes)) {
        free(meta_data);
        tessera_heif_close(heif);
        return NULL;
    }
    char reason[160];
    if (!decode_size(heif, &meta, primary, &info->decode, reason, sizeof reason)) {
        free(meta_data);
        snprintf(message, message_bytes, "%s (refused: libheif would decode the larger)", reason);
        tessera_heif_close(heif);
        return NULL;
    }
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
    // An alpha plane (or depth map) is its own coded item, which libheif decodes beside the
    // image: one larger than the image it belongs to is refused like an ispe that lies.
    uint32_t auxiliary[8];
    uint32_t auxiliaries = items_referring(&meta, primary, "auxl", auxiliary, 8);
    for (uint32_t i = 0; i < auxiliaries; i++) {
        tessera_heif_size size = { 0 };
        uint32_t ispe_w, ispe_h, shown_w, shown_h;
        int read = 1;
        if (item_ispe(&meta, auxiliary[i], &ispe_w, &ispe_h)) {
            read = decode_size(heif, &meta, auxiliary[i], &size, reason, sizeof reason);
        } else if (!coded_size(heif, &meta, auxiliary[i], &size.width, &size.height, &shown_w, &shown_h)) {
            continue;  // no parameter set to decode it from: libheif cannot decode it either
        }
        uint32_t image_w = info->decode.width, image_h = info->decode.height;
        if (!read || differs(size.width > image_w ? size.width : image_w, image_w) ||
            differs(size.height > image_h ? size.height : image_h, image_h)) {
            if (read) snprintf(reason, sizeof reason, "its alpha or depth item is %u x %u, larger than its %u x %u image",
                               size.width, size.height, image_w, image_h);
            free(meta_data);
            snprintf(message, message_bytes, "%s (refused: libheif would decode it)", reason);
            tessera_heif_close(heif);
            return NULL;
        }
    }
    // The bits a sample the decoder allocates by: a parameter set's, where the container claims
    // fewer (an av1C and pixi of 8 bits over a 12-bit stream was admitted at half its cost, and
    // peaked at 67 MiB under --max-memory 52M before libheif refused its picture).
    if (heif->coded_bits > info->luma_bits) info->luma_bits = heif->coded_bits;
    heif->primary_id = primary;
    heif->planned_bits = info->luma_bits;
    // The largest thumbnail.
    heif_item_id ids[8];
    int thumbnails = heif_image_handle_get_list_of_thumbnail_IDs(heif->primary, ids, 8);
    for (int i = 0; i < thumbnails; i++) {
        struct heif_image_handle *thumbnail = NULL;
        if (heif_image_handle_get_thumbnail(heif->primary, ids[i], &thumbnail).code != heif_error_Ok) continue;
        int w = heif_image_handle_get_width(thumbnail), h = heif_image_handle_get_height(thumbnail);
        // A thumbnail whose coded size cannot be read or disagrees with its ispe is not used.
        // Its own bits a sample (its stream's where more than its boxes say): it is decoded
        // on its own, and may be deeper than the picture (a helper's 8192 x 8192 12-bit one
        // under an 8-bit grid peaked at 978 MiB under --max-memory 32M).
        tessera_heif_size size;
        int picture_bits = heif->coded_bits;
        heif->coded_bits = heif_image_handle_get_luma_bits_per_pixel(thumbnail);
        int read = decode_size(heif, &meta, ids[i], &size, reason, sizeof reason);
        int thumbnail_bits = heif->coded_bits;
        heif->coded_bits = picture_bits;
        if (!read) { heif_image_handle_release(thumbnail); continue; }
        // Nor one turned otherwise than the picture: a thumbnail without the primary's irot (an
        // editor that turned the picture and kept its thumbnail) drew a portrait sideways at the
        // sizes it covers. Their irot and imir must come to the same orientation (when either
        // has a clap, which libheif rounds its own way, their shapes must agree within a
        // quarter: a thumbnail rounded to whole pixels is still the picture).
        int primary_w = heif_image_handle_get_width(heif->primary), primary_h = heif_image_handle_get_height(heif->primary);
        double shape = primary_w > 0 && primary_h > 0 && w > 0 && h > 0 ? ((double)w * primary_h) / ((double)primary_w * h) : 0;
        int turned = grid_orientation(&meta, primary), thumbnail_turned = grid_orientation(&meta, ids[i]);
        if ((turned != 0 && thumbnail_turned != 0 && turned != thumbnail_turned) || shape < 0.8 || shape > 1.25) {
            info->thumbnail_passed_over = 1;
            heif_image_handle_release(thumbnail);
            continue;
        }
        if ((uint64_t)w * (uint64_t)h > (uint64_t)info->thumbnail_width * info->thumbnail_height) {
            info->thumbnail_decode = size;
            info->thumbnail_bits = thumbnail_bits;
            heif->thumbnail_id = ids[i];
            heif->planned_thumbnail_bits = thumbnail_bits > 8 ? thumbnail_bits : 8;
            if (heif->thumbnail != NULL) heif_image_handle_release(heif->thumbnail);
            heif->thumbnail = thumbnail;
            info->thumbnail_width = (uint32_t)w;
            info->thumbnail_height = (uint32_t)h;
        } else {
            heif_image_handle_release(thumbnail);
        }
    }
    if (heif->is_grid) {
        int tiled = plan_tiles(heif, &meta, primary, info, message, message_bytes);
        if (tiled < 0) { free(meta_data); tessera_heif_close(heif); return NULL; }
        if (tiled > 0) {
            heif->largest_tile = info->decode.tile_width > info->decode.tile_height ? info->decode.tile_width : info->decode.tile_height;
        }
    }
    // The boxes are read again at a decode: the tiles' (tiled), and the data's parameter sets
    // of what is decoded (data_agrees).
    heif->meta = malloc(sizeof meta);
    if (heif->meta == NULL) { free(meta_data); snprintf(message, message_bytes, "out of memory"); tessera_heif_close(heif); return NULL; }
    *heif->meta = meta;
    heif->meta_data = meta_data;
    // libheif refuses anything wider or taller than what was just budgeted (a second line,
    // should its reading of the boxes ever differ from the one above).
    uint32_t largest = info->decode.width > info->decode.height ? info->decode.width : info->decode.height;
    if (info->decode.tile_width > largest) largest = info->decode.tile_width;
    if (info->decode.tile_height > largest) largest = info->decode.tile_height;
    if (largest + 1 < (1u << 15)) heif_context_set_maximum_image_size_limit(heif->context, (int)largest + 1);
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
                        info->exif_orientation = tessera_exif_read(tiff, tiff_bytes, &info->date_taken);
                    } else {
                        memmove(exif + 6, tiff, tiff_bytes);
                        memcpy(exif, "Exif\0\0", 6);
                        info->exif_orientation = tessera_exif_read(exif, tiff_bytes + 6, &info->date_taken);
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

/// The planes of a decoded `image` (YCbCr, grey or planar RGB) into `planes`.
static int fill_planes(struct heif_image *image, tessera_heif_planes *planes, char *message, size_t message_bytes) {
    memset(planes, 0, sizeof *planes);
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


int tessera_heif_decode(tessera_heif *heif, int thumbnail, tessera_heif_planes *planes, char *message, size_t message_bytes) {
    struct heif_image_handle *handle = thumbnail && heif->thumbnail != NULL ? heif->thumbnail : heif->primary;
    int of_thumbnail = handle == heif->thumbnail;
    if (!data_agrees(heif, of_thumbnail ? heif->thumbnail_id : heif->primary_id,
                     of_thumbnail ? heif->planned_thumbnail_bits : heif->planned_bits, 1, message, message_bytes)) return -1;
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
    if (heif->cut) { snprintf(message, message_bytes, "%s", cut_message); return -1; }
    if (error.code != heif_error_Ok) { error_text(error, message, message_bytes); return -1; }
    return fill_planes(heif->image, planes, message, message_bytes);
}

void tessera_heif_release_image(tessera_heif *heif) {
    if (heif->image != NULL) { heif_image_release(heif->image); heif->image = NULL; }
}

int tessera_heif_decode_tile(tessera_heif *heif, uint32_t column, uint32_t row, tessera_heif_planes *planes, char *message,
                             size_t message_bytes) {
    if (heif->tile_ids == NULL || column >= heif->columns || row >= heif->rows) {
        snprintf(message, message_bytes, "no tile %u, %u in this grid", column, row);
        return -1;
    }
    if (heif->row_images[column] != NULL) { heif_image_release(heif->row_images[column]); heif->row_images[column] = NULL; }
    size_t length = 0;
    uint32_t tile = heif->tile_ids[row * heif->columns + column];
    if (!data_agrees(heif, tile, heif->planned_bits, 0, message, message_bytes)) return -1;
    uint8_t *file = tile_file(heif, heif->meta, tile, &length, message, message_bytes);
    if (file == NULL) return -1;
    struct heif_context *context = heif_context_alloc();
    struct heif_image_handle *handle = NULL;
    struct heif_decoding_options *options = heif_decoding_options_alloc();
    struct heif_error error = { heif_error_Memory_allocation_error, heif_suberror_Unspecified, "out of memory" };
    if (context != NULL && options != NULL) {
        heif_context_set_max_decoding_threads(context, 0);
        // No larger than the tiles budgeted at open (their coded sizes, read from the boxes).
        heif_context_set_maximum_image_size_limit(context, (int)heif->largest_tile + 1);
        options->convert_hdr_to_8bit = 1;
        error = heif_context_read_from_memory_without_copy(context, file, length, NULL);
        if (error.code == heif_error_Ok) error = heif_context_get_primary_image_handle(context, &handle);
        // Planar RGB, as libheif 1.15 converts every tile of a grid it assembles.
        if (error.code == heif_error_Ok)
            error = heif_decode_image(handle, &heif->row_images[column], heif_colorspace_undefined, heif_chroma_undefined, options);
    }
    int result = -1;
    if (error.code != heif_error_Ok) {
        error_text(error, message, message_bytes);
    } else {
        result = fill_planes(heif->row_images[column], planes, message, message_bytes);
        // libheif pastes a tile's decoded pixels from its corner: one smaller than its place
        // would leave canvas pixels unset.
        uint32_t need_w = heif->canvas_width - column * heif->tile_width, need_h = heif->canvas_height - row * heif->tile_height;
        if (need_w > heif->tile_width) need_w = heif->tile_width;
        if (need_h > heif->tile_height) need_h = heif->tile_height;
        if (result == 0 && (planes->width < (int32_t)need_w || planes->height < (int32_t)need_h)) {
            snprintf(message, message_bytes, "tile %u, %u decodes to %d x %d, smaller than its %u x %u place in the grid", column, row,
                     planes->width, planes->height, need_w, need_h);
            result = -1;
        }
    }
    if (handle != NULL) heif_image_handle_release(handle);
    if (options != NULL) heif_decoding_options_free(options);
    if (context != NULL) heif_context_free(context);
    free(file);
    return result;
}

void tessera_heif_release_tiles(tessera_heif *heif) {
    for (uint32_t c = 0; heif->row_images != NULL && c < heif->columns; c++) {
        if (heif->row_images[c] != NULL) { heif_image_release(heif->row_images[c]); heif->row_images[c] = NULL; }
    }
}

void tessera_heif_close(tessera_heif *heif) {
    if (heif == NULL) return;
    tessera_heif_release_image(heif);
    tessera_heif_release_tiles(heif);
    free(heif->row_images);
    free(heif->tile_ids);
    free(heif->meta);
    free(heif->meta_data);
    free(heif->skip);
    if (heif->thumbnail != NULL) heif_image_handle_release(heif->thumbnail);
    if (heif->primary != NULL) heif_image_handle_release(heif->primary);
    if (heif->context != NULL) heif_context_free(heif->context);
    free(heif->icc);
    free(heif);
}
