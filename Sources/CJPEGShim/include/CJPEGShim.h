#pragma once
// JPEG decode/encode entry points for Swift. libjpeg reports fatal errors through its error_exit hook, which by
// default calls exit(); here it longjmps back into these C functions, which clean up and return a status code.
// No longjmp ever crosses a Swift frame, and no libjpeg type appears in this header.
#include <stddef.h>
#include <stdint.h>

/// Result of every tb_jpeg_* call.
typedef enum {
    TB_JPEG_OK = 0,
    TB_JPEG_EMPTY = 1,        ///< zero bytes of input
    TB_JPEG_NOT_JPEG = 2,     ///< no SOI marker (FF D8) at the start
    TB_JPEG_TRUNCATED = 3,    ///< the data ended before the image did (libjpeg's JWRN_JPEG_EOF)
    TB_JPEG_CORRUPT = 4,      ///< any other libjpeg error (bad markers, bad Huffman data, no image)
    TB_JPEG_TOO_LARGE = 5,    ///< the header's pixel count or scan count exceeds the limits
    TB_JPEG_NO_MEMORY = 6,    ///< libjpeg's memory limit (max_memory_to_use) or malloc failed
    TB_JPEG_UNSUPPORTED = 7,  ///< a colour space or layout libjpeg cannot convert
    TB_JPEG_UNSUPPORTED_CODING = 8,  ///< a valid coding process libjpeg does not decode (12-bit samples, lossless,
                                     ///< hierarchical, arithmetic coding when not compiled in)
} tb_jpeg_status;

/// What the JPEG header (SOF segment) says, read without decoding any pixels.
typedef struct {
    uint32_t width;       ///< pixels, as stored (before EXIF orientation)
    uint32_t height;      ///< pixels, as stored
    int32_t components;   ///< 1 (grey), 3 (YCbCr/RGB) or 4 (CMYK/YCCK)
    int32_t color_space;  ///< libjpeg's J_COLOR_SPACE: 1 grey, 2 RGB, 3 YCbCr, 4 CMYK, 5 YCCK
    int32_t progressive;  ///< 1 for progressive JPEG
} tb_jpeg_info;

/// Limits applied before and during decoding.
typedef struct {
    uint64_t max_pixels;        ///< refuse when the pixels decoded (width × height at the chosen DCT scale, not the
                                ///< header's full size) exceed this (decompression bombs)
    uint64_t max_memory;        ///< bytes; libjpeg's max_memory_to_use (its big buffers fail beyond it)
    uint32_t max_scans;         ///< refuse progressive files with more scans than this (CPU bombs)
    uint32_t target_long_side;  ///< pick the smallest 1/1, 1/2, 1/4, 1/8 scale that gets the long side to this
} tb_jpeg_limits;

/// A decoded image: 8-bit RGB, 3 bytes per pixel, rows top to bottom, no padding. Free `pixels` with tb_jpeg_free.
typedef struct {
    uint8_t *pixels;
    uint32_t width;
    uint32_t height;
    uint32_t scale_denom;  ///< the libjpeg scale used: the image is 1/scale_denom of the stored size
    uint32_t source_width;   ///< the header's width, before scaling
    uint32_t source_height;  ///< the header's height, before scaling
    int32_t warnings;      ///< libjpeg warnings about corrupt data that did not stop decoding
} tb_jpeg_image;

/// Reads the header only. `message` receives libjpeg's text on failure (may be NULL).
int tb_jpeg_read_info(const uint8_t *data, size_t size, tb_jpeg_info *info, char *message, size_t message_size);

/// Decodes at reduced scale into RGB (grey and CMYK/YCCK are converted; Adobe-inverted CMYK is handled).
int tb_jpeg_decode_rgb(const uint8_t *data, size_t size, const tb_jpeg_limits *limits, tb_jpeg_image *image,
                       char *message, size_t message_size);

/// Encodes 8-bit RGB (grey when `components` is 1, CMYK with an Adobe marker when 4) as a JPEG, baseline or, when
/// `progressive` is non-zero, progressive (libjpeg's default scan script); `*out` is malloc'd, free with tb_jpeg_free.
int tb_jpeg_encode(const uint8_t *pixels, uint32_t width, uint32_t height, int32_t components, int32_t quality,
                   int32_t progressive, uint8_t **out, size_t *out_size, char *message, size_t message_size);

/// Frees memory returned by tb_jpeg_decode_rgb or tb_jpeg_encode.
void tb_jpeg_free(void *pointer);
