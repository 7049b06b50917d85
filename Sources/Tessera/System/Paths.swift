// Paths.swift — taking paths apart, as text (no file system access).

/// The directory part of `path` ("." for a bare file name).
func parentDirectory(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    if slash == path.startIndex { return "/" }
    return String(path[..<slash])
}

