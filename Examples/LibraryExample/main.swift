// A grid of every photo in a folder as one JPEG, through the Tessera library.
// swift run tessera-example PHOTOS-FOLDER OUT.jpg
import Glibc
import Tessera

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    print("usage: tessera-example PHOTOS-FOLDER OUT.jpg")
    exit(2)
}
do {
    // Every photo (JPEG, PNG, WebP, HEIF, GIF, TIFF, RAW) under the folder; unreadable files are listed, not fatal.
    let library = try PhotoLibrary.scan([arguments[1]])
    for skipped in library.skipped { print("skipped \(skipped.path): \(skipped.reason)") }
    // 4 columns of 200 px cells, as many rows as the photos need.
    let rows = GridLayout.rows(forPhotoCount: library.photos.count, columns: 4)
    let layout = GridLayout.make(photoCount: library.photos.count, columns: 4, rows: rows,
                                 cellWidth: 200, cellHeight: 200, order: .name)
    var settings = RenderSettings()
    settings.maxMemoryBytes = 48 << 20  // everything the render holds, whatever the size
    let request = RenderRequest(photos: library.photos, layout: layout, settings: settings,
                                outputs: [.jpeg(path: arguments[2])])
    let renderer = try StripeRenderer(request: request)
    let summary = try renderer.render { event in
        if case .photoFailed(let photo) = event { print("placeholder for \(photo.path): \(photo.reason)") }
    }
    print("wrote \(arguments[2]): \(summary.width) x \(summary.height) px, \(summary.outputBytes) bytes")
} catch {
    print("tessera-example: \(error)")
    exit(1)
}
