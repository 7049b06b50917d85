// Mutex.swift — a pthread mutex and condition variable.
//
// Swift's `Synchronization.Mutex` has no condition variable, and the pipeline needs to wait for
// "stripe i is filled" and "slot i is free". This is the plain pthread pair, heap-allocated so
// its address never moves. (And AtomicCounter, a Swift atomic.)
import Glibc
import Synchronization

/// A non-recursive mutex. `withLock` is the only way to hold it.
public final class Mutex: @unchecked Sendable {
    fileprivate let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Takes the lock; pair with `unlock()` (prefer `withLock`).
    @inline(__always)
    func lock() { pthread_mutex_lock(mutex) }

    @inline(__always)
    func unlock() { pthread_mutex_unlock(mutex) }

    @inline(__always)
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// A condition variable bound to one `Mutex`. Call `wait` and `broadcast` only while holding it.
public final class Condition: @unchecked Sendable {
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private let mutex: Mutex

    public init(_ mutex: Mutex) {
        self.mutex = mutex
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
    }

    /// Waits (the mutex held) until woken; callers re-check their predicate in a loop.
    public func wait() { pthread_cond_wait(condition, mutex.mutex) }

    public func broadcast() { pthread_cond_broadcast(condition) }
    public func signal() { pthread_cond_signal(condition) }
}

/// A count several threads add to (progress: how many items are done). An atomic, relaxed:
/// nothing is published through the count.
final class AtomicCounter: Sendable {
    private let value = Atomic<Int>(0)

    /// Adds one; returns the new count.
    func increment() -> Int { value.add(1, ordering: .relaxed).newValue }
}
