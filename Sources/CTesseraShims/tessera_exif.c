// tessera_exif.c — reads the EXIF Orientation tag with libexif.
// A shim because exif_data_get_entry is a macro, which Swift cannot import.
#include "tessera_shims.h"

#include <libexif/exif-data.h>

int tessera_exif_orientation(const uint8_t *app1, size_t length) {
    if (app1 == NULL || length < 6 || length > 0xFFFF) return 0;
    ExifData *data = exif_data_new();
    if (data == NULL) return 0;
    // Read what is stored: "following the specification" would let libexif rewrite entries.
    exif_data_unset_option(data, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
    exif_data_load_data(data, app1, (unsigned int)length);
    int orientation = 0;
    ExifEntry *entry = exif_content_get_entry(data->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
    if (entry != NULL && entry->format == EXIF_FORMAT_SHORT && entry->components >= 1 &&
        entry->data != NULL && entry->size >= 2) {
        orientation = exif_get_short(entry->data, exif_data_get_byte_order(data));
    }
    exif_data_unref(data);
    return orientation;
}
