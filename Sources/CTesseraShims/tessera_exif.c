// tessera_exif.c — reads the EXIF Orientation tag and the date a photo was taken, from IFD0
// and the EXIF IFD of the TIFF structure behind "Exif\0\0", with every offset checked.
#include "tessera_shims.h"

#include <string.h>

// "YYYY:MM:DD HH:MM:SS" (the EXIF form) as the number YYYYMMDDhhmmss, or 0 when the text is not
// a plausible date (any byte out of place, a month 13, a year before 1800...).
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

/// A TIFF structure in memory (EXIF's), read with bounds: each number inside `length`.
struct exif_tiff {
    const uint8_t *data;
    size_t length;
    int little;
};

static uint32_t exif_number(const struct exif_tiff *t, size_t at, int bytes) {
    if (at > t->length || (size_t)bytes > t->length - at) return 0;
    uint32_t value = 0;
    for (int k = 0; k < bytes; k++) value |= (uint32_t)t->data[at + (size_t)(t->little ? k : bytes - 1 - k)] << (8 * k);
    return value;
}

/// The 12-byte entry of `tag` in the IFD at `ifd`: its offset in the structure, 0 when none.
static size_t exif_entry(const struct exif_tiff *t, uint32_t ifd, uint16_t tag) {
    if (ifd < 8 || (size_t)ifd + 2 > t->length) return 0;
    uint32_t count = exif_number(t, ifd, 2);
    for (uint32_t i = 0; i < count; i++) {
        size_t at = (size_t)ifd + 2 + 12 * (size_t)i;
        if (at + 12 > t->length) return 0;
        if (exif_number(t, at, 2) == tag) return at;
    }
    return 0;
}

static int64_t exif_date(const struct exif_tiff *t, uint32_t ifd, uint16_t tag) {
    size_t entry = exif_entry(t, ifd, tag);
    if (entry == 0 || exif_number(t, entry + 2, 2) != 2) return 0;  // ASCII
    uint32_t count = exif_number(t, entry + 4, 4), at = exif_number(t, entry + 8, 4);
    if (count < 19 || at > t->length || t->length - at < 19) return 0;  // 19 bytes never fit inline
    return tessera_exif_date_text(t->data + at, 19);
}

int tessera_exif_read(const uint8_t *app1, size_t length, int64_t *date_taken) {
    if (date_taken != NULL) *date_taken = 0;
    // A JPEG's APP1 holds at most 64 KiB; PNG's eXIf, WebP's EXIF and HEIF's Exif item may hold
    // more (a camera's maker notes), each capped at 1 MiB by its reader. Only IFD0 and the EXIF
    // IFD it points at are read, each once: libexif loaded every IFD any IFD points at, and a
    // 65 KB APP1 of IFDs pointing 2,700 times at one another cost 3.2 s of CPU a read (a
    // helper's finding; 10.8 s as a mosaic's target).
    static const uint8_t header[6] = { 'E', 'x', 'i', 'f', 0, 0 };
    if (app1 == NULL || length < 6 + 8 || length > (1u << 20) + 6 || memcmp(app1, header, 6) != 0) return 0;
    struct exif_tiff t = { app1 + 6, length - 6, app1[6] == 'I' && app1[7] == 'I' };
    if (!t.little && !(app1[6] == 'M' && app1[7] == 'M')) return 0;
    if (exif_number(&t, 2, 2) != 42) return 0;
    uint32_t ifd0 = exif_number(&t, 4, 4);
    int orientation = 0;
    size_t entry = exif_entry(&t, ifd0, 0x0112);
    if (entry != 0 && exif_number(&t, entry + 2, 2) == 3 && exif_number(&t, entry + 4, 4) >= 1) {
        orientation = (int)exif_number(&t, entry + 8, 2);
    }
    if (date_taken != NULL) {
        // When the picture was taken (DateTimeOriginal), else when it was digitised, else the
        // file's DateTime (which editors rewrite).
        size_t pointer = exif_entry(&t, ifd0, 0x8769);
        uint32_t exif = pointer != 0 ? exif_number(&t, pointer + 8, 4) : 0;
        int64_t date = exif_date(&t, exif, 0x9003);
        if (date == 0) date = exif_date(&t, exif, 0x9004);
        if (date == 0) date = exif_date(&t, ifd0, 0x0132);
        *date_taken = date;
    }
    return orientation;
}
