#pragma once
// libheif (HEIF/HEIC and AVIF): the container, its EXIF blocks, and decoding through its codec plugins
// (libde265 for HEVC, dav1d/aom for AV1). Errors are returned as values, so Swift calls it directly.
#include <stddef.h>
#include <stdint.h>
#include <libheif/heif.h>
