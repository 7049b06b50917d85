// tessera_exif.c — reads the EXIF Orientation tag and the date a photo was taken with libexif.
// A shim because exif_data_get_entry is a macro, which Swift cannot import.
#include "tessera_shims.h"

#include <libexif/exif-data.h>

// "YYYY:MM:DD HH:MM:SS" (the EXIF form) as the number YYYYMMDDhhmmss, or 0 when the text is not
// a plausible date (any byte out of place, a month 13, a year before 1800...).
static int64_t exif_date_number(const ExifEntry *entry) {
    if (entry == NULL || entry->format != EXIF_FORMAT_ASCII || entry->data == NULL) return 0;
    return tessera_exif_date_text(entry->data, entry->size);
}

int64_t tessera_exif_date_text(const uint8_t *t, size_t length) {
    if (length < 19) return 0;
    static const char pattern[] = "dddd:dd:dd dd:dd:dd";
    int64_t number = 0;
    for (int i = 0; i < 19; i++) {
        if (pattern[i] == 'd') {
            if (t[i] < '0' || t[i] > '9') return 0;
            number = number * 10 + (t[i] - '0');
        } else if (t[i] != pattern[i] && !(i == 10 && t[i] == 'T')) {
            return 0;
        }
    }
    int64_t year = number / 10000000000LL, month = number / 100000000 % 100, day = number / 1000000 % 100;
    int64_t hour = number / 10000 % 100, minute = number / 100 % 100, second = number % 100;
    if (year < 1800 || year > 9999 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
        return 0;
    }
    return number;
}

int tessera_exif_orientation(const uint8_t *app1, size_t length) { return tessera_exif_read(app1, length, NULL); }

int tessera_exif_read(const uint8_t *app1, size_t length, int64_t *date_taken) {
    if (date_taken != NULL) *date_taken = 0;
    // A JPEG's APP1 holds at most 64 KiB; PNG's eXIf, WebP's EXIF and HEIF's Exif item may hold
    // more (a camera's maker notes), each capped at 1 MiB by its reader. libexif reads the
    // first 64 KiB of any of them, where IFD0 and its Orientation sit: refusing the whole
    // block drew such a photo unturned (a helper's finding).
    if (app1 == NULL || length < 6 || length > (1u << 20) + 6) return 0;
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
    if (date_taken != NULL) {
        // When the picture was taken (DateTimeOriginal), else when it was digitised, else the
        // file's DateTime (which editors rewrite).
        int64_t date = exif_date_number(exif_content_get_entry(data->ifd[EXIF_IFD_EXIF], EXIF_TAG_DATE_TIME_ORIGINAL));
        if (date == 0) date = exif_date_number(exif_content_get_entry(data->ifd[EXIF_IFD_EXIF], EXIF_TAG_DATE_TIME_DIGITIZED));
        if (date == 0) date = exif_date_number(exif_content_get_entry(data->ifd[EXIF_IFD_0], EXIF_TAG_DATE_TIME));
        *date_taken = date;
    }
    exif_data_unref(data);
    return orientation;
}
