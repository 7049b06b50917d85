// DecodeBudget.swift — the memory every photo decoder of a render shares, and where the large
// whole-image buffers of progressive photos go when they do not fit it.
//
// A decode asks for an estimate of what it will hold (row buffers, its cell, and the whole-image
// buffers of a multi-scan JPEG) before it starts and gives it back when done. Decodes that do
// not fit wait for others to finish, so the sum stays inside the pool whatever the number of
// workers; a request larger than the pool is cut to the pool and then runs alone, which the plan
// allows up to `oneDecodeLimitBytes` (a decode that would need more is refused first). The pool is a
// fixed part of the memory budget (RenderPlan), not a cap per worker that multiplies.
//
// Threading: `admitted` is called from any number of worker threads at once.
import CTesseraCodec
import CTesseraShims
import Glibc

public final class DecodeBudget: @unchecked Sendable {
    /// Bytes that decoders may hold at once.
    public let poolBytes: Int
    /// Where spill files go (an unnamed file each, on disk: the temporary folder asked for, $TMPDIR or /tmp).
    public let spillDirectory: String

    private let lock = Mutex()
    private let released: Condition
    // Protected by `lock`.
    private var inUseBytes = 0
    private var peakBytes = 0

    /// The most one decode that cannot spill (a HEIF decoded whole, a lossless WebP) may hold:
    /// what the budget leaves beside everything else (a render's plan says; a budget made from
    /// a process budget alone, as mosaic analysis makes it, gives it three quarters). Such a
    /// photo needing more is drawn from its thumbnail if it has one, else refused with the
    /// memory budget that would draw it.
    public let wholeImageLimitBytes: Int

    /// The process budget a render planned `wholeImageLimitBytes` from, when known: the advice
    /// for a photo over the limit is then that budget and the shortfall. (Not for the budgets
    /// made from a process budget alone, analysis and the mosaic's target: their limit is three
    /// quarters of it, which does not grow byte for byte, so they give `budgetToDraw(bytes:)`.)
    public let processBudgetBytes: Int?

    public init(poolBytes: Int, spillDirectory: String, wholeImageLimitBytes: Int? = nil, processBudgetBytes: Int? = nil) {
        precondition(poolBytes > 0)
        self.poolBytes = poolBytes
        self.spillDirectory = spillDirectory
        self.wholeImageLimitBytes = wholeImageLimitBytes ?? poolBytes * 4
        self.processBudgetBytes = processBudgetBytes
        released = Condition(lock)
    }

    /// The pool for a process budget of `budgetBytes` with `workers` decoding threads: an eighth
    /// of the budget, and at least 2 MiB a worker (what a baseline decode of a large photo holds).
    public static func poolBytes(forBudget budgetBytes: Int, workers: Int) -> Int {
        max(workers * (2 << 20), budgetBytes / 8)
    }

    /// A budget with the pool of `poolBytes(forBudget:workers:)`, spilling to `spillDirectory`
    /// or the default temporary directory. One photo decoded whole may take three quarters of
    /// the budget, and never what the process itself holds (RenderPlan.processAllowanceBytes):
    /// at 32M a 22.5 MiB decode on top of the process's 15 MiB peaked at 39 MB.
    public convenience init(budgetBytes: Int, workers: Int, spillDirectory: String? = nil) {
        self.init(poolBytes: DecodeBudget.poolBytes(forBudget: budgetBytes, workers: max(1, workers)),
                  spillDirectory: spillDirectory ?? defaultTemporaryDirectory(),
                  wholeImageLimitBytes: min(budgetBytes * 3 / 4, budgetBytes - RenderPlan.processAllowanceBytes))
    }

    /// The budget `settings` give decoders outside a render (the mosaic's analysis and target):
    /// the pool from the steady state, one whole decode from the whole budget.
    public convenience init(settings: RenderSettings, workers: Int) {
        let budget = settings.maxMemoryBytes
        self.init(poolBytes: DecodeBudget.poolBytes(forBudget: settings.steadyStateBudgetBytes, workers: max(1, workers)),
                  spillDirectory: settings.temporaryDirectory ?? defaultTemporaryDirectory(),
                  wholeImageLimitBytes: min(budget * 3 / 4, budget - RenderPlan.processAllowanceBytes))
    }

    /// The most that decodes held at once so far (their estimates).
    public var peakAdmittedBytes: Int { lock.withLock { peakBytes } }

    /// The most one decode may hold: the pool, or, running alone (`admitted` cuts a larger
    /// request to the pool, so it waits until no other decode holds any), what the plan leaves
    /// for one photo decoded whole.
    public var oneDecodeLimitBytes: Int { max(poolBytes, wholeImageLimitBytes) }

    /// Refuses, before anything is allocated, a decode that would hold more than
    /// `oneDecodeLimitBytes` (`what` it is, for the message), naming the memory budget that would
    /// draw it: an estimate over the limit is never cut down and run anyway.
    func check(oneDecodeBytes bytes: Int, photo path: String, what: String) throws(TesseraError) {
        guard bytes > oneDecodeLimitBytes else { return }
        throw TesseraError.photoNeedsMemory(
            path: path, reason: "\(what) takes about \(formatBytes(Int64(bytes))), more than the memory budget leaves for one photo",
            budgetToDrawBytes: budgetToDraw(oneDecodeBytes: bytes))
    }

    /// The memory budget that draws a photo whose decode holds `bytes` whole. With the process
    /// budget known: that budget and the shortfall (the limit grows with the budget byte for
    /// byte: the steady state is planned first and does not grow with it once the cell cache
    /// is at its smallest, which a shortfall means), with 8 MiB to spare (the process measured
    /// 17 MiB for a render of one tiny photo, against the plan's allowance, then 12 MiB, now
    /// 16; and a decoder's real peak may be a little over its charge: a mosaic advised 4 MiB
    /// over peaked 0.2 MiB over), in whole MiB.
    /// Without: `budgetToDraw(bytes:)`.
    func budgetToDraw(oneDecodeBytes bytes: Int) -> Int64 {
        guard let processBudgetBytes else { return DecodeBudget.budgetToDraw(bytes: Int64(bytes)) }
        return DecodeBudget.budgetToDraw(bytes: Int64(bytes), budgetBytes: Int64(processBudgetBytes),
                                         limitBytes: Int64(oneDecodeLimitBytes))
    }

    /// The budget that lifts a one-decode limit of `limitBytes` under `budgetBytes` to `bytes`.
    /// Also the mosaic's rule for the photos its render would draw grey (it has the plan).
    static func budgetToDraw(bytes: Int64, budgetBytes: Int64, limitBytes: Int64) -> Int64 {
        // Clamped to 2^50 (1 PiB) first, so that no header's figure can overflow the sum.
        let (bytes, budgetBytes, limitBytes) = (clampedBytes(bytes), clampedBytes(budgetBytes), clampedBytes(limitBytes))
        let needed = budgetBytes + max(0, bytes - limitBytes) + (8 << 20)
        return ((needed + (1 << 20) - 1) >> 20) << 20
    }

    /// The memory budget that draws a photo whose decode holds `bytes` whole, when no plan is at
    /// hand: a third more than the decode and 16 MiB, which covers the three-quarter limit of a
    /// budget made from a process budget alone and the process's own share (the render's limit
    /// is the budget less its steady state, which at such a budget is smaller than a third of a
    /// camera photo's decode).
    static func budgetToDraw(bytes: Int64) -> Int64 {
        let bytes = clampedBytes(bytes)
        let needed = bytes + bytes / 3 + (16 << 20)
        return ((needed + (1 << 20) - 1) >> 20) << 20
    }

    private static func clampedBytes(_ bytes: Int64) -> Int64 { min(max(bytes, 0), 1 << 50) }

    /// Runs `body` once `bytes` (at most the pool) are free, holding them until it returns.
    /// `holding`: what this thread was already granted around this call (one thread at a time
    /// may nest, TIFFFormat.decode): the grant is capped to the pool with it, or the thread
    /// would wait for itself.
    func admitted<T, E: Error>(bytes: Int, holding: Int = 0, _ body: () throws(E) -> T) throws(E) -> T {
        let grant = max(0, min(bytes, poolBytes - min(poolBytes, holding)))
        lock.withLock {
            while inUseBytes + grant > poolBytes { released.wait() }
            inUseBytes += grant
            peakBytes = max(peakBytes, inUseBytes)
        }
        defer {
            lock.withLock {
                inUseBytes -= grant
                released.broadcast()
            }
        }
        return try body()
    }
}

/// An unnamed temporary file for one decode's whole-image buffers, opened on first use and
/// closed (so gone) when the decode ends. Handed to C as a `tessera_spill`.
final class SpillFile {
    let directory: String
    private var file: FileDescriptor?
    /// The first failure, reported instead of the decoder's generic message.
    private(set) var error: TesseraError?

    init(directory: String) { self.directory = directory }

    deinit { file?.close() }

    /// What went wrong with the file, said for a user: the folder, the call, and what to do.
    var failureReason: String? {
        guard let error else { return nil }
        var cause = error.description
        if case .system(let operation, let code, _) = error { cause = "\(operation): \(errnoDescription(code))" }
        return "a progressive JPEG this large keeps its decoding data in a temporary file, and that failed in "
            + "\(directory) (\(cause)); free some space there or choose another temporary folder"
    }

    /// Whether the decode put anything in the file.
    var wasUsed: Bool { file != nil }

    private func opened() throws(TesseraError) -> FileDescriptor {
        if let file { return file }
        let made = try FileDescriptor.openAnonymousTemporary(in: directory)
        file = made
        return made
    }

    /// Writes a window back. Its writeback starts at once, so that when it is read back (next
    /// scan) its pages are clean and can be dropped: the file's page cache stays about a window
    /// deep instead of holding the whole array, which in a memory cgroup is charged to the
    /// container and competes with everything else. (Measured, a 600 px grid of 40 large
    /// progressive photos in a 64 MiB cgroup: 30 s with the pages left, 26-27 s with them
    /// dropped; most of that time is the disk, which such a render cannot avoid.)
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Bool {
        do throws(TesseraError) {
            let file = try opened()
            try file.writeAll(bytes, at: offset)
            try file.flushRange(offset: offset, length: Int64(bytes.count), wait: false)
            return true
        } catch {
            if self.error == nil { self.error = error }
            return false
        }
    }

    /// Reads a window; its pages are then dropped (the window holds the bytes now).
    func read(into bytes: UnsafeMutableRawBufferPointer, at offset: Int64) -> Bool {
        do throws(TesseraError) {
            let file = try opened()
            try file.readAll(into: bytes, at: offset)
            file.dropCache(offset: offset, length: Int64(bytes.count))
            return true
        } catch {
            if self.error == nil { self.error = error }
            return false
        }
    }

    /// The C view: callbacks into this object, valid while it lives.
    var cValue: tessera_spill {
        tessera_spill(
            context: Unmanaged.passUnretained(self).toOpaque(),
            read_at: { context, buffer, count, offset in
                let spill = Unmanaged<SpillFile>.fromOpaque(context!).takeUnretainedValue()
                return spill.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: count), at: Int64(offset)) ? 0 : -1
            },
            write_at: { context, buffer, count, offset in
                let spill = Unmanaged<SpillFile>.fromOpaque(context!).takeUnretainedValue()
                return spill.write(UnsafeRawBufferPointer(start: buffer, count: count), at: Int64(offset)) ? 0 : -1
            })
    }
}
