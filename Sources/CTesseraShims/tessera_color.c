// tessera_color.c — colour profiles to sRGB with Little CMS: one transform per profile (the
// caller caches them), applied to RGB pixels in place.
//
// A shim because lcms2's pixel formats (TYPE_RGB_8) are macros built from shifts that Swift
// cannot import. Transforms are made with cmsFLAGS_NOCACHE, so one transform serves every
// worker at once (lcms2 keeps no per-call state in it then).
//
// Every transform is made in a Little CMS context of its own whose allocator counts (a memory
// plugin): what reading the profile and building the transform may take is capped
// (TESSERA_COLOR_MAKING_BYTES), checked before each allocation, so a hostile profile (a 16 MB
// lookup table compressed into a 140 KB PNG took 96 MB) fails to convert instead of growing
// the process, and what a finished transform keeps is known (tessera_color_transform_bytes).
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lcms2.h>
#include <lcms2_plugin.h>

#include "tessera_shims.h"

static void quiet(cmsContext context, cmsUInt32Number code, const char *text) {
    (void)context; (void)code; (void)text;
}

/// A context's account: bytes held now, and the most it may hold.
typedef struct {
    _Atomic size_t held;
    size_t limit;
    _Atomic int refused;  // an allocation was refused for the limit
} color_budget;

/// Each allocation is preceded by its size and its account (16 bytes: lcms2 expects memory
/// aligned for doubles).
typedef struct {
    size_t size;
    color_budget *budget;
} allocation_header;

static void *budget_malloc(cmsContext context, cmsUInt32Number size) {
    color_budget *budget = context != NULL ? cmsGetContextUserData(context) : NULL;
    if (budget != NULL) {
        size_t held = atomic_fetch_add(&budget->held, (size_t)size);
        if (held + size > budget->limit) {
            atomic_fetch_sub(&budget->held, (size_t)size);
            atomic_store(&budget->refused, 1);
            return NULL;
        }
    }
    allocation_header *header = malloc(sizeof(allocation_header) + size);
    if (header == NULL) {
        if (budget != NULL) atomic_fetch_sub(&budget->held, (size_t)size);
        return NULL;
    }
    header->size = size;
    header->budget = budget;
    return header + 1;
}

static void budget_free(cmsContext context, void *pointer) {
    (void)context;
    if (pointer == NULL) return;
    allocation_header *header = (allocation_header *)pointer - 1;
    if (header->budget != NULL) atomic_fetch_sub(&header->budget->held, header->size);
    free(header);
}

static void *budget_realloc(cmsContext context, void *pointer, cmsUInt32Number size) {
    if (pointer == NULL) return budget_malloc(context, size);
    allocation_header *header = (allocation_header *)pointer - 1;
    void *moved = budget_malloc(context, size);
    if (moved == NULL) return NULL;
    memcpy(moved, pointer, header->size < size ? header->size : size);
    budget_free(context, pointer);
    return moved;
}

static cmsPluginMemHandler budget_plugin = {
    { cmsPluginMagicNumber, 2000, cmsPluginMemHandlerSig, NULL },
    budget_malloc, budget_free, budget_realloc, NULL, NULL, NULL
};

/// A transform with the context it lives in and that context's account.
typedef struct {
    cmsHTRANSFORM transform;
    cmsContext context;
    color_budget *budget;
} color_transform;

/// A context whose allocations `budget` counts, or NULL.
static cmsContext budget_context(color_budget **budget_out) {
    color_budget *budget = calloc(1, sizeof *budget);
    if (budget == NULL) return NULL;
    budget->limit = TESSERA_COLOR_MAKING_BYTES;
    cmsContext context = cmsCreateContext(&budget_plugin, budget);
    if (context == NULL) { free(budget); return NULL; }
    cmsSetLogErrorHandlerTHR(context, quiet);
    *budget_out = budget;
    return context;
}

static void free_context(cmsContext context, color_budget *budget) {
    cmsDeleteContext(context);
    free(budget);
}

static cmsHPROFILE srgb_profile(cmsContext context) {
    return cmsCreate_sRGBProfileTHR(context);
}

/// Whether `profile` is sRGB in all but name: its colorants within 0.0015 of sRGB's (D50
/// adapted) and each curve within half a level of the sRGB curve. Converting such a photo
/// would only add rounding, so it is drawn as is (and stays byte-identical to an untagged one).
static int is_srgb_equivalent(cmsContext context, cmsHPROFILE profile) {
    if (cmsGetColorSpace(profile) != cmsSigRgbData || !cmsIsMatrixShaper(profile)) return 0;
    cmsHPROFILE srgb = srgb_profile(context);
    if (srgb == NULL) return 0;
    static const cmsTagSignature colorants[3] = { cmsSigRedColorantTag, cmsSigGreenColorantTag, cmsSigBlueColorantTag };
    static const cmsTagSignature curves[3] = { cmsSigRedTRCTag, cmsSigGreenTRCTag, cmsSigBlueTRCTag };
    int same = 1;
    for (int i = 0; i < 3 && same; i++) {
        const cmsCIEXYZ *a = cmsReadTag(profile, colorants[i]);
        const cmsCIEXYZ *b = cmsReadTag(srgb, colorants[i]);
        if (a == NULL || b == NULL || fabs(a->X - b->X) > 0.0015 || fabs(a->Y - b->Y) > 0.0015 || fabs(a->Z - b->Z) > 0.0015) {
            same = 0;
            break;
        }
        const cmsToneCurve *ca = cmsReadTag(profile, curves[i]);
        const cmsToneCurve *cb = cmsReadTag(srgb, curves[i]);
        if (ca == NULL || cb == NULL) { same = 0; break; }
        for (int step = 0; step <= 64; step++) {
            float x = (float)step / 64.0f;
            if (fabsf(cmsEvalToneCurveFloat(ca, x) - cmsEvalToneCurveFloat(cb, x)) > 0.5f / 255.0f) { same = 0; break; }
        }
    }
    cmsCloseProfile(srgb);
    return same;
}

/// The transform from `input` (closed here) to sRGB in `context`, which it then owns with
/// `budget`; NULL (and the context freed) when it cannot be made.
static void *transform_to_srgb_as(cmsContext context, color_budget *budget, cmsHPROFILE input, cmsUInt32Number input_format,
                                  cmsUInt32Number intent, char *message, size_t message_bytes);

static void *transform_to_srgb(cmsContext context, color_budget *budget, cmsHPROFILE input, char *message,
                               size_t message_bytes) {
    return transform_to_srgb_as(context, budget, input, TYPE_RGB_8, INTENT_RELATIVE_COLORIMETRIC, message, message_bytes);
}

/// As transform_to_srgb, from pixels in `input_format` (RGB or CMYK, 8 bits), at `intent`.
/// The most processing elements a profile's floating-point tables (D2Bx) may chain: a real
/// one has a few (curves, a lookup table, a matrix). Little CMS prefers those tables and runs
/// the whole chain at each point of the 8-bit transform it precomputes: a 879 KB profile of
/// 3,000 chained tables took 18 s of one core to make a CMYK transform (3.8 s for RGB).
#define TESSERA_COLOR_MAX_STAGES 16

/// Whether a floating-point table of `input` chains more elements than a profile needs.
static int too_elaborate(cmsHPROFILE input, cmsUInt32Number *stages) {
    static const cmsTagSignature tags[4] = { cmsSigDToB0Tag, cmsSigDToB1Tag, cmsSigDToB2Tag, cmsSigDToB3Tag };
    for (int i = 0; i < 4; i++) {
        if (!cmsIsTag(input, tags[i])) continue;
        const cmsPipeline *pipeline = cmsReadTag(input, tags[i]);
        if (pipeline == NULL) continue;
        *stages = cmsPipelineStageCount(pipeline);
        if (*stages > TESSERA_COLOR_MAX_STAGES) return 1;
    }
    return 0;
}

static void *transform_to_srgb_as(cmsContext context, color_budget *budget, cmsHPROFILE input, cmsUInt32Number input_format,
                                  cmsUInt32Number intent, char *message, size_t message_bytes) {
    cmsUInt32Number stages = 0;
    if (too_elaborate(input, &stages)) {
        cmsCloseProfile(input);
        free_context(context, budget);
        snprintf(message, message_bytes, "its ICC profile chains %u processing elements in a table (a profile needs a few; "
                 "at most %d are read)", (unsigned)stages, TESSERA_COLOR_MAX_STAGES);
        return NULL;
    }
    cmsHPROFILE output = srgb_profile(context);
    if (output == NULL) {
        cmsCloseProfile(input);
        free_context(context, budget);
        snprintf(message, message_bytes, "out of memory making the sRGB profile");
        return NULL;
    }
    cmsHTRANSFORM transform = cmsCreateTransformTHR(context, input, input_format, output, TYPE_RGB_8, intent, cmsFLAGS_NOCACHE);
    cmsCloseProfile(input);
    cmsCloseProfile(output);
    // A transform Little CMS finished after one of its allocations was refused may have fallen
    // back to a path of its own, or be incomplete (a 70-point lookup table then differed by
    // up to 127 levels): refused as a whole, so a profile converts exactly or not at all.
    if (transform != NULL && atomic_load(&budget->refused)) {
        cmsDeleteTransform(transform);
        transform = NULL;
    }
    color_transform *made = transform != NULL ? malloc(sizeof *made) : NULL;
    if (made == NULL) {
        if (transform != NULL) cmsDeleteTransform(transform);
        int over = atomic_load(&budget->refused);
        free_context(context, budget);
        snprintf(message, message_bytes, over ? "its ICC profile needs more memory to convert than a profile may take (%d MiB)"
                                              : "Little CMS cannot convert this profile to sRGB", TESSERA_COLOR_MAKING_BYTES >> 20);
        return NULL;
    }
    made->transform = transform;
    made->context = context;
    made->budget = budget;
    return made;
}

/// The most segments a curve of a floating-point table may have, and the most Little CMS may
/// allocate to read one such table: a real profile's curves have a few segments and its tables
/// a few hundred KB. Little CMS walks a curve's segments at every point it evaluates (a profile
/// of 6,000-segment curves took 1.3 s of a core a photo), and 2.14 frees pointers it never set
/// when an allocation for a curve set is refused under the profile's memory cap (a crash, from
/// a 4 KB PNG; and from a 25 KB one of 64-segment curves of 4,096 samples each).
#define TESSERA_COLOR_MAX_SEGMENTS 64
#define TESSERA_COLOR_MAX_TABLE_BYTES (2u << 20)

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/// What Little CMS allocates to read the curve set at `element`, the profile's bytes running to
/// `end` (its own position table's sizes are not trusted: Little CMS reads by the offsets), or
/// UINT64_MAX when a curve has more than TESSERA_COLOR_MAX_SEGMENTS segments.
static uint64_t curve_set_bytes(const uint8_t *element, const uint8_t *end) {
    if (end - element < 12) return 0;
    uint32_t curves = be16(element + 8);
    uint64_t bytes = 0;
    for (uint32_t c = 0; c < curves && 20 + (size_t)c * 8 <= (size_t)(end - element); c++) {
        uint32_t offset = be32(element + 12 + c * 8);
        if (offset > (size_t)(end - element) || (size_t)(end - element) - offset < 12) continue;
        const uint8_t *curve = element + offset;
        if (be32(curve) != 0x63757266) continue;  // 'curf'
        uint32_t segments = be16(curve + 8);
        if (segments > TESSERA_COLOR_MAX_SEGMENTS) return UINT64_MAX;
        bytes += 4096 * 2 + (uint64_t)segments * 96;  // the curve's 16-bit table, its segments
        const uint8_t *at = curve + 12 + (segments > 0 ? (size_t)(segments - 1) * 4 : 0);  // past the break points
        for (uint32_t k = 0; k < segments && at <= end && end - at >= 12; k++) {
            if (be32(at) == 0x73616D66) {  // 'samf': its samples, read and then copied
                uint32_t samples = be32(at + 8);
                bytes += (uint64_t)samples * 8;
                at += 12 + (uint64_t)samples * 4 > (uint64_t)(end - at) ? (size_t)(end - at) : 12 + (size_t)samples * 4;
            } else {  // 'parf': 4 or 5 parameters by its function type
                at += 12 + (be16(at + 8) == 0 ? 4 : 5) * 4;
            }
        }
    }
    return bytes;
}

/// What Little CMS allocates for the lookup table at `element`: its grid's points times its
/// outputs, in floats (UINT64_MAX past any table).
static uint64_t clut_bytes(const uint8_t *element, const uint8_t *end) {
    if (end - element < 28) return 0;
    uint32_t inputs = be16(element + 8), outputs = be16(element + 10);
    uint64_t points = 1;
    for (uint32_t i = 0; i < inputs && i < 16; i++) {
        points *= element[12 + i];
        if (points > (1u << 30)) return UINT64_MAX;
    }
    return points * outputs * 4;
}

/// Why the floating-point tables (D2Bx, B2Dx) of the profile `icc` are more than a profile
/// needs, read from its bytes before Little CMS reads them; NULL when they are not. Every
/// bound is the profile's end, not the sizes its tables declare, which Little CMS ignores.
static const char *tables_too_elaborate(const uint8_t *icc, size_t length, uint32_t *elements) {
    const uint8_t *end = icc + length;
    uint32_t count = be32(icc + 128);
    if (count > (length - 132) / 12) count = (uint32_t)((length - 132) / 12);
    for (uint32_t t = 0; t < count; t++) {
        const uint8_t *entry = icc + 132 + (size_t)t * 12;
        uint32_t signature = be32(entry), offset = be32(entry + 4);
        int table = (signature >= 0x44324230 && signature <= 0x44324233) || (signature >= 0x42324430 && signature <= 0x42324433);
        if (!table || offset > length || length - offset < 16) continue;
        const uint8_t *tag = icc + offset;
        if (be32(tag) != 0x6D706574) continue;  // 'mpet'
        *elements = be32(tag + 12);
        if (*elements > TESSERA_COLOR_MAX_STAGES) return "stages";
        uint64_t bytes = 0;
        for (uint32_t e = 0; e < *elements && 24 + (size_t)e * 8 <= (size_t)(end - tag); e++) {
            uint32_t at = be32(tag + 16 + e * 8);
            if (at > (size_t)(end - tag) || (size_t)(end - tag) - at < 12) continue;
            const uint8_t *element = tag + at;
            uint32_t type = be32(element);
            uint64_t more = type == 0x63767374 ? curve_set_bytes(element, end) : type == 0x636C7574 ? clut_bytes(element, end) : 0;
            if (more == UINT64_MAX && type == 0x63767374) return "curves";
            bytes = more > UINT64_MAX - bytes ? UINT64_MAX : bytes + more;
        }
        if (bytes > TESSERA_COLOR_MAX_TABLE_BYTES) return "bytes";
    }
    return NULL;
}

/// An embedded profile opened in a context of its own (`*context`, `*budget`), when it is a
/// profile of `space` (named `space_name` in the message): NULL with the reason otherwise, and
/// nothing left to free.
static cmsHPROFILE open_profile(const uint8_t *icc, size_t length, cmsColorSpaceSignature space, const char *space_name,
                                cmsContext *context, color_budget **budget, char *message, size_t message_bytes) {
    if (length < 132 || length > TESSERA_COLOR_MAKING_BYTES) {
        snprintf(message, message_bytes, length < 132 ? "an ICC profile of %zu bytes is not a profile"
                                                      : "its ICC profile of %zu bytes is larger than a profile may be", length);
        return NULL;
    }
    uint32_t elements = 0;
    const char *elaborate = tables_too_elaborate(icc, length, &elements);
    if (elaborate != NULL) {
        if (elaborate[0] == 's')
            snprintf(message, message_bytes, "its ICC profile chains %u processing elements in a table (a profile needs a few; "
                     "at most %d are read)", (unsigned)elements, TESSERA_COLOR_MAX_STAGES);
        else if (elaborate[0] == 'c')
            snprintf(message, message_bytes, "its ICC profile has a curve of more than %d segments in a table (a profile "
                     "needs a few)", TESSERA_COLOR_MAX_SEGMENTS);
        else
            snprintf(message, message_bytes, "its ICC profile has a table that takes more than %u MiB to read (a profile's "
                     "take a few hundred KB)", TESSERA_COLOR_MAX_TABLE_BYTES >> 20);
        return NULL;
    }
    *context = budget_context(budget);
    if (*context == NULL) {
        snprintf(message, message_bytes, "out of memory reading its ICC profile");
        return NULL;
    }
    cmsHPROFILE profile = cmsOpenProfileFromMemTHR(*context, icc, (cmsUInt32Number)length);
    if (profile == NULL) {
        int over = atomic_load(&(*budget)->refused);
        free_context(*context, *budget);
        snprintf(message, message_bytes, over ? "its ICC profile needs more memory to read than a profile may take"
                                              : "its ICC profile is damaged");
        return NULL;
    }
    if (cmsGetColorSpace(profile) != space) {
        // A grey or CMYK profile on an image delivered as RGB (or an RGB one on CMYK inks): not
        // something to apply to its pixels.
        cmsCloseProfile(profile);
        free_context(*context, *budget);
        snprintf(message, message_bytes, "its ICC profile is not %s profile", space_name);
        return NULL;
    }
    return profile;
}

void *tessera_color_transform_from_icc(const uint8_t *icc, size_t length, int *is_srgb, char *message,
                                       size_t message_bytes) {
    *is_srgb = 0;
    cmsContext context = NULL;
    color_budget *budget = NULL;
    cmsHPROFILE profile = open_profile(icc, length, cmsSigRgbData, "an RGB", &context, &budget, message, message_bytes);
    if (profile == NULL) return NULL;
    if (is_srgb_equivalent(context, profile)) {
        cmsCloseProfile(profile);
        free_context(context, budget);
        *is_srgb = 1;
        return NULL;
    }
    return transform_to_srgb(context, budget, profile, message, message_bytes);
}

void *tessera_color_transform_from_cmyk_icc(const uint8_t *icc, size_t length, int inverted, char *message,
                                            size_t message_bytes) {
    cmsContext context = NULL;
    color_budget *budget = NULL;
    cmsHPROFILE profile = open_profile(icc, length, cmsSigCmykData, "a CMYK", &context, &budget, message, message_bytes);
    if (profile == NULL) return NULL;
    // Adobe's inverted inks (255: none) are Little CMS's "reversed" CMYK. Perceptual, as
    // printing profiles are made to be read (and as ImageMagick and Pillow read them): the
    // press's gamut is mapped into the screen's rather than clipped.
    return transform_to_srgb_as(context, budget, profile, inverted ? TYPE_CMYK_8_REV : TYPE_CMYK_8, INTENT_PERCEPTUAL,
                                message, message_bytes);
}

void tessera_color_transform_apply_cmyk(void *transform, const uint8_t *cmyk, uint8_t *rgb, size_t pixels) {
    cmsDoTransform(((color_transform *)transform)->transform, cmyk, rgb, (cmsUInt32Number)pixels);
}

/// H.273 colour primaries as CIE xy: red, green, blue, white.
static int cicp_primaries(int code, cmsCIExyYTRIPLE *primaries, cmsCIExyY *white) {
    double p[8];
    switch (code) {
    case 1: { double v[8] = { 0.640, 0.330, 0.300, 0.600, 0.150, 0.060, 0.3127, 0.3290 }; memcpy(p, v, sizeof v); break; }
    case 4: { double v[8] = { 0.67, 0.33, 0.21, 0.71, 0.14, 0.08, 0.310, 0.316 }; memcpy(p, v, sizeof v); break; }
    case 5: { double v[8] = { 0.64, 0.33, 0.29, 0.60, 0.15, 0.06, 0.3127, 0.3290 }; memcpy(p, v, sizeof v); break; }
    case 6: case 7: { double v[8] = { 0.630, 0.340, 0.310, 0.595, 0.155, 0.070, 0.3127, 0.3290 }; memcpy(p, v, sizeof v); break; }
    case 9: { double v[8] = { 0.708, 0.292, 0.170, 0.797, 0.131, 0.046, 0.3127, 0.3290 }; memcpy(p, v, sizeof v); break; }
    case 11: { double v[8] = { 0.680, 0.320, 0.265, 0.690, 0.150, 0.060, 0.314, 0.351 }; memcpy(p, v, sizeof v); break; }
    case 12: { double v[8] = { 0.680, 0.320, 0.265, 0.690, 0.150, 0.060, 0.3127, 0.3290 }; memcpy(p, v, sizeof v); break; }
    default: return 0;
    }
    primaries->Red = (cmsCIExyY){ p[0], p[1], 1 };
    primaries->Green = (cmsCIExyY){ p[2], p[3], 1 };
    primaries->Blue = (cmsCIExyY){ p[4], p[5], 1 };
    *white = (cmsCIExyY){ p[6], p[7], 1 };
    return 1;
}

/// H.273 transfer characteristics as an lcms2 curve (decoding: encoded value to linear).
static cmsToneCurve *cicp_curve(cmsContext context, int code) {
    switch (code) {
    case 1: case 6: case 14: case 15: {
        // BT.709: V = 1.099 L^0.45 - 0.099 above 0.018, 4.5 L below.
        double params[5] = { 1 / 0.45, 1 / 1.099, 0.099 / 1.099, 1 / 4.5, 0.081 };
        return cmsBuildParametricToneCurve(context, 4, params);
    }
    case 13: {
        double params[5] = { 2.4, 1 / 1.055, 0.055 / 1.055, 1 / 12.92, 0.04045 };
        return cmsBuildParametricToneCurve(context, 4, params);
    }
    case 4: { double gamma = 2.2; return cmsBuildParametricToneCurve(context, 1, &gamma); }
    case 5: { double gamma = 2.8; return cmsBuildParametricToneCurve(context, 1, &gamma); }
    case 8: { double gamma = 1.0; return cmsBuildParametricToneCurve(context, 1, &gamma); }
    default: return NULL;
    }
}

void *tessera_color_transform_from_cicp(int primaries, int transfer, int *is_srgb, char *message, size_t message_bytes) {
    *is_srgb = 0;
    // 2 is "unspecified": read as sRGB's, like an untagged photo.
    if (primaries == 2) primaries = 1;
    if (transfer == 2) transfer = 13;
    if (primaries == 1 && transfer == 13) { *is_srgb = 1; return NULL; }
    cmsCIExyYTRIPLE xy;
    cmsCIExyY white;
    if (!cicp_primaries(primaries, &xy, &white)) {
        snprintf(message, message_bytes, "colour primaries %d (H.273) are not supported", primaries);
        return NULL;
    }
    color_budget *budget = NULL;
    cmsContext context = budget_context(&budget);
    if (context == NULL) {
        snprintf(message, message_bytes, "out of memory building a colour profile");
        return NULL;
    }
    cmsToneCurve *curve = cicp_curve(context, transfer);
    if (curve == NULL) {
        free_context(context, budget);
        snprintf(message, message_bytes, "transfer characteristics %d (H.273: HDR or unknown) are not supported", transfer);
        return NULL;
    }
    cmsToneCurve *curves[3] = { curve, curve, curve };
    cmsHPROFILE profile = cmsCreateRGBProfileTHR(context, &white, &xy, curves);
    cmsFreeToneCurve(curve);
    if (profile == NULL) {
        free_context(context, budget);
        snprintf(message, message_bytes, "Little CMS cannot build a profile for primaries %d, transfer %d", primaries, transfer);
        return NULL;
    }
    return transform_to_srgb(context, budget, profile, message, message_bytes);
}

void tessera_color_transform_apply(void *transform, uint8_t *rgb, size_t pixels) {
    cmsDoTransform(((color_transform *)transform)->transform, rgb, rgb, (cmsUInt32Number)pixels);
}

size_t tessera_color_transform_bytes(const void *transform) {
    return transform == NULL ? 0 : atomic_load(&((const color_transform *)transform)->budget->held);
}

void tessera_color_transform_free(void *transform) {
    if (transform == NULL) return;
    color_transform *made = transform;
    cmsDeleteTransform(made->transform);
    free_context(made->context, made->budget);
    free(made);
}
