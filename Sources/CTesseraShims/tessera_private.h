// tessera_private.h — what the shim's C files share and Swift never sees: the libjpeg
// decoder's own struct and its error manager (the row store and coefficient arrays it uses are
// CTesseraCodec's, tessera_codec_internal.h).
#ifndef TESSERA_PRIVATE_H
#define TESSERA_PRIVATE_H

#include <setjmp.h>
#include <stdio.h>
#include <jpeglib.h>

#include "tessera_shims.h"

#include "tessera_codec_internal.h"

/// Registers the AV1 decoder plugin that runs dav1d on one thread (tessera_av1.c), once; before
/// the first HEIF context.
void tessera_av1_register(void);

// MARK: Errors and the decoder

typedef struct {
    struct jpeg_error_mgr pub;   // must stay first: libjpeg hands back &pub
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
    long warnings;
    long corrupt_warnings;       // of those, the ones that say the image data is damaged
    int io_failed;               // the source, sink or spill callback reported failure
} tessera_error;

struct tessera_jpeg_decoder {
    struct jpeg_decompress_struct cinfo;
    tessera_coefficients_client client;  // cinfo.client_data points here
    tessera_error err;
    struct jpeg_source_mgr src;
    struct jpeg_progress_mgr progress;
    tessera_jpeg_source source;
    void *context;
    uint8_t *buffer;
    size_t buffer_bytes;
    tessera_coefficients coefficients;
    tessera_spill spill;
    uint64_t work_limit_blocks;  // 0: none (see tessera_jpeg_decoder_set_work_limit)
    uint64_t work_blocks;        // blocks the scans so far cover
    int counted_scan;            // the last scan counted
    const int *cancel_flag;      // NULL: none
    int allow_early_end;         // data that ends early is drawn as far as it goes (see src_fill)
    int ended_early;             // it did: the file ended, or a marker came where data should be
    int stopped_early;           // a scan's data stopped at a marker (allowed once)
    int finishing;               // tessera_jpeg_decoder_finish is reading past the rows drawn
    int ended_while_finishing;   // and the file ended there
    int created;
    int kept_exif;               // the EXIF APP1 is in the marker list (keep_wanted_marker)
    uint64_t kept_icc_bytes;     // the ICC profile's APP2 bytes in it
    uint8_t *icc;                // the APP2 ICC profile, once asked for (malloc'd by libjpeg)
    unsigned int icc_length;
};

#endif
