#pragma once
#include <stddef.h>
#include <libexif/exif-data.h>
#include <libexif/exif-loader.h>
#include <libexif/exif-tag.h>
#include <libexif/exif-utils.h>
#include <libexif/exif-entry.h>
#include <libexif/exif-content.h>

/// The GPS tags are `#define`s that share numbers with interoperability tags; typed here so Swift sees `ExifTag`.
static inline ExifTag tb_exif_tag_gps_latitude_ref(void) { return (ExifTag)EXIF_TAG_GPS_LATITUDE_REF; }
static inline ExifTag tb_exif_tag_gps_latitude(void) { return (ExifTag)EXIF_TAG_GPS_LATITUDE; }
static inline ExifTag tb_exif_tag_gps_longitude_ref(void) { return (ExifTag)EXIF_TAG_GPS_LONGITUDE_REF; }
static inline ExifTag tb_exif_tag_gps_longitude(void) { return (ExifTag)EXIF_TAG_GPS_LONGITUDE; }

/// `exif_data_get_entry` is a macro; this is the same lookup for one IFD (`EXIF_IFD_0`, `EXIF_IFD_EXIF`, `EXIF_IFD_GPS`…).
static inline ExifEntry *tb_exif_entry(ExifData *d, ExifIfd ifd, ExifTag t) {
    if (!d || ifd < 0 || ifd >= EXIF_IFD_COUNT || !d->ifd[ifd]) return NULL;
    return exif_content_get_entry(d->ifd[ifd], t);
}
