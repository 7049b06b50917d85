// shim.h — the libexif headers, for the CExif system-library module.
#include <libexif/exif-data.h>
