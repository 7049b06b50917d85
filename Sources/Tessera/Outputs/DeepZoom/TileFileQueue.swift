// TileFileQueue.swift — one thread that writes the pyramid's tile files, in the order given.
//
// Why one thread: creating a file takes its directory's lock, and a level's tiles all finish in
// the same stripe, so encoder jobs creating them side by side spent most of their system time
// spinning on that lock (perf: 12% of samples in rwsem_spin_on_owner under ext4_create). One
// writer never contends, and its system time overlaps the encoders' work. It is a thread of its
// own rather than a Dispatch queue, whose blocks may run on any pool thread: glibc gives each
// thread that allocates a malloc arena of its own, and over a 20-gigapixel render the tiles'
// buffers, freed on ever new pool threads, left several arenas holding memory.
//
// Memory stays bounded: `enqueue` blocks while more than `limitBytes` are waiting. The first
// write error is kept; later tiles are dropped and `enqueue`/`drain` throw it.
final class TileFileQueue: @unchecked Sendable {
    private let lock = Mutex()
    private let changed: Condition
    private let limitBytes: Int
    private var thread: JoinableThread?
    // Protected by `lock`.
    private var waiting: [(path: String, bytes: [UInt8])] = []
    private var next = 0
    private var writing = false
    private var waitingBytes = 0
    private var stopping = false
    private var failure: TesseraError?
    private var written = 0
    private var writtenBytes: Int64 = 0

    /// What the queue holds at most by default (tiles waiting past it block their encoder).
    static let defaultLimitBytes = 4 << 20

    init(limitBytes: Int = TileFileQueue.defaultLimitBytes) throws(TesseraError) {
        self.limitBytes = limitBytes
        changed = Condition(lock)
        thread = try JoinableThread { [unowned self] in self.writeLoop() }
    }

    /// Ends the thread once everything queued is written (or has failed). The owner must call
    /// it: the thread holds the queue until then, so deinit cannot do it.
    func stop() {
        lock.withLock {
            stopping = true
            changed.broadcast()
        }
        thread?.join()
        thread = nil
    }

    /// Queues `bytes` to be written to a new file at `path`.
    func enqueue(path: String, bytes: [UInt8]) throws(TesseraError) {
        let error: TesseraError? = lock.withLock {
            while failure == nil && waitingBytes > 0 && waitingBytes + bytes.count > limitBytes { changed.wait() }
            if failure == nil {
                waitingBytes += bytes.count
                waiting.append((path, bytes))
                changed.broadcast()
            }
            return failure
        }
        if let error { throw error }
    }

    /// Waits until every queued file is written; throws the first write error.
    func drain() throws(TesseraError) {
        let error: TesseraError? = lock.withLock {
            while failure == nil && (next < waiting.count || writing) { changed.wait() }
            return failure
        }
        if let error { throw error }
    }

    var filesWritten: Int { lock.withLock { written } }
    var bytesWritten: Int64 { lock.withLock { writtenBytes } }

    private func writeLoop() {
        while true {
            let item: (path: String, bytes: [UInt8])? = lock.withLock {
                while !stopping && next >= waiting.count { changed.wait() }
                guard next < waiting.count else { return nil }
                let item = waiting[next]
                waiting[next].bytes = []
                next += 1
                if next > 256 && next * 2 > waiting.count {
                    waiting.removeFirst(next)
                    next = 0
                }
                writing = true
                return item
            }
            guard let item else { return }
            var error: TesseraError?
            if lock.withLock({ failure }) == nil {
                do throws(TesseraError) {
                    try item.bytes.withUnsafeBytes { raw in Result { () throws(TesseraError) in try writeNewFile(item.path, raw) } }.get()
                } catch let thrown {
                    error = thrown
                }
            }
            lock.withLock {
                writing = false
                waitingBytes -= item.bytes.count
                if let error, failure == nil { failure = error }
                if error == nil && failure == nil {
                    written += 1
                    writtenBytes += Int64(item.bytes.count)
                }
                changed.broadcast()
            }
        }
    }
}
