// Allocator.swift — makes glibc's malloc give large blocks back to the system when they are freed.
//
// glibc serves a block of 128 KiB or more with its own mmap, and unmaps it when freed; but when
// such a block is freed it raises that threshold to the block's size (up to 32 MiB), so the next
// ones of that size come from the heap of the freeing thread's arena, where freed memory stays
// resident. Each worker thread has an arena of its own, so a render decoding a few large
// pictures in turn (a WebP's scaled output, a HEIF's planes, libde265's tables) kept every
// worker's largest ones resident: measured, 32 photos of 4000 x 3000 in five formats at 600 px
// cells peaked at 80.2 MiB, and at 64.8 MiB with the threshold fixed at 1 MiB; five WebPs alone
// 46.5 and 32.0 MiB. A fixed threshold turns the adjustment off.
//
// The fixed threshold also fixes the trim threshold, which the adjustment would have raised with
// it, at its default of 128 KiB: a heap gives back its free top past that. While stripes render,
// that made the buffers every decode and every compressed stripe allocate and free (a collage's
// cells, libjpeg's pools) be faulted in again, page by page, each time. So while a render's
// stripes run (`HeapKeeping`), each heap keeps up to 2 MiB at its top, and gives it back when
// the last render ends. Measured (release, this machine), 4 MiB for the whole process: the
// 1.2-gigapixel grid went from 240,580 page faults and 0.82 s of system time to 8,152 and 0.18
// s, its peak RSS from 44.5 to 45.6 MB; the 10,000-photo collage from 307,723 faults and 5.6 s
// of system time to 10,804 and 3.4 s, 51.9 to 53.7 MB (2 MiB: 39,100 and 11,693 faults; 1 MiB:
// the collage 254,761). For the whole process it also raised the peaks of phases planned
// tightly (a scan of 100,000 folders, a cold mosaic's analysis): hence only while stripes run.
// Blocks over 1 MiB are mapped and unmapped on their own either way.
//
// And one arena for every thread (M_ARENA_MAX 1): what a thread frees below the threshold stays
// in its own arena, for its own next allocations, and each arena's heap keeps its 2 MiB while
// stripes run. With an arena per thread (libheif's and libde265's threads, the workers, the
// writer), 120 phone HEICs (2016 x 1512, each decoded whole) in a grid under a 64 MiB budget
// peaked at 68.3 MiB resident, 72.2 MiB with one worker, the plan's buffers all inside it; with
// one arena, 61.5 and 63.2 MiB (and 58.7 MiB with one worker once the process's allowance was
// 16 MiB, RenderPlan.processAllowanceBytes). The renderer allocates nothing per row or per
// pixel (pools and buffers made once), so the shared lock costs nothing measurable (glibc's
// arena_max tunable on the 0.6.6 build): the 1.2-gigapixel grid took 2.42 and 2.36 s with an
// arena per thread, 2.35 and 2.34 s with one; the 10,000-photo collage 6.94 and 6.19 s, and
// 6.43 and 6.57 s (docs/performance.md, 0.6.8).
import CTesseraShims

/// Fixes glibc's mmap threshold at 1 MiB, so that every large buffer a decode frees goes back to
/// the system at once; makes every thread allocate from one arena; and lets renders keep a
/// little freed memory while their stripes run rather than fault it in again. The `tessera`
/// tool calls this first; a program that renders with the library under a memory budget should
/// too, before it starts any thread (it changes the process's allocator, so the library does
/// not do it on its own).
public func useBoundedMemoryAllocator() {
    _ = tessera_use_one_malloc_arena()
    _ = tessera_set_mmap_threshold(1 << 20)
    HeapKeeping.shared.enable()
}

/// While any render's stripes run, each malloc heap keeps up to `keptBytes` of free memory at
/// its top; after the last, the default (128 KiB) again, and what was kept is given back. Only
/// once `useBoundedMemoryAllocator` has fixed the thresholds (otherwise glibc adjusts its own).
final class HeapKeeping: @unchecked Sendable {
    static let shared = HeapKeeping()
    static let keptBytes = 2 << 20
    static let defaultTrimBytes = 128 << 10
    private let lock = Mutex()
    // Protected by `lock`.
    private var enabled = false
    private var running = 0

    func enable() { lock.withLock { enabled = true } }

    /// Runs `body` (a render's stripes) with heaps keeping their freed memory.
    func whileStripesRun<T>(_ body: () throws(TesseraError) -> T) throws(TesseraError) -> T {
        lock.withLock {
            running += 1
            if enabled && running == 1 { _ = tessera_set_trim_threshold(Int32(HeapKeeping.keptBytes)) }
        }
        defer {
            lock.withLock {
                running -= 1
                if enabled && running == 0 {
                    _ = tessera_set_trim_threshold(Int32(HeapKeeping.defaultTrimBytes))
                    releaseFreedMemory()
                }
            }
        }
        return try body()
    }
}
