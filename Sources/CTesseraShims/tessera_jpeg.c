// tessera_jpeg.c — setjmp-guarded libjpeg calls. See tessera_shims.h for why this exists.
//
// Pattern: every exported function that calls into libjpeg starts with
//     if (setjmp(x->err.jump)) return TESSERA_JPEG_ERROR;
// and error_exit longjmps back there after copying libjpeg's message into the handle.
// No Swift frame ever sits between setjmp and longjmp: Swift calls in, C returns a status.
// The only calls back into Swift (the source and sink callbacks) return normally and report
// failure by return value; libjpeg is then stopped with ERREXIT from C.
#include "tessera_private.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>
#include <jerror.h>

static tessera_jpeg_decoder *decoder_of(j_common_ptr cinfo) {
    return (tessera_jpeg_decoder *)((char *)cinfo->client_data - offsetof(tessera_jpeg_decoder, client));
}

static void tessera_error_exit(j_common_ptr cinfo) {
    tessera_error *err = (tessera_error *)cinfo->err;
    if (!err->io_failed || err->message[0] == 0) {
        (*cinfo->err->format_message)(cinfo, err->message);
    }
    longjmp(err->jump, 1);
}

// Stray bytes before the end-of-image marker that are padding, not damage (tessera_emit_message).
#define TESSERA_JPEG_END_PADDING_BYTES 64

static void tessera_emit_message(j_common_ptr cinfo, int msg_level) {
    tessera_error *err = (tessera_error *)cinfo->err;
    if (msg_level < 0) {  // a warning: corrupt data libjpeg worked around
        if (cinfo->err->msg_code == JWRN_HIT_MARKER) {
            // The entropy-coded data stopped early (truncated, or a header claiming more rows
            // than the file holds). A photo's decoder that allows it (tessera_jpeg_decoder_allow_
            // early_end) goes on: libjpeg leaves every block after this one at zero, so a
            // baseline photo's rest is grey and a progressive one's later scans are missing
            // (the whole picture, less sharp), as image viewers and libvips show such a file.
            // The cost is no more than a whole file's: the header's blocks are at most 8 a byte
            // of the file (min_data_bytes). Once only: a cut file's data stops once (then the end
            // of image), and a file whose scans stop early one after another is damaged past
            // drawing (a fuzzed file of 500 such scans took 0.9 s, where failing took 0.01 s).
            // Any other decode fails at once.
            if (cinfo->is_decompressor) {
                tessera_jpeg_decoder *d = decoder_of(cinfo);
                // Past the rows drawn (tessera_jpeg_decoder_finish): a file cut short there
                // lost nothing that was drawn; a marker where data should be is damage, counted
                // below, and libjpeg reads no further.
                if (d->finishing && d->ended_while_finishing) return;
                if (d->finishing) goto counted;
                // Damage inside the data of a sequential file with restart markers: the data met
                // a restart marker early, or bytes that are no marker at all (a bit flipped in
                // one). libjpeg leaves the blocks to the next restart at zero and resynchronises
                // there, and the picture goes on: damage, counted below, however often it comes
                // (a sequential file is one pass over its blocks, a scan a component at most). A
                // camera photo with a damaged stretch (restart interval 4) was a placeholder,
                // where image viewers show it whole but for a band. Not a progressive file: its
                // scans, each a pass over the picture, would be drawn on however little of them
                // the file holds (a helper's 300 scans of damaged restart intervals in 30 MB of
                // padding took 127 s before the scan limit refused them).
                j_decompress_ptr dinfo = (j_decompress_ptr)cinfo;
                int marker = dinfo->unread_marker;
                if (d->allow_early_end && dinfo->restart_interval > 0 && !dinfo->progressive_mode
                    && ((marker >= JPEG_RST0 && marker <= JPEG_RST0 + 7) || marker < 0xC0)) goto counted;
                if (d->allow_early_end && !d->stopped_early) {
                    d->stopped_early = 1;
                    d->ended_early = 1;
                    return;
                }
            }
            snprintf(err->message, sizeof err->message, "image data ends early (truncated or corrupt JPEG)");
            err->io_failed = 0;
            longjmp(err->jump, 1);
        }
    counted:;
        // The image data itself is damaged (bit rot, a bad copy): libjpeg decodes on, and what
        // it draws from there may be garbage. The others (an unknown JFIF version, an Adobe
        // transform code) say nothing of the pixels. The message kept is the first warning's,
        // or the first damage's when an earlier warning said nothing of the pixels.
        // A few stray bytes before the end of image are what some encoders leave (padding after
        // the last MCU; camera modules and webcams are known to), every pixel whole: a warning,
        // but no damage, or a mosaic would leave every such photo of a library out. Damage
        // mostly leaves more (a flipped bit mid-file left 190 bytes, a run of noise 189,616),
        // though a few bytes inserted mid-file may leave fewer: told apart only by the pixels.
        int code = cinfo->err->msg_code;
        int padding = code == JWRN_EXTRANEOUS_DATA && cinfo->err->msg_parm.i[1] == JPEG_EOI
                      && cinfo->err->msg_parm.i[0] < TESSERA_JPEG_END_PADDING_BYTES;
        int damage = !padding
                     && (code == JWRN_ARITH_BAD_CODE || code == JWRN_BOGUS_PROGRESSION || code == JWRN_EXTRANEOUS_DATA
                         || code == JWRN_HIT_MARKER || code == JWRN_HUFF_BAD_CODE || code == JWRN_MUST_RESYNC
                         || code == JWRN_NOT_SEQUENTIAL || code == JWRN_JPEG_EOF);
        if (err->warnings == 0 || (damage && err->corrupt_warnings == 0)) (*cinfo->err->format_message)(cinfo, err->message);
        err->warnings++;
        if (damage) err->corrupt_warnings++;
        cinfo->err->num_warnings++;
    }
    // trace messages (msg_level >= 0) are dropped: the library never prints.
}

static void tessera_output_message(j_common_ptr cinfo) { (void)cinfo; }

static void tessera_error_init(tessera_error *err) {
    jpeg_std_error(&err->pub);
    err->pub.error_exit = tessera_error_exit;
    err->pub.emit_message = tessera_emit_message;
    err->pub.output_message = tessera_output_message;
    err->message[0] = 0;
    err->warnings = 0;
    err->corrupt_warnings = 0;
    err->io_failed = 0;
}

// MARK: Decoder


// The coefficient arrays' failures (a spill file that cannot be read or written, a limit
// passed): the message is theirs, and error_exit keeps it.
static void coefficients_fail(j_common_ptr cinfo, const char *message) {
    tessera_error *err = (tessera_error *)cinfo->err;
    snprintf(err->message, sizeof err->message, "%s", message);
    err->io_failed = 1;
    cinfo->err->msg_code = JERR_FILE_READ;
    (*cinfo->err->error_exit)(cinfo);
}

static void src_init(j_decompress_ptr cinfo) { (void)cinfo; }

static boolean src_fill(j_decompress_ptr cinfo) {
    tessera_jpeg_decoder *d = decoder_of((j_common_ptr)cinfo);
    long n = d->source(d->context, d->buffer, d->buffer_bytes);
    if (n < 0) {
        d->err.io_failed = 1;
        snprintf(d->err.message, sizeof d->err.message, "read error");
        ERREXIT(cinfo, JERR_FILE_READ);
    }
    if (n == 0) {
        if (d->allow_early_end || d->finishing) {
            // As libjpeg's own stdio source does: an end of image, after which the entropy
            // decoder warns (JWRN_HIT_MARKER, above) and draws the rest grey. Asked for again
            // (the end came inside a marker segment), it gives the same two bytes again.
            if (d->finishing) {
                d->ended_while_finishing = 1;
            } else {
                d->ended_early = 1;
            }
            d->buffer[0] = 0xFF;
            d->buffer[1] = JPEG_EOI;
            d->src.next_input_byte = d->buffer;
            d->src.bytes_in_buffer = 2;
            return TRUE;
        }
        // Any other decode (a mosaic's target, a part's JPEG): a truncated file is an error.
        snprintf(d->err.message, sizeof d->err.message, "file ends early (truncated JPEG)");
        d->err.io_failed = 1;
        ERREXIT(cinfo, JERR_INPUT_EOF);
    }
    d->src.next_input_byte = d->buffer;
    d->src.bytes_in_buffer = (size_t)n;
    return TRUE;
}

static void src_skip(j_decompress_ptr cinfo, long count) {
    tessera_jpeg_decoder *d = decoder_of((j_common_ptr)cinfo);
    if (count <= 0) return;
    while ((size_t)count > d->src.bytes_in_buffer) {
        count -= (long)d->src.bytes_in_buffer;
        (void)src_fill(cinfo);  // errors longjmp out
    }
    d->src.next_input_byte += count;
    d->src.bytes_in_buffer -= (size_t)count;
}

static void src_term(j_decompress_ptr cinfo) { (void)cinfo; }

// libjpeg calls this between units of input (an iMCU row or a marker), and once for every
// jpeg_read_scanlines call. A raised cancel flag stops the decode here. A file with more scans
// than any real photo has, or whose scans would cover far more blocks than its bytes can
// honestly describe (empty scans repeated: each costs a pass over the image), is stopped here,
// at the start of the scan that crosses the line.
static void scan_limit_monitor(j_common_ptr cinfo) {
    j_decompress_ptr dinfo = (j_decompress_ptr)cinfo;
    tessera_jpeg_decoder *d = decoder_of((j_common_ptr)cinfo);
    tessera_error *err = (tessera_error *)cinfo->err;
    if (tessera_flag_is_raised(d->cancel_flag)) {
        snprintf(err->message, sizeof err->message, "cancelled");
        err->io_failed = 0;
        longjmp(err->jump, 1);
    }
    if (dinfo->input_scan_number > TESSERA_JPEG_MAX_SCANS) {
        snprintf(err->message, sizeof err->message,
                 "more than %d scans (a progressive photo has about 10): refused as a decoding bomb",
                 TESSERA_JPEG_MAX_SCANS);
        err->io_failed = 0;
        longjmp(err->jump, 1);
    }
    if (dinfo->input_scan_number != d->counted_scan) {
        d->counted_scan = dinfo->input_scan_number;
        for (int i = 0; i < dinfo->comps_in_scan; i++) {
            const jpeg_component_info *comp = dinfo->cur_comp_info[i];
            if (comp != NULL) d->work_blocks += (uint64_t)comp->width_in_blocks * comp->height_in_blocks;
        }
        if (d->work_limit_blocks != 0 && d->work_blocks > d->work_limit_blocks) {
            snprintf(err->message, sizeof err->message,
                     "its %d scans ask for more decoding than a file of its size can hold "
                     "(%.0f million blocks): refused as a decoding bomb",
                     dinfo->input_scan_number, (double)d->work_blocks / 1e6);
            err->io_failed = 0;
            longjmp(err->jump, 1);
        }
    }
}

tessera_jpeg_decoder *tessera_jpeg_decoder_create(tessera_jpeg_source source, void *context,
                                                  size_t buffer_bytes, long max_memory_bytes) {
    tessera_jpeg_decoder *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    d->buffer = malloc(buffer_bytes);
    if (d->buffer == NULL) { free(d); return NULL; }
    d->buffer_bytes = buffer_bytes;
    d->source = source;
    d->context = context;
    d->coefficients.memory_limit = max_memory_bytes;
    tessera_error_init(&d->err);
    d->cinfo.err = &d->err.pub;
    if (setjmp(d->err.jump)) {
        free(d->buffer);
        free(d);
        return NULL;
    }
    jpeg_create_decompress(&d->cinfo);
    d->created = 1;
    d->client.coefficients = &d->coefficients;
    d->client.fail = coefficients_fail;
    d->cinfo.client_data = &d->client;
    tessera_coefficients_install(&d->cinfo);
    d->progress.progress_monitor = scan_limit_monitor;
    d->cinfo.progress = &d->progress;
    d->src.init_source = src_init;
    d->src.fill_input_buffer = src_fill;
    d->src.skip_input_data = src_skip;
    d->src.resync_to_restart = jpeg_resync_to_restart;
    d->src.term_source = src_term;
    d->src.next_input_byte = NULL;
    d->src.bytes_in_buffer = 0;
    d->cinfo.src = &d->src;
    return d;
}

// MARK: The markers kept
//
// libjpeg's jpeg_save_markers keeps every APP1 and APP2 segment of a file, each up to the 64 KiB
// a segment holds, however many there are: a file of 3,000 padding segments took its own size
// in memory (197 MB at --max-memory 64M; a mosaic target of them was OOM-killed, a helper's
// attack). Only two are read: the first EXIF APP1, and the APP2 chunks of an ICC profile (at
// most TESSERA_COLOR_MAKING_BYTES of them, the largest profile taken). These processors keep
// just those, in libjpeg's marker list (where jpeg_read_icc_profile looks), and skip the rest.
// The source never suspends (src_fill returns data, an end of image, or an error), so a segment
// is read whole in one call.

static int next_marker_byte(j_decompress_ptr cinfo) {
    if (cinfo->src->bytes_in_buffer == 0) (void)(*cinfo->src->fill_input_buffer)(cinfo);
    cinfo->src->bytes_in_buffer--;
    return *cinfo->src->next_input_byte++;
}

static void read_marker_bytes(j_decompress_ptr cinfo, JOCTET *out, size_t count) {
    while (count > 0) {
        if (cinfo->src->bytes_in_buffer == 0) (void)(*cinfo->src->fill_input_buffer)(cinfo);
        size_t take = cinfo->src->bytes_in_buffer < count ? cinfo->src->bytes_in_buffer : count;
        memcpy(out, cinfo->src->next_input_byte, take);
        cinfo->src->next_input_byte += take;
        cinfo->src->bytes_in_buffer -= take;
        out += take;
        count -= take;
    }
}

static boolean keep_wanted_marker(j_decompress_ptr cinfo) {
    tessera_jpeg_decoder *d = decoder_of((j_common_ptr)cinfo);
    int marker = cinfo->unread_marker;
    long length = (long)next_marker_byte(cinfo) << 8;
    length += next_marker_byte(cinfo);
    length -= 2;
    if (length <= 0) return TRUE;
    // The segment's start says what it is.
    JOCTET head[14];
    size_t head_bytes = length < (long)sizeof head ? (size_t)length : sizeof head;
    read_marker_bytes(cinfo, head, head_bytes);
    int exif = marker == JPEG_APP0 + 1 && head_bytes >= 6 && memcmp(head, "Exif\0\0", 6) == 0 && !d->kept_exif;
    int icc = marker == JPEG_APP0 + 2 && head_bytes >= 14 && memcmp(head, "ICC_PROFILE\0", 12) == 0
              && d->kept_icc_bytes + (uint64_t)length <= TESSERA_COLOR_MAKING_BYTES + 256 * 14;
    if (!exif && !icc) {
        if (length > (long)head_bytes) (*cinfo->src->skip_input_data)(cinfo, length - (long)head_bytes);
        return TRUE;
    }
    jpeg_saved_marker_ptr kept = (jpeg_saved_marker_ptr)(*cinfo->mem->alloc_large)(
        (j_common_ptr)cinfo, JPOOL_IMAGE, sizeof(struct jpeg_marker_struct) + (size_t)length);
    kept->next = NULL;
    kept->marker = (UINT8)marker;
    kept->original_length = (unsigned int)length;
    kept->data_length = (unsigned int)length;
    kept->data = (JOCTET *)(kept + 1);
    memcpy(kept->data, head, head_bytes);
    read_marker_bytes(cinfo, kept->data + head_bytes, (size_t)length - head_bytes);
    if (cinfo->marker_list == NULL) {
        cinfo->marker_list = kept;
    } else {
        jpeg_saved_marker_ptr last = cinfo->marker_list;
        while (last->next != NULL) last = last->next;
        last->next = kept;
    }
    if (exif) d->kept_exif = 1;
    if (icc) d->kept_icc_bytes += (uint64_t)length;
    return TRUE;
}

static int is_exif_app1(const jpeg_saved_marker_ptr m) {
    return m->marker == JPEG_APP0 + 1 && m->data_length >= 6 &&
           memcmp(m->data, "Exif\0\0", 6) == 0;
}

int tessera_jpeg_decoder_read_header(tessera_jpeg_decoder *d, tessera_jpeg_header *header) {
    if (setjmp(d->err.jump)) return TESSERA_JPEG_ERROR;
    d->kept_exif = 0;
    d->kept_icc_bytes = 0;
    jpeg_set_marker_processor(&d->cinfo, JPEG_APP0 + 1, keep_wanted_marker);
    jpeg_set_marker_processor(&d->cinfo, JPEG_APP0 + 2, keep_wanted_marker);
    int status = jpeg_read_header(&d->cinfo, TRUE);
    if (status != JPEG_HEADER_OK) {
        snprintf(d->err.message, sizeof d->err.message, "no image in JPEG file");
        return TESSERA_JPEG_ERROR;
    }
    header->width = d->cinfo.image_width;
    header->height = d->cinfo.image_height;
    header->components = d->cinfo.num_components;
    switch (d->cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE: header->color_model = TESSERA_COLOR_GRAY; break;
    case JCS_CMYK:
    case JCS_YCCK: header->color_model = TESSERA_COLOR_CMYK; break;
    case JCS_YCbCr:
    case JCS_RGB: header->color_model = TESSERA_COLOR_RGB; break;
    default:
        snprintf(d->err.message, sizeof d->err.message,
                 "unsupported JPEG colour space (%d components)", d->cinfo.num_components);
        return TESSERA_JPEG_ERROR;
    }
    header->progressive = jpeg_has_multiple_scans(&d->cinfo) ? 1 : 0;
    header->arithmetic = d->cinfo.arith_code ? 1 : 0;
    header->stored_rgb = d->cinfo.jpeg_color_space == JCS_RGB ? 1 : 0;
    // Every block of every component costs at least one bit of Huffman-coded data (a DC code,
    // or a DC refinement bit, is at least one bit long), so a file shorter than this cannot
    // hold the picture its header claims. Arithmetic coding has no such floor.
    uint64_t blocks = 0, coefficient_bytes = 0, dc_bytes = 0;
    for (int ci = 0; ci < d->cinfo.num_components; ci++) {
        jpeg_component_info *comp = &d->cinfo.comp_info[ci];
        blocks += (uint64_t)comp->width_in_blocks * comp->height_in_blocks;
        uint64_t padded_w = (comp->width_in_blocks + comp->h_samp_factor - 1) / comp->h_samp_factor * comp->h_samp_factor;
        uint64_t padded_h = (comp->height_in_blocks + comp->v_samp_factor - 1) / comp->v_samp_factor * comp->v_samp_factor;
        coefficient_bytes += padded_w * padded_h * sizeof(JBLOCK);
        // tessera_dc.c keeps 2 bytes a block, and 16 more for chroma subsampled 2 x 2.
        int reduced = comp->h_samp_factor * 2 == d->cinfo.max_h_samp_factor &&
                      comp->v_samp_factor * 2 == d->cinfo.max_v_samp_factor;
        dc_bytes += padded_w * padded_h * (reduced ? 18 : 2);
    }
    header->dc_decoder_bytes = dc_bytes;
    header->min_data_bytes = d->cinfo.arith_code ? 0 : blocks / 8;
    header->coefficient_bytes = coefficient_bytes;
    header->adobe_inverted = d->cinfo.saw_Adobe_marker ? 1 : 0;
    header->exif_orientation = 0;
    header->date_taken = 0;
    for (jpeg_saved_marker_ptr m = d->cinfo.marker_list; m != NULL; m = m->next) {
        if (is_exif_app1(m)) {
            header->exif_orientation = tessera_exif_read(m->data, m->data_length, &header->date_taken);
            break;
        }
    }
    return TESSERA_JPEG_OK;
}

const uint8_t *tessera_jpeg_decoder_icc_profile(tessera_jpeg_decoder *d, size_t *length) {
    *length = 0;
    if (d->icc == NULL) {
        JOCTET *icc = NULL;
        unsigned int icc_length = 0;
        if (setjmp(d->err.jump)) return NULL;
        if (!jpeg_read_icc_profile(&d->cinfo, &icc, &icc_length) || icc == NULL) return NULL;
        d->icc = icc;
        d->icc_length = icc_length;
    }
    *length = d->icc_length;
    return d->icc;
}

int tessera_jpeg_decoder_scaled_size(tessera_jpeg_decoder *d, int scale_num,
                                     uint32_t *out_width, uint32_t *out_height) {
    if (setjmp(d->err.jump)) return TESSERA_JPEG_ERROR;
    d->cinfo.scale_num = (unsigned int)scale_num;
    d->cinfo.scale_denom = 8;
    jpeg_calc_output_dimensions(&d->cinfo);
    *out_width = d->cinfo.output_width;
    *out_height = d->cinfo.output_height;
    return TESSERA_JPEG_OK;
}

int tessera_jpeg_decoder_start(tessera_jpeg_decoder *d, uint32_t *out_width,
                               uint32_t *out_height, int32_t *out_components) {
    if (setjmp(d->err.jump)) return TESSERA_JPEG_ERROR;
    if (d->cinfo.jpeg_color_space == JCS_CMYK || d->cinfo.jpeg_color_space == JCS_YCCK) {
        d->cinfo.out_color_space = JCS_CMYK;
    } else {
        d->cinfo.out_color_space = JCS_RGB;  // grayscale is expanded by libjpeg
    }
    // Whole-image buffers (multi-scan files) go where tessera_jpeg_decoder_set_coefficient_storage
    // said (tessera_coefficients.c); the row buffers of a decode are proportional to the width.
    jpeg_start_decompress(&d->cinfo);
    *out_width = d->cinfo.output_width;
    *out_height = d->cinfo.output_height;
    *out_components = d->cinfo.output_components;
    return TESSERA_JPEG_OK;
}

int tessera_jpeg_decoder_read_rows(tessera_jpeg_decoder *d, uint8_t *rows, size_t stride,
                                   int max_rows) {
    if (setjmp(d->err.jump)) return TESSERA_JPEG_ERROR;
    JSAMPROW pointers[16];
    int total = 0;
    while (total < max_rows && d->cinfo.output_scanline < d->cinfo.output_height) {
        int want = max_rows - total;
        if (want > 16) want = 16;
        for (int i = 0; i < want; i++) pointers[i] = rows + (size_t)(total + i) * stride;
        JDIMENSION got = jpeg_read_scanlines(&d->cinfo, pointers, (JDIMENSION)want);
        if (got == 0) break;
        total += (int)got;
    }
    return total;
}

int tessera_jpeg_decoder_finish(tessera_jpeg_decoder *d) {
    if (setjmp(d->err.jump)) {
        d->finishing = 0;
        return TESSERA_JPEG_ERROR;
    }
    // A multi-scan file was read to its end before its first row: nothing is left to check.
    if (jpeg_input_complete(&d->cinfo)) return TESSERA_JPEG_OK;
    d->finishing = 1;
    // The entropy-coded data of the rows not drawn (a crop's last rows) is decoded, not
    // transformed: a Huffman stream knocked out of step by a flipped bit shows where it meets
    // the next marker (libjpeg's fast path decodes a bad code as zero, silently, so that is
    // where most damage is seen).
    // All but the last row are skipped: libjpeg-turbo skips to the very end by declaring the
    // end of image reached, reading nothing. The last row is decoded into a row of its own.
    JDIMENSION left = d->cinfo.output_height - d->cinfo.output_scanline;
    if (left > 1) (void)jpeg_skip_scanlines(&d->cinfo, left - 1);
    if (d->cinfo.output_scanline < d->cinfo.output_height) {
        size_t bytes = (size_t)d->cinfo.output_width * (size_t)d->cinfo.output_components;
        JSAMPROW row = (JSAMPROW)(*d->cinfo.mem->alloc_small)((j_common_ptr)&d->cinfo, JPOOL_IMAGE, bytes);
        while (d->cinfo.output_scanline < d->cinfo.output_height) {
            if (jpeg_read_scanlines(&d->cinfo, &row, 1) == 0) break;
        }
    }
    jpeg_finish_decompress(&d->cinfo);
    d->finishing = 0;
    return TESSERA_JPEG_OK;
}

long tessera_jpeg_decoder_corrupt_warnings(const tessera_jpeg_decoder *d) { return d->err.corrupt_warnings; }

void tessera_jpeg_decoder_set_cancel_flag(tessera_jpeg_decoder *d, const int *flag) { d->cancel_flag = flag; }

void tessera_jpeg_decoder_allow_early_end(tessera_jpeg_decoder *d, int on) { d->allow_early_end = on != 0; }

int tessera_jpeg_decoder_ended_early(const tessera_jpeg_decoder *d) { return d->ended_early; }

void tessera_jpeg_decoder_set_work_limit(tessera_jpeg_decoder *d, uint64_t blocks) { d->work_limit_blocks = blocks; }

void tessera_jpeg_decoder_set_coefficient_storage(tessera_jpeg_decoder *d, long memory_limit,
                                                  const tessera_spill *spill) {
    d->coefficients.memory_limit = memory_limit;
    if (spill != NULL) {
        d->spill = *spill;
        d->coefficients.spill = &d->spill;
    } else {
        d->coefficients.spill = NULL;
    }
}

int tessera_jpeg_decoder_coefficients_spilled(const tessera_jpeg_decoder *d) { return d->coefficients.spilled; }

int tessera_jpeg_decoder_coefficient_plan(tessera_jpeg_decoder *d, int scale_num, uint64_t *stored,
                                          uint64_t *windows, uint64_t *minimum) {
    if (setjmp(d->err.jump)) return TESSERA_JPEG_ERROR;
    d->cinfo.scale_num = (unsigned int)scale_num;
    d->cinfo.scale_denom = 8;
    jpeg_calc_output_dimensions(&d->cinfo);
    tessera_coefficients_plan(&d->cinfo, stored, windows, minimum);
    return TESSERA_JPEG_OK;
}

void tessera_jpeg_decoder_set_coefficient_compaction(tessera_jpeg_decoder *d, int on) { d->coefficients.compact = on != 0; }

uint64_t tessera_jpeg_decoder_coefficient_bytes(const tessera_jpeg_decoder *d) { return d->coefficients.total_bytes; }

uint64_t tessera_jpeg_decoder_coefficient_allocated_bytes(const tessera_jpeg_decoder *d) {
    return d->coefficients.allocated_bytes;
}

int tessera_jpeg_decoder_source_failed(const tessera_jpeg_decoder *d) { return d->err.io_failed; }

long tessera_jpeg_decoder_warnings(const tessera_jpeg_decoder *d) { return d->err.warnings; }

const char *tessera_jpeg_decoder_message(const tessera_jpeg_decoder *d) { return d->err.message; }

void tessera_jpeg_decoder_destroy(tessera_jpeg_decoder *d) {
    if (d == NULL) return;
    if (d->created) jpeg_destroy_decompress(&d->cinfo);  // never calls error_exit
    free(d->icc);
    free(d->buffer);
    free(d);
}

// MARK: Encoder

struct tessera_jpeg_encoder {
    struct jpeg_compress_struct cinfo;
    tessera_error err;
    struct jpeg_destination_mgr dest;
    tessera_jpeg_sink sink;
    void *context;
    uint8_t *buffer;
    size_t buffer_bytes;
    size_t memory_bytes;  // memory output: length of the last finished image
    size_t initial_bytes; // memory output: the buffer's size to return to between images
    int created;
    unsigned int dpi;     // JFIF density in dots per inch; 0: libjpeg's default (aspect 1:1)
    char comment[128];    // a COM marker written after the JFIF header of every image; "" none
};

void tessera_jpeg_encoder_set_marks(tessera_jpeg_encoder *e, unsigned int dpi, const char *comment) {
    e->dpi = dpi > 65535 ? 65535 : dpi;
    snprintf(e->comment, sizeof e->comment, "%s", comment ? comment : "");
}

// The density, then (once jpeg_start_compress has written SOI and JFIF) the comment.
static void apply_density(tessera_jpeg_encoder *e) {
    if (e->dpi > 0) {
        e->cinfo.density_unit = 1;
        e->cinfo.X_density = (UINT16)e->dpi;
        e->cinfo.Y_density = (UINT16)e->dpi;
    }
}

static void write_comment(tessera_jpeg_encoder *e) {
    if (e->comment[0] != 0) {
        jpeg_write_marker(&e->cinfo, JPEG_COM, (const JOCTET *)e->comment, (unsigned int)strlen(e->comment));
    }
}

static void dest_init(j_compress_ptr cinfo) {
    tessera_jpeg_encoder *e = (tessera_jpeg_encoder *)cinfo->client_data;
    e->dest.next_output_byte = e->buffer;
    e->dest.free_in_buffer = e->buffer_bytes;
    e->memory_bytes = 0;
}

static boolean dest_empty(j_compress_ptr cinfo) {
    tessera_jpeg_encoder *e = (tessera_jpeg_encoder *)cinfo->client_data;
    if (e->sink == NULL) {
        // Memory output: the whole buffer is full; double it and go on after the old end.
        size_t used = e->buffer_bytes;
        uint8_t *grown = realloc(e->buffer, used * 2);
        if (grown == NULL) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 11);
        e->buffer = grown;
        e->buffer_bytes = used * 2;
        e->dest.next_output_byte = grown + used;
        e->dest.free_in_buffer = used;
        return TRUE;
    }
    if (e->sink(e->context, e->buffer, e->buffer_bytes) != 0) {
        e->err.io_failed = 1;
        snprintf(e->err.message, sizeof e->err.message, "write error");
        ERREXIT(cinfo, JERR_FILE_WRITE);
    }
    e->dest.next_output_byte = e->buffer;
    e->dest.free_in_buffer = e->buffer_bytes;
    return TRUE;
}

static void dest_term(j_compress_ptr cinfo) {
    tessera_jpeg_encoder *e = (tessera_jpeg_encoder *)cinfo->client_data;
    size_t count = e->buffer_bytes - e->dest.free_in_buffer;
    if (e->sink == NULL) {
        e->memory_bytes = count;
        return;
    }
    if (count > 0 && e->sink(e->context, e->buffer, count) != 0) {
        e->err.io_failed = 1;
        snprintf(e->err.message, sizeof e->err.message, "write error");
        ERREXIT(cinfo, JERR_FILE_WRITE);
    }
}

tessera_jpeg_encoder *tessera_jpeg_encoder_create(tessera_jpeg_sink sink, void *context,
                                                  size_t buffer_bytes) {
    tessera_jpeg_encoder *e = calloc(1, sizeof *e);
    if (e == NULL) return NULL;
    e->buffer = malloc(buffer_bytes);
    if (e->buffer == NULL) { free(e); return NULL; }
    e->buffer_bytes = buffer_bytes;
    e->initial_bytes = buffer_bytes;
    e->sink = sink;
    e->context = context;
    tessera_error_init(&e->err);
    e->cinfo.err = &e->err.pub;
    if (setjmp(e->err.jump)) {
        free(e->buffer);
        free(e);
        return NULL;
    }
    jpeg_create_compress(&e->cinfo);
    e->created = 1;
    e->cinfo.client_data = e;
    e->dest.init_destination = dest_init;
    e->dest.empty_output_buffer = dest_empty;
    e->dest.term_destination = dest_term;
    e->cinfo.dest = &e->dest;
    return e;
}

int tessera_jpeg_encoder_start(tessera_jpeg_encoder *e, uint32_t width, uint32_t height,
                               int quality, int h_sampling, int v_sampling,
                               unsigned int restart_interval) {
    if (setjmp(e->err.jump)) return TESSERA_JPEG_ERROR;
    e->cinfo.image_width = width;
    e->cinfo.image_height = height;
    e->cinfo.input_components = 3;
    e->cinfo.in_color_space = JCS_RGB;
    jpeg_set_defaults(&e->cinfo);
    jpeg_set_quality(&e->cinfo, quality, TRUE);
    e->cinfo.optimize_coding = FALSE;   // would need a pass over the whole image
    e->cinfo.smoothing_factor = 0;
    e->cinfo.comp_info[0].h_samp_factor = h_sampling;
    e->cinfo.comp_info[0].v_samp_factor = v_sampling;
    e->cinfo.comp_info[1].h_samp_factor = 1;
    e->cinfo.comp_info[1].v_samp_factor = 1;
    e->cinfo.comp_info[2].h_samp_factor = 1;
    e->cinfo.comp_info[2].v_samp_factor = 1;
    e->cinfo.restart_interval = restart_interval;
    apply_density(e);
    jpeg_start_compress(&e->cinfo, TRUE);
    write_comment(e);
    return TESSERA_JPEG_OK;
}

int tessera_jpeg_encoder_restart(tessera_jpeg_encoder *e, uint32_t width, uint32_t height) {
    if (setjmp(e->err.jump)) return TESSERA_JPEG_ERROR;
    if (e->sink == NULL && e->buffer_bytes > 2 * e->initial_bytes) {
        // One busy image grew the buffer: give it back, so that a long run of encoders does
        // not keep the largest image each one ever made.
        uint8_t *smaller = realloc(e->buffer, e->initial_bytes);
        if (smaller != NULL) {
            e->buffer = smaller;
            e->buffer_bytes = e->initial_bytes;
        }
    }
    // Every parameter set by tessera_jpeg_encoder_start survives jpeg_finish_compress; only the
    // size changes. (jpeg_set_defaults and jpeg_set_quality again would rebuild the tables.)
    e->cinfo.image_width = width;
    e->cinfo.image_height = height;
    jpeg_start_compress(&e->cinfo, TRUE);
    write_comment(e);
    return TESSERA_JPEG_OK;
}

int tessera_jpeg_encoder_write_rows(tessera_jpeg_encoder *e, const uint8_t *rows,
                                    size_t stride, uint32_t row_count) {
    if (setjmp(e->err.jump)) return TESSERA_JPEG_ERROR;
    JSAMPROW pointers[16];
    uint32_t done = 0;
    // A Deep Zoom tile's rows are a narrow column of the stripe's (768 bytes, then a jump of
    // the stripe's width): each row starts a new page, where the processor's prefetcher does
    // not follow, so the colour converter waited on memory for every row (perf: it took twice
    // the time per pixel it takes on whole rows). The next batch's rows are asked for ahead.
    size_t row_bytes = (size_t)e->cinfo.image_width * 3;
    int prefetch = stride > row_bytes && row_bytes <= 8192;
    uint32_t prefetched = 0;  // rows [0, prefetched) asked for
    while (done < row_count) {
        uint32_t want = row_count - done;
        if (want > 16) want = 16;
        for (uint32_t i = 0; i < want; i++) {
            pointers[i] = (JSAMPROW)(rows + (size_t)(done + i) * stride);
        }
        if (prefetch) {
            // Two batches ahead (the first two batches at once, on entry).
            uint32_t ahead_end = done + want + 32 < row_count ? done + want + 32 : row_count;
            for (; prefetched < ahead_end; prefetched++) {
                const uint8_t *row = rows + (size_t)prefetched * stride;
                for (size_t offset = 0; offset < row_bytes; offset += 64) __builtin_prefetch(row + offset, 0, 3);
                __builtin_prefetch(row + row_bytes - 1, 0, 3);
            }
        }
        JDIMENSION wrote = jpeg_write_scanlines(&e->cinfo, pointers, want);
        if (wrote == 0) {
            snprintf(e->err.message, sizeof e->err.message,
                     "jpeg_write_scanlines accepted no rows (more rows than the image height?)");
            return TESSERA_JPEG_ERROR;
        }
        done += wrote;
    }
    return TESSERA_JPEG_OK;
}

int tessera_jpeg_encoder_finish(tessera_jpeg_encoder *e) {
    if (setjmp(e->err.jump)) return TESSERA_JPEG_ERROR;
    jpeg_finish_compress(&e->cinfo);
    return TESSERA_JPEG_OK;
}

const char *tessera_jpeg_encoder_message(const tessera_jpeg_encoder *e) { return e->err.message; }

size_t tessera_jpeg_encoder_memory_output(const tessera_jpeg_encoder *e, const uint8_t **bytes) {
    *bytes = e->buffer;
    return e->memory_bytes;
}

int tessera_jpeg_encoder_sink_failed(const tessera_jpeg_encoder *e) { return e->err.io_failed; }

void tessera_jpeg_encoder_destroy(tessera_jpeg_encoder *e) {
    if (e == NULL) return;
    if (e->created) jpeg_destroy_compress(&e->cinfo);
    free(e->buffer);
    free(e);
}
