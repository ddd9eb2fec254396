// The library's API takes and gives paths as `BytePath`: its users see the type through `import PhotoLibrary`.
@_exported import TrailbookPaths
