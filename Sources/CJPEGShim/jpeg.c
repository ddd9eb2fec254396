#include "CJPEGShim.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>
#include <jerror.h>

/// libjpeg error manager that longjmps back to the tb_* entry point instead of exit().
typedef struct {
    struct jpeg_error_mgr base;
    struct jpeg_progress_mgr progress;
    jmp_buf escape;
    int status;
    uint32_t max_scans;
    int warnings;
    char *message;
    size_t message_size;
} tb_error;

static void tb_record(j_common_ptr cinfo) {
    tb_error *err = (tb_error *)cinfo->err;
    if (err->message && err->message_size > 0) {
        char text[JMSG_LENGTH_MAX];
        err->base.format_message(cinfo, text);
        snprintf(err->message, err->message_size, "%s", text);
    }
}

static void tb_error_exit(j_common_ptr cinfo) {
    tb_error *err = (tb_error *)cinfo->err;
    switch (err->base.msg_code) {
    case JERR_NO_SOI: err->status = TB_JPEG_NOT_JPEG; break;
    case JERR_INPUT_EMPTY: err->status = TB_JPEG_EMPTY; break;
    case JERR_OUT_OF_MEMORY:
    case JERR_NO_BACKING_STORE: err->status = TB_JPEG_NO_MEMORY; break;
    case JERR_IMAGE_TOO_BIG:
    case JERR_WIDTH_OVERFLOW: err->status = TB_JPEG_TOO_LARGE; break;
    case JERR_CONVERSION_NOTIMPL:
    case JERR_BAD_J_COLORSPACE:
    case JERR_BAD_IN_COLORSPACE: err->status = TB_JPEG_UNSUPPORTED; break;
    case JERR_BAD_PRECISION:
    case JERR_SOF_UNSUPPORTED:
    case JERR_NOT_COMPILED:
    case JERR_ARITH_NOTIMPL: err->status = TB_JPEG_UNSUPPORTED_CODING; break;
    default: err->status = TB_JPEG_CORRUPT; break;
    }
    tb_record(cinfo);
    longjmp(err->escape, 1);
}

/// Warnings (msg_level -1) are counted and never printed; running out of data is fatal (TRUNCATED).
static void tb_emit_message(j_common_ptr cinfo, int msg_level) {
    tb_error *err = (tb_error *)cinfo->err;
    if (msg_level >= 0) return; /* trace messages */
    err->warnings++;
    if (err->base.msg_code == JWRN_JPEG_EOF) {
        err->status = TB_JPEG_TRUNCATED;
        tb_record(cinfo);
        longjmp(err->escape, 1);
    }
}

static void tb_output_message(j_common_ptr cinfo) { (void)cinfo; }

static void tb_progress(j_common_ptr cinfo) {
    tb_error *err = (tb_error *)cinfo->err;
    if (!cinfo->is_decompressor) return;
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    if (err->max_scans > 0 && d->input_scan_number > (int)err->max_scans) {
        err->status = TB_JPEG_TOO_LARGE;
        if (err->message && err->message_size > 0)
            snprintf(err->message, err->message_size, "more than %u progressive scans", err->max_scans);
        longjmp(err->escape, 1);
    }
}

static void tb_error_init(tb_error *err, char *message, size_t message_size) {
    memset(err, 0, sizeof(*err));
    jpeg_std_error(&err->base);
    err->base.error_exit = tb_error_exit;
    err->base.emit_message = tb_emit_message;
    err->base.output_message = tb_output_message;
    err->message = message;
    err->message_size = message_size;
    if (message && message_size > 0) message[0] = 0;
}

static void tb_fill_info(j_decompress_ptr d, tb_jpeg_info *info) {
    info->width = d->image_width;
    info->height = d->image_height;
    info->components = d->num_components;
    info->color_space = (int32_t)d->jpeg_color_space;
    info->progressive = d->progressive_mode ? 1 : 0;
}

static int tb_check_start(const uint8_t *data, size_t size, char *message, size_t message_size) {
    if (size == 0) {
        if (message && message_size) snprintf(message, message_size, "empty file");
        return TB_JPEG_EMPTY;
    }
    if (size < 3 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF) {
        if (message && message_size) snprintf(message, message_size, "no JPEG SOI marker");
        return TB_JPEG_NOT_JPEG;
    }
    return TB_JPEG_OK;
}

int tb_jpeg_read_info(const uint8_t *data, size_t size, tb_jpeg_info *info, char *message, size_t message_size) {
    memset(info, 0, sizeof(*info));
    int early = tb_check_start(data, size, message, message_size);
    if (early != TB_JPEG_OK) return early;

    struct jpeg_decompress_struct d;
    tb_error err;
    tb_error_init(&err, message, message_size);
    d.err = &err.base;
    if (setjmp(err.escape)) {
        jpeg_destroy_decompress(&d);
        return err.status;
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, data, (unsigned long)size);
    if (jpeg_read_header(&d, TRUE) != JPEG_HEADER_OK) {
        jpeg_destroy_decompress(&d);
        if (message && message_size) snprintf(message, message_size, "no image in JPEG stream");
        return TB_JPEG_CORRUPT;
    }
    tb_fill_info(&d, info);
    jpeg_destroy_decompress(&d);
    return TB_JPEG_OK;
}

static inline uint8_t tb_mul255(unsigned a, unsigned b) { return (uint8_t)((a * b + 127) / 255); }

int tb_jpeg_decode_rgb(const uint8_t *data, size_t size, const tb_jpeg_limits *limits, tb_jpeg_image *image,
                       char *message, size_t message_size) {
    memset(image, 0, sizeof(*image));
    int early = tb_check_start(data, size, message, message_size);
    if (early != TB_JPEG_OK) return early;

    struct jpeg_decompress_struct d;
    tb_error err;
    /* Everything freed after a longjmp lives in this volatile struct, so its values survive the jump. */
    struct { uint8_t *pixels; uint8_t *row; } volatile owned = { NULL, NULL };
    tb_error_init(&err, message, message_size);
    err.max_scans = limits->max_scans;
    d.err = &err.base;
    if (setjmp(err.escape)) {
        free(owned.pixels);
        free(owned.row);
        jpeg_destroy_decompress(&d);
        return err.status;
    }
    jpeg_create_decompress(&d);
    if (limits->max_memory > 0) d.mem->max_memory_to_use = (long)limits->max_memory;
    err.progress.progress_monitor = tb_progress;
    d.progress = &err.progress;
    jpeg_mem_src(&d, data, (unsigned long)size);
    if (jpeg_read_header(&d, TRUE) != JPEG_HEADER_OK) {
        jpeg_destroy_decompress(&d);
        if (message && message_size) snprintf(message, message_size, "no image in JPEG stream");
        return TB_JPEG_CORRUPT;
    }

    int cmyk = d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK;
    d.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    uint32_t long_side = d.image_width > d.image_height ? d.image_width : d.image_height;
    unsigned denom = 1;
    while (denom < 8 && limits->target_long_side > 0 && (long_side + denom - 1) / denom > limits->target_long_side)
        denom *= 2;

    /* Decompression-bomb guard, on what is decoded: the image at the chosen DCT scale (a 200-megapixel photo decoded
     * at 1/8 is 3 megapixels), decided from the header before libjpeg allocates anything image-sized. A progressive
     * file's coefficients for the full size are bounded by max_memory (libjpeg fails past it). */
    uint64_t out_w = ((uint64_t)d.image_width + denom - 1) / denom;
    uint64_t out_h = ((uint64_t)d.image_height + denom - 1) / denom;
    uint64_t pixels = out_w * out_h;
    if (limits->max_pixels > 0 && pixels > limits->max_pixels) {
        if (message && message_size)
            snprintf(message, message_size,
                     "%ux%u decodes to %llux%llu at 1/%u scale, %llu pixels, over the limit of %llu", d.image_width, d.image_height, (unsigned long long)out_w, (unsigned long long)out_h, denom,
                     (unsigned long long)pixels, (unsigned long long)limits->max_pixels);
        jpeg_destroy_decompress(&d);
        return TB_JPEG_TOO_LARGE;
    }

    d.scale_num = 1;
    d.scale_denom = denom;
    d.dct_method = JDCT_ISLOW;
    d.do_fancy_upsampling = FALSE;

    jpeg_start_decompress(&d);
    uint32_t w = d.output_width, h = d.output_height;
    size_t stride = (size_t)w * 3;
    owned.pixels = malloc(stride * (size_t)h);
    if (!owned.pixels) {
        err.status = TB_JPEG_NO_MEMORY;
        longjmp(err.escape, 1);
    }
    if (cmyk) {
        owned.row = malloc((size_t)w * 4);
        if (!owned.row) {
            err.status = TB_JPEG_NO_MEMORY;
            longjmp(err.escape, 1);
        }
    }
    /* Photoshop (an Adobe APP14 marker) stores CMYK inverted: 255 means no ink. */
    int inverted = d.saw_Adobe_marker;
    while (d.output_scanline < h) {
        uint8_t *dest = owned.pixels + stride * d.output_scanline;
        if (!cmyk) {
            JSAMPROW rows[1] = { dest };
            jpeg_read_scanlines(&d, rows, 1);
        } else {
            JSAMPROW rows[1] = { owned.row };
            jpeg_read_scanlines(&d, rows, 1);
            for (uint32_t x = 0; x < w; x++) {
                unsigned c = owned.row[4 * x], m = owned.row[4 * x + 1], y = owned.row[4 * x + 2], k = owned.row[4 * x + 3];
                if (!inverted) { c = 255 - c; m = 255 - m; y = 255 - y; k = 255 - k; }
                dest[3 * x] = tb_mul255(c, k);
                dest[3 * x + 1] = tb_mul255(m, k);
                dest[3 * x + 2] = tb_mul255(y, k);
            }
        }
    }
    jpeg_finish_decompress(&d);
    image->pixels = owned.pixels;
    image->width = w;
    image->height = h;
    image->scale_denom = denom;
    image->source_width = d.image_width;
    image->source_height = d.image_height;
    image->warnings = err.warnings;
    free(owned.row);
    jpeg_destroy_decompress(&d);
    return TB_JPEG_OK;
}

int tb_jpeg_encode(const uint8_t *pixels, uint32_t width, uint32_t height, int32_t components, int32_t quality,
                   int32_t progressive, uint8_t **out, size_t *out_size, char *message, size_t message_size) {
    *out = NULL;
    *out_size = 0;
    if (width == 0 || height == 0 || (components != 1 && components != 3 && components != 4)) {
        if (message && message_size) snprintf(message, message_size, "bad image geometry");
        return TB_JPEG_UNSUPPORTED;
    }
    struct jpeg_compress_struct c;
    tb_error err;
    unsigned char *buffer = NULL;
    unsigned long buffer_size = 0;
    tb_error_init(&err, message, message_size);
    c.err = &err.base;
    if (setjmp(err.escape)) {
        jpeg_destroy_compress(&c);
        free(buffer); /* address-taken, so it lives in memory and is valid after longjmp */
        return err.status;
    }
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &buffer, &buffer_size);
    c.image_width = width;
    c.image_height = height;
    c.input_components = components;
    c.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 4 ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&c);  /* CMYK: stored as CMYK with an Adobe marker */
    jpeg_set_quality(&c, quality, TRUE);
    if (progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    size_t stride = (size_t)width * (size_t)components;
    while (c.next_scanline < height) {
        JSAMPROW rows[1] = { (JSAMPROW)(pixels + stride * c.next_scanline) };
        jpeg_write_scanlines(&c, rows, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *out = buffer;
    *out_size = buffer_size;
    return TB_JPEG_OK;
}

void tb_jpeg_free(void *pointer) { free(pointer); }
