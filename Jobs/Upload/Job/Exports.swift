// Destinations, names and the S3 checksum are their own module so that the thin client can check them; the upload kind's users keep
// seeing them through `import UploadJob`.
@_exported import UploadParams
