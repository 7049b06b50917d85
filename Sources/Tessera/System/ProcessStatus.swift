// ProcessStatus.swift — one field of /proc/self/status.
import CTesseraShims
import Glibc

/// The value of a "kB" field of /proc/self/status (VmHWM, VmRSS, ...), or nil.
func processStatusKilobytes(_ field: String) -> Int64? {
    guard let file = fopen("/proc/self/status", "r") else { return nil }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, 256, file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix(field + ":") { return Int64(text.filter(\.isNumber)) }
    }
    return nil
}

/// Gives back to the kernel what the process freed but malloc kept (each worker thread's arena
/// keeps its own): called between phases, so one phase's freed buffers do not stay resident
/// under the next phase's plan.
func releaseFreedMemory() {
    _ = tessera_release_free_memory()
}
